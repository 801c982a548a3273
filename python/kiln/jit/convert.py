"""The source-to-graph converter: runs a function's statements, building graph control flow.

Expressions are evaluated by Python itself in a Scope (so arithmetic, calls, comprehensions and
lambdas keep Python's exact meaning) on graph values, whose operations add nodes. Statements
are interpreted here: an `if` or `while` whose condition is a tensor becomes an if/while node
with region functions; one whose condition is a Python value is decided at compile time, and a
`for` over a Python sequence is unrolled.
"""

import ast
import inspect
import types

from kiln.common.tensor import Tensor
from kiln.jit import builtins_graph, mutation
from kiln.jit.graph_tensor import CompileTimeValueError, GraphTensor
from kiln.jit.scope import CellProxy, Converted, Guards, Scope, is_library
from kiln.jit.source import (
    FunctionSource,
    GraphSyntaxError,
    always_returns,
    assigned_names,
    bind_arguments,
    check_strict,
    contains_return,
)
from kiln.jit.trees import flatten, unflatten

MAX_UNROLLED_ITERATIONS = 100_000


class _Return(Exception):
    def __init__(self, value):
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _TensorExit(Exception):
    """break/continue reached under a tensor condition inside a compile-time loop."""


class _Raised(Exception):
    """A raise statement was emitted; the rest of the block is unreachable."""


class Frame:
    def __init__(self, source, fn_globals, closure, local_values):
        self.source = source
        self.locals = dict(local_values)
        self.fn_globals = fn_globals
        self.closure = closure
        self.region_depth = 0  # > 0 inside a tensor-dependent region
        self.loop_depth = 0  # region_depth where the innermost compile-time loop started
        self.one_branch = {}  # name -> line of the tensor-dependent if that set it in one branch


class NestedFunction:
    """A `def` inside compiled code: calling it compiles its body with access to the frame."""

    def __init__(self, converter, node, frame):
        self.converter, self.node, self.frame = converter, node, frame
        self.__name__ = node.name

    def __call__(self, *args, **kwargs):
        return self.converter.call_nested(self, args, kwargs)


class Converter:
    def __init__(self, emitter):
        self.emitter = emitter
        self.guards = Guards()
        self.depth = 0
        self.frames = []  # (frame, graph function it runs in), innermost last

    # ---- values entering compiled code ----
    def wrap(self, value, description, getter, path=None, cell_attr=False):
        from kiln.nn import Cell  # noqa: PLC0415

        if getter is not None:
            self.guards.record(description, getter, value, cell_attr)
        if isinstance(value, Cell):
            return CellProxy(self, value, path or description)
        if isinstance(value, Tensor):
            # Tensors entering compiled code (Parameters, and tensors of globals, closures and
            # `self`) are graph inputs, read fresh on every run, so changing one in place between
            # calls is seen, as in PyNative. Never computed with eagerly.
            return self.emitter.parameter(value)
        if isinstance(value, type) and issubclass(value, Cell):
            return _BuildAtCompileTime(value)
        if isinstance(value, types.FunctionType) and not is_library(value):
            return Converted(self, value)
        if isinstance(value, types.MethodType) and not is_library(value.__func__):
            return Converted(self, value.__func__, value.__self__)
        return value

    # ---- calls ----
    def call_function(self, fn, args, kwargs):
        source = FunctionSource.of(fn)
        check_strict(source)
        sig = inspect.signature(fn)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{source.name}(): {e}") from None
        bound.apply_defaults()
        closure = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    closure[name] = cell.cell_contents
                except ValueError:
                    pass
        frame = Frame(source, fn.__globals__, closure, bound.arguments)
        if "__class__" in closure and fn.__code__.co_varnames:
            first = frame.locals.get(fn.__code__.co_varnames[0])
            frame.locals.setdefault("super", _ZeroArgSuper(self, closure["__class__"], first))
        if isinstance(source.node, ast.Lambda):
            return self.eval(source.node.body, frame)
        return self.run_body(source.node.body, frame)

    def call_nested(self, nested, args, kwargs):
        node, outer = nested.node, nested.frame
        values = bind_arguments(
            node,
            [self.eval(d, outer) for d in node.args.defaults],
            [None if d is None else self.eval(d, outer) for d in node.args.kw_defaults],
            args,
            kwargs,
        )
        closure = dict(outer.closure)
        closure.update(outer.locals)  # closures see the defining frame's values
        frame = Frame(outer.source, outer.fn_globals, closure, values)
        return self.run_body(node.body, frame)

    def call_cell(self, cell, proxy, args, kwargs):
        from kiln.jit.api import JitFunction  # noqa: PLC0415

        construct = type(cell).construct
        if isinstance(construct, JitFunction):
            construct = construct.fn
        if is_library(construct):
            return construct(proxy, *args, **kwargs)  # kiln's layers run as is, through the proxy
        return self.call_function(construct, (proxy,) + tuple(args), kwargs)

    def assign_attribute(self, cell, path, name, value):
        from kiln.common.parameter import Parameter  # noqa: PLC0415
        from kiln.ops._core import call  # noqa: PLC0415

        target = getattr(cell, name, None)
        if isinstance(target, Parameter):
            call("assign", (target, value))
            return
        raise GraphSyntaxError(
            f"assigning {path}.{name} in Graph mode: only Parameters can be assigned on self "
            f"(STRICT syntax); keep other state outside the compiled function"
        )

    def run_body(self, stmts, frame):
        self.depth += 1
        self.frames.append((frame, self.emitter.b.current_func))
        if self.depth > 200:
            raise RecursionError(
                "Graph mode: calls nest more than 200 deep (recursion is unrolled "
                "at compile time, so it needs a constant stopping condition)"
            )
        try:
            self.exec_block(stmts, frame)
        except _Return as r:
            return r.value
        except _Raised:
            return None
        finally:
            self.depth -= 1
            self.frames.pop()
        return None

    # ---- expressions ----
    def eval(self, node, frame):
        self.set_loc(node, frame)
        node = _ConditionalExpressions().visit(_copy(node))
        expr = ast.Expression(body=node)
        ast.fix_missing_locations(expr)
        code = compile(expr, frame.source.filename, "eval")
        scope = Scope(self, frame.locals, frame.fn_globals, frame.closure)
        scope.locals.setdefault("__kiln_select__", self.select)
        scope.locals.setdefault("__kiln_not__", _logical_not)
        scope.locals.setdefault("__kiln_note_return__", self._note_return)
        try:
            return eval(code, scope)  # noqa: S307 - compiled user code, as Python would run it
        except (_Return, _Break, _Continue, _Raised):
            raise
        except GraphSyntaxError:
            raise
        except Exception as e:
            name = getattr(e, "name", None) if type(e) is NameError else None
            if name in frame.one_branch:
                e = NameError(
                    f"name {name!r} is assigned in only one branch of the tensor-"
                    f"dependent if at line {frame.one_branch[name]}, so it may be "
                    f"undefined here; "
                    f"assign it before the if or in both branches"
                )
            raise _at_line(e, frame.source, node.lineno) from None

    def set_loc(self, node, frame):
        self.emitter.loc = (
            frame.source.filename,
            getattr(node, "lineno", 0),
            getattr(node, "col_offset", 0),
        )

    # ---- statements ----
    def exec_block(self, stmts, frame):
        for i, stmt in enumerate(stmts):
            self.set_loc(stmt, frame)
            if isinstance(stmt, ast.If) and self._early_return_if(stmt, stmts[i + 1 :], frame):
                return
            if isinstance(stmt, (ast.While, ast.For)) and _has_return(stmt.body):
                self._loop_with_return(stmt, stmts[i + 1 :], frame)
                return
            handler = getattr(self, "exec_" + type(stmt).__name__, None)
            if handler is None:
                raise GraphSyntaxError(
                    _where(frame.source, stmt.lineno)
                    + f"{type(stmt).__name__} statements are not supported"
                )
            handler(stmt, frame)

    # ---- return inside a loop ----
    def _loop_with_return(self, loop, rest, frame):
        """`return v` in a loop becomes: remember v, set a flag, break; after the loop,
        `if flag: return v` with the rest of the block as its else branch. The remembered value
        is carried by the loop, so its type is found first by building one iteration on the side
        (a function nothing calls, which dead-code elimination drops)."""
        body = _rewrite_returns(loop.body)
        new_loop = ast.copy_location(
            type(loop)(**{**{f: getattr(loop, f) for f in loop._fields}, "body": body}), loop
        )
        template = self._probe_return(new_loop, frame)
        if template is None:
            raise GraphSyntaxError(
                _where(frame.source, loop.lineno) + "could not work out the type "
                "of the value this loop returns; return after the loop instead"
            )
        leaves, tree = flatten(template)
        frame.locals[_RET] = unflatten(tree, [self._placeholder(v) for v in leaves])
        frame.locals[_RETURNED] = False
        after = ast.If(
            test=ast.Name(id=_RETURNED, ctx=ast.Load()),
            body=[ast.Return(value=ast.Name(id=_RET, ctx=ast.Load()))],
            orelse=[],
        )
        ast.fix_missing_locations(ast.copy_location(after, loop))
        self.exec_block([new_loop, after] + rest, frame)

    def _note_return(self, value):
        if self._return_slot is not None and not self._return_slot:
            self._return_slot.append(value)
        return value

    _return_slot = None

    def _probe_return(self, loop, frame):
        b = self.emitter.b
        group = b.new_group()
        b.begin_region(group, "probe", [])
        self._return_slot = slot = []
        inner = _region_frame(frame)
        inner.locals.update({_RETURNED: False, _RET: None, _BRK: False})
        try:
            if isinstance(loop, ast.For):
                iterable = self.eval(loop.iter, inner)
                first = (
                    iterable.start
                    if isinstance(iterable, builtins_graph.TensorRange)
                    else next(iter(iterable))
                )
                self.assign(loop.target, first, inner)
            self.exec_block(_loop_body_with_exits(loop.body, loop), inner)
        except Exception:  # noqa: BLE001 - the probe only looks for the returned value's type
            pass
        finally:
            self._return_slot = None
            self.emitter.truncate(0)  # the probe leaves no nodes behind
            b.end_region([])
        return slot[0] if slot else None

    def exec_Expr(self, stmt, frame):
        self.eval(stmt.value, frame)

    def exec_Pass(self, stmt, frame):
        pass

    def exec_Assign(self, stmt, frame):
        value = self.eval(stmt.value, frame)
        for target in stmt.targets:
            self.assign(target, value, frame)

    def exec_AnnAssign(self, stmt, frame):
        if stmt.value is not None:
            self.assign(stmt.target, self.eval(stmt.value, frame), frame)

    def exec_AugAssign(self, stmt, frame):
        target = stmt.target
        load = _as_load(target)
        expr = ast.BinOp(left=load, op=stmt.op, right=stmt.value)
        ast.copy_location(expr, stmt)
        self.assign(target, self.eval(expr, frame), frame)

    def assign(self, target, value, frame):
        if isinstance(target, ast.Name):
            frame.locals[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            self._unpack(target, value, frame)
        elif isinstance(target, ast.Attribute):
            obj = self.eval(target.value, frame)
            setattr(obj, target.attr, value)
        elif isinstance(target, ast.Subscript):
            self._assign_subscript(target, value, frame)
        else:
            raise GraphSyntaxError(
                _where(frame.source, target.lineno) + "unsupported assignment target"
            )

    def _unpack(self, target, value, frame):
        items = list(value)
        stars = [i for i, e in enumerate(target.elts) if isinstance(e, ast.Starred)]
        if not stars:
            if len(items) != len(target.elts):
                raise _at_line(
                    ValueError(f"cannot unpack {len(items)} values into {len(target.elts)} names"),
                    frame.source,
                    target.lineno,
                )
            for t, v in zip(target.elts, items):
                self.assign(t, v, frame)
            return
        s = stars[0]
        after = len(target.elts) - s - 1
        for t, v in zip(target.elts[:s], items[:s]):
            self.assign(t, v, frame)
        self.assign(target.elts[s].value, list(items[s : len(items) - after]), frame)
        for t, v in zip(target.elts[s + 1 :], items[len(items) - after :]):
            self.assign(t, v, frame)

    def _assign_subscript(self, target, value, frame):
        container = self.eval(target.value, frame)
        index = self.eval(target.slice, frame)
        if isinstance(container, (GraphTensor, Tensor)):
            try:
                mutation.set_item(self, container, index, value)
            except (TypeError, ValueError, IndexError) as e:
                raise _at_line(e, frame.source, target.lineno) from None
            return
        container[index] = value

    def exec_Return(self, stmt, frame):
        raise _Return(None if stmt.value is None else self.eval(stmt.value, frame))

    def exec_Break(self, stmt, frame):
        if frame.region_depth > frame.loop_depth:  # under a tensor condition
            raise _TensorExit()
        raise _Break()

    def exec_Continue(self, stmt, frame):
        if frame.region_depth > frame.loop_depth:
            raise _TensorExit()
        raise _Continue()

    def exec_FunctionDef(self, stmt, frame):
        if stmt.decorator_list:
            raise GraphSyntaxError(
                _where(frame.source, stmt.lineno) + "decorated nested functions "
                "are not supported; define the function at module level"
            )
        frame.locals[stmt.name] = NestedFunction(self, stmt, frame)

    def exec_Assert(self, stmt, frame):
        test = self.eval(stmt.test, frame)
        message = "" if stmt.msg is None else self.eval(stmt.msg, frame)
        if isinstance(test, GraphTensor):
            text = str(message).replace("{", "{{").replace("}", "}}")
            self._raise_if(test, "AssertionError", text, [], negate=True)
        elif not test:
            raise _at_line(AssertionError(message), frame.source, stmt.lineno)

    def exec_Raise(self, stmt, frame):
        if stmt.exc is None:
            raise GraphSyntaxError(
                _where(frame.source, stmt.lineno) + "bare raise is not supported"
            )
        exc = self.eval(stmt.exc, frame)
        exc_type = exc if isinstance(exc, type) else type(exc)
        args = () if isinstance(exc, type) else exc.args
        parts, values = [], []
        for a in args:
            if isinstance(a, (GraphTensor, Tensor)):
                parts.append("{}")
                values.append(a)
            else:
                parts.append(str(a).replace("{", "{{").replace("}", "}}"))
        self.emitter.raise_(exc_type.__name__, " ".join(parts), values)
        raise _Raised()

    def _raise_if(self, cond, error_type, message, values, negate=False):
        from kiln.ops._core import call  # noqa: PLC0415

        if negate:
            cond = call("logical_not", (call("cast", (cond,), (_bool_enum(),)),))
        b = self.emitter.b
        group = b.new_group()
        b.begin_region(group, "raise", [])
        self.emitter.raise_(error_type, message, values)
        b.end_region([])
        b.begin_region(group, "no_raise", [])
        b.end_region([])
        b.if_(_scalar_bool(cond).handle, group, *self.emitter.loc)

    def select(self, cond, if_true, if_false):
        """`a if cond else b` (and the pieces of `and`/`or`): a graph if for tensor conditions."""
        if not isinstance(cond, GraphTensor):
            return if_true() if cond else if_false()
        b = self.emitter.b
        group = b.new_group()
        branches = []
        for label, thunk in (("then", if_true), ("else", if_false)):
            b.begin_region(group, f"select_{label}", [])
            try:
                leaves, tree = flatten(thunk())
            except BaseException:
                self._abandon_region()
                raise
            handles, consts = self._region_outputs(leaves)
            b.end_region(handles)
            branches.append((leaves, tree, consts))
        self._join_values(branches, None, "this conditional expression")  # check before emitting
        outs = b.if_(_scalar_bool(cond).handle, group, *self.emitter.loc)
        return self._join_values(branches, outs, "this conditional expression")

    # ---- control flow ----
    def exec_If(self, stmt, frame):
        test = self.eval(stmt.test, frame)
        if not isinstance(test, GraphTensor):
            self.exec_block(stmt.body if test else stmt.orelse, frame)
            return
        self._tensor_if(stmt, test, stmt.body, stmt.orelse, frame, returns=False)

    def _early_return_if(self, stmt, rest, frame):
        """`if t: ...return a` followed by more code: the rest becomes the else branch. A return
        nested deeper in either branch (`if t: if u: return a`) makes the rest part of both."""
        if not (
            always_returns(stmt.body)
            or always_returns(stmt.orelse)
            or contains_return(stmt.body)
            or contains_return(stmt.orelse)
        ):
            return False
        test = self.eval(stmt.test, frame)
        if not isinstance(test, GraphTensor):
            self.exec_block((stmt.body if test else stmt.orelse) + rest, frame)
            return True
        body = stmt.body if always_returns(stmt.body) else stmt.body + rest
        orelse = stmt.orelse if always_returns(stmt.orelse) else stmt.orelse + rest
        if not (always_returns(body) and always_returns(orelse)):
            body, orelse = body + [ast.Return(value=None)], orelse + [ast.Return(value=None)]
        self._tensor_if(stmt, test, body, orelse, frame, returns=True)
        return True

    def _tensor_if(self, stmt, test, body, orelse, frame, returns):
        try:
            cond = _scalar_bool(test)
        except CompileTimeValueError as e:
            raise _at_line(e, frame.source, stmt.lineno) from None
        if _ends_in_raise(body) and not _ends_in_raise(orelse):
            # Build the branch that raises second, so it can mirror the other branch's results.
            cond, body, orelse = _logical_not(cond), orelse, body
        names = (
            []
            if returns
            else [
                n
                for n in assigned_names(body + orelse)
                if n in frame.locals or (n in assigned_names(body) and n in assigned_names(orelse))
            ]
        )
        b = self.emitter.b
        group = b.new_group()
        branches = []
        for label, block in (("then", body), ("else", orelse)):
            b.begin_region(group, f"if_{label}", [])
            inner = _region_frame(frame)
            try:
                value = self._run_region(block, inner, returns)
            except BaseException:
                self._abandon_region()
                raise
            if value is _RAISED and branches:
                leaves, tree = branches[0][0], branches[0][1]
                leaves = [self._placeholder(v) for v in leaves]
            else:
                if value is _RAISED:
                    value = None
                result = value if returns else tuple(inner.locals.get(n, _Undefined) for n in names)
                leaves, tree = flatten(result)
            handles, consts = self._region_outputs(leaves)
            b.end_region(handles)
            branches.append((leaves, tree, consts))
        internal = set()
        if not returns and branches:
            k = 0
            for n, v in zip(names, unflatten(branches[0][1], branches[0][0])):
                count = len(flatten(v)[0])
                if n.startswith("__kiln_"):
                    internal.update(range(k, k + count))
                k += count
        self._join(branches, None, frame, stmt, names or ["the returned value"], internal)  # check
        self.set_loc(stmt, frame)
        outs = b.if_(cond.handle, group, *self.emitter.loc)
        result = self._join(branches, outs, frame, stmt, names or ["the returned value"], internal)
        if returns:
            raise _Return(result)
        for n, v in zip(names, result):
            if v is not _Undefined:
                frame.locals[n] = v
        for n in assigned_names(body + orelse):
            if n not in frame.locals:
                frame.one_branch[n] = stmt.lineno

    def _placeholder(self, value):
        """A value of the same type for a branch that raised (never used at run time)."""
        if isinstance(value, GraphTensor):
            from kiln.ops.function.array import zeros  # noqa: PLC0415

            return zeros(value.shape, value.dtype)
        return value

    def _abandon_region(self):
        """Closes a region whose building failed: it keeps no nodes and nothing calls it."""
        self.emitter.truncate(0)
        self.emitter.b.end_region([])

    def _run_region(self, block, frame, returns):
        self.frames.append((frame, self.emitter.b.current_func))
        try:
            self.exec_block(block, frame)
        except _Return as r:
            if not returns:
                raise GraphSyntaxError(
                    _where(frame.source, block[-1].lineno)
                    + "return inside a tensor-dependent branch of a loop is not "
                    "supported yet"
                ) from None
            return r.value
        except _Raised:
            return _RAISED
        finally:
            self.frames.pop()
        return None

    def _region_outputs(self, leaves):
        """Graph handles for a region's results; Python values become constants in the graph."""
        handles, consts = [], []
        for leaf in leaves:
            if isinstance(leaf, (GraphTensor, Tensor, bool, int, float)):
                handles.append(self.emitter.to_graph(leaf, "if").handle)
                consts.append(None if isinstance(leaf, (GraphTensor, Tensor)) else leaf)
            else:
                consts.append(leaf)
        return handles, consts

    def _join(self, branches, outs, frame, stmt, names, internal=()):
        try:
            return self._join_values(
                branches, outs, ", ".join(n for n in names if not n.startswith("__kiln_")), internal
            )
        except TypeError as e:
            raise _at_line(e, frame.source, stmt.lineno) from None

    def _join_values(self, branches, outs, what, internal=()):
        """Merges two branches' results; `internal` leaf positions (the converter's own loop
        flags) may mix Python bools and bool tensors."""
        (la, ta, ca), (lb, tb, cb) = branches
        if ta != tb or len(la) != len(lb):
            raise TypeError(
                f"the two branches give different structures for {what}: "
                f"{unflatten(ta, la)!r} vs {unflatten(tb, lb)!r}"
            )
        joined, k = [], 0
        for pos, (a, b, x, y) in enumerate(zip(la, lb, ca, cb)):
            a_graph, b_graph = x is None, y is None
            numeric = isinstance(a, (GraphTensor, Tensor, bool, int, float))
            if not numeric:
                if a != b:
                    raise TypeError(
                        f"the two branches give {a!r} and {b!r} for {what}, which cannot be merged"
                    )
                joined.append(a)
                continue
            out = self.emitter.wrap(outs[k]) if outs is not None else None
            k += 1
            if pos in internal:
                joined.append(a if not a_graph and not b_graph and a == b else out)
                continue
            if a_graph != b_graph or (not a_graph and type(a) is not type(b)):
                raise TypeError(
                    f"the two branches give a {_kind(a)} and a {_kind(b)} for {what}; "
                    f"both sides must agree in kind and dtype"
                )
            if a_graph and (
                a.dtype != b.dtype if hasattr(a, "dtype") and hasattr(b, "dtype") else False
            ):
                raise TypeError(
                    f"the two branches give {_kind(a)} and {_kind(b)} for {what}; "
                    f"both sides must agree in dtype"
                )
            joined.append(a if not a_graph and a == b else out)
        return unflatten(ta, joined)

    def exec_While(self, stmt, frame):
        if stmt.orelse:
            raise GraphSyntaxError(
                _where(frame.source, stmt.lineno) + "while/else is not supported"
            )
        test = self.eval(stmt.test, frame)
        if not isinstance(test, GraphTensor) and _has_loop_exit(stmt.body):
            # Try it as a compile-time loop; if an exit turns out to depend on a tensor, the trip
            # count is data dependent: forget the attempt and build a graph loop instead.
            mark, saved = self.emitter.b.mark(), dict(frame.locals)
            try:
                self._unrolled_while(stmt, frame, test)
                return
            except _TensorExit:
                self.emitter.truncate(mark)
                frame.locals.clear()
                frame.locals.update(saved)
                test = self.emitter.to_graph(test, "while")
        if not isinstance(test, GraphTensor):
            self._unrolled_while(stmt, frame, test)
            return
        if _has_loop_exit(stmt.body):
            frame.locals[_BRK] = False
            body = _loop_body_with_exits(stmt.body, stmt)
            self._tensor_loop(
                stmt,
                frame,
                lambda inner: _and_not(
                    self.emitter.to_graph(self.eval(stmt.test, inner), "while"), inner.locals[_BRK]
                ),
                body,
            )
            del frame.locals[_BRK]
            return
        self._tensor_loop(stmt, frame, lambda inner: self.eval(stmt.test, inner), stmt.body)

    def _unrolled_while(self, stmt, frame, test):
        saved_depth, frame.loop_depth = frame.loop_depth, frame.region_depth
        try:
            self._unrolled_while_body(stmt, frame, test)
        finally:
            frame.loop_depth = saved_depth

    def _unrolled_while_body(self, stmt, frame, test):
        if True:
            count = 0
            while test:
                try:
                    self.exec_block(stmt.body, frame)
                except _Break:
                    break
                except _Continue:
                    pass
                count += 1
                if count > MAX_UNROLLED_ITERATIONS:
                    raise _at_line(
                        RuntimeError(
                            "this while loop ran more than 100000 times at "
                            "compile time; make its condition a tensor"
                        ),
                        frame.source,
                        stmt.lineno,
                    )
                test = self.eval(stmt.test, frame)
                if isinstance(test, GraphTensor):
                    raise _TensorExit()

    def _tensor_loop(self, stmt, frame, make_cond, body, extra=None):
        """A loop in the graph; names the body assigns that exist before it are carried."""
        carried_names = [n for n in assigned_names(body) if n in frame.locals]
        if extra:
            carried_names += [n for n in extra if n not in carried_names]
        values = [frame.locals[n] for n in carried_names]
        leaves, tree = flatten(tuple(values))
        for leaf in leaves:
            if not isinstance(leaf, (GraphTensor, Tensor, bool, int, float)):
                raise _at_line(
                    TypeError(
                        f"a loop whose condition is a tensor can only carry "
                        f"tensors and numbers, not {leaf!r}"
                    ),
                    frame.source,
                    stmt.lineno,
                )
        init = [self.emitter.to_graph(v, "while") for v in leaves]
        metas = [(v._dtype, list(v.shape)) for v in init]
        b = self.emitter.b
        group = b.new_group()

        def enter(prefix):
            params = [self.emitter.wrap(h) for h in b.begin_region(group, prefix, metas)]
            inner = _region_frame(frame)
            for n, v in zip(carried_names, unflatten(tree, params)):
                inner.locals[n] = v
            return inner

        inner = enter("while_cond")
        try:
            cond = make_cond(inner)
        except BaseException:
            self._abandon_region()
            raise
        if not isinstance(cond, GraphTensor):
            cond = self.emitter.to_graph(bool(cond), "while")
        try:
            cond = _scalar_bool(cond)
        except CompileTimeValueError as e:
            raise _at_line(e, frame.source, stmt.lineno) from None
        b.end_region([cond.handle])
        inner = enter("while_body")
        try:
            self._run_region(body, inner, returns=False)
        except BaseException:
            self._abandon_region()
            raise
        new_leaves, new_tree = flatten(tuple(inner.locals[n] for n in carried_names))
        if new_tree != tree:
            raise _at_line(
                TypeError("a loop-carried value changes structure in the loop body"),
                frame.source,
                stmt.lineno,
            )
        results = []
        for n, before, after in zip(_leaf_names(carried_names, values), init, new_leaves):
            g = self.emitter.to_graph(after, "while")
            if g._dtype != before._dtype or g.shape != before.shape:
                raise _at_line(
                    TypeError(
                        f"loop-carried {n} is {before.dtype}{list(before.shape)} before the "
                        f"loop and {g.dtype}{list(g.shape)} after an iteration; both must agree"
                    ),
                    frame.source,
                    stmt.lineno,
                )
            results.append(g.handle)
        b.end_region(results)
        self.set_loc(stmt, frame)
        outs = [
            self.emitter.wrap(h)
            for h in b.while_([v.handle for v in init], group, *self.emitter.loc)
        ]
        for n, v in zip(carried_names, unflatten(tree, outs)):
            frame.locals[n] = v

    def exec_For(self, stmt, frame):
        if stmt.orelse:
            raise GraphSyntaxError(_where(frame.source, stmt.lineno) + "for/else is not supported")
        iterable = self.eval(stmt.iter, frame)
        if isinstance(iterable, builtins_graph.TensorRange):
            self._tensor_for(stmt, iterable, frame)
            return
        exits = _has_loop_exit(stmt.body)
        body = _loop_body_with_exits(stmt.body, stmt) if exits else stmt.body
        if exits:
            frame.locals[_BRK] = False
        saved_depth, frame.loop_depth = frame.loop_depth, frame.region_depth
        try:
            self._unrolled_for(stmt, frame, iterable, body, exits)
        finally:
            frame.loop_depth = saved_depth

    def _unrolled_for(self, stmt, frame, iterable, body, exits):
        for count, item in enumerate(iterable):
            if count > MAX_UNROLLED_ITERATIONS:
                raise _at_line(
                    RuntimeError("this for loop unrolls more than 100000 times"),
                    frame.source,
                    stmt.lineno,
                )
            broke = frame.locals.get(_BRK, False) if exits else False
            if broke is True:
                break
            self.assign(stmt.target, item, frame)
            if isinstance(broke, GraphTensor):  # an earlier iteration may have broken at run time
                guard = ast.If(
                    test=ast.UnaryOp(op=ast.Not(), operand=ast.Name(id=_BRK, ctx=ast.Load())),
                    body=body,
                    orelse=[],
                )
                self.exec_block([ast.fix_missing_locations(ast.copy_location(guard, stmt))], frame)
            else:
                self.exec_block(body, frame)
        if exits:
            frame.locals.pop(_BRK, None)
            frame.locals.pop(_SKIP, None)

    def _tensor_for(self, stmt, rng, frame):
        """for i in range(tensor): a graph loop over a hidden counter."""
        from kiln.ops._core import call  # noqa: PLC0415

        if not isinstance(stmt.target, ast.Name):
            raise GraphSyntaxError(
                _where(frame.source, stmt.lineno)
                + "a loop over range(tensor) needs a single loop variable"
            )
        counter = "__kiln_for_counter"
        frame.locals[counter] = call(
            "cast", (self.emitter.to_graph(rng.start, "range"),), (_int64(),)
        )
        frame.locals[stmt.target.id] = frame.locals[counter]
        stop, step = rng.stop, rng.step
        assign_target = ast.Assign(
            targets=[stmt.target], value=ast.Name(id=counter, ctx=ast.Load())
        )
        bump = ast.AugAssign(
            target=ast.Name(id=counter, ctx=ast.Store()),
            op=ast.Add(),
            value=ast.Constant(value=step),
        )
        for node in (assign_target, bump):
            ast.copy_location(node, stmt)
            ast.fix_missing_locations(node)
        exits = _has_loop_exit(stmt.body)
        inner_body = _loop_body_with_exits(stmt.body, stmt) if exits else stmt.body
        body = [assign_target] + inner_body + [bump]
        extra = [counter]
        if exits:
            frame.locals[_BRK] = False
            extra.append(_BRK)

        def cond(inner):
            c = call("less", (inner.locals[counter], stop))
            return _and_not(c, inner.locals[_BRK]) if exits else c

        self._tensor_loop(stmt, frame, cond, body, extra=extra)
        del frame.locals[counter]
        frame.locals.pop(_BRK, None)


class _ZeroArgSuper:
    """`super()` in a compiled method: looks past `cls` in the MRO of `self` (which may be a
    CellProxy), and compiles what it finds like any other method."""

    def __init__(self, converter, cls, self_obj):
        self.converter, self.cls, self.self_obj = converter, cls, self_obj

    def __call__(self, *args):
        if args:
            return super(*args)  # noqa: UP008 - explicit two-argument form passes through
        real = getattr(self.self_obj, "_cell", self.self_obj)
        mro = type(real).__mro__
        return _SuperView(self.converter, mro[mro.index(self.cls) + 1 :], self.self_obj)


class _SuperView:
    def __init__(self, converter, mro, self_obj):
        self._converter, self._mro, self._self = converter, mro, self_obj

    def __getattr__(self, name):
        for klass in self._mro:
            if name in vars(klass):
                value = vars(klass)[name]
                if isinstance(value, types.FunctionType):
                    if is_library(value):
                        return types.MethodType(value, self._self)
                    return Converted(self._converter, value, self._self)
                return value
        raise AttributeError(f"super() has no attribute {name!r}")


class _BuildAtCompileTime:
    """Constructing a Cell inside compiled code builds it once, eagerly, at compile time (its
    initializers run as ordinary ops, not as graph nodes)."""

    def __init__(self, cls):
        self.cls = cls

    def __call__(self, *args, **kwargs):
        from kiln import _graph_state  # noqa: PLC0415

        with _graph_state.eager():
            return self.cls(*args, **kwargs)


_RAISED = object()
_BRK, _SKIP = "__kiln_brk", "__kiln_skip"
_RET, _RETURNED = "__kiln_ret", "__kiln_returned"


def _has_return(stmts):
    for s in stmts:
        if isinstance(s, ast.Return):
            return True
        if isinstance(s, ast.If) and (_has_return(s.body) or _has_return(s.orelse)):
            return True
    return False


def _rewrite_returns(stmts):
    """return v -> __kiln_ret = v; __kiln_returned = True; break (through nested ifs)."""
    out = []
    for s in stmts:
        if isinstance(s, ast.Return):
            value = s.value if s.value is not None else ast.Constant(value=None)
            note = ast.Call(
                func=ast.Name(id="__kiln_note_return__", ctx=ast.Load()), args=[value], keywords=[]
            )
            out += [
                ast.fix_missing_locations(
                    ast.copy_location(
                        ast.Assign(targets=[ast.Name(id=_RET, ctx=ast.Store())], value=note), s
                    )
                ),
                _flag(_RETURNED, True, s),
                ast.fix_missing_locations(ast.copy_location(ast.Break(), s)),
            ]
        elif isinstance(s, ast.If) and (_has_return(s.body) or _has_return(s.orelse)):
            node = ast.If(
                test=s.test, body=_rewrite_returns(s.body), orelse=_rewrite_returns(s.orelse)
            )
            out.append(ast.fix_missing_locations(ast.copy_location(node, s)))
        else:
            out.append(s)
    return out


def _has_loop_exit(stmts):
    """Whether break/continue of *this* loop appear (nested loops' own are not counted)."""
    for s in stmts:
        if isinstance(s, (ast.Break, ast.Continue)):
            return True
        if isinstance(s, ast.If) and (_has_loop_exit(s.body) or _has_loop_exit(s.orelse)):
            return True
    return False


def _flag(name, value, like):
    node = ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=ast.Constant(value=value))
    return ast.fix_missing_locations(ast.copy_location(node, like))


def _rewrite_exits(stmts):
    """break -> set the break and skip flags; continue -> set the skip flag; the statements after
    one that may exit run only while the skip flag is unset. With flags that are tensors (an exit
    under a tensor condition), those guards become graph ifs."""
    out = []
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Break):
            out += [_flag(_BRK, True, s), _flag(_SKIP, True, s)]
            return out
        if isinstance(s, ast.Continue):
            out.append(_flag(_SKIP, True, s))
            return out
        if isinstance(s, ast.If) and (_has_loop_exit(s.body) or _has_loop_exit(s.orelse)):
            node = ast.If(
                test=s.test,
                body=_rewrite_exits(s.body) or [ast.Pass()],
                orelse=_rewrite_exits(s.orelse),
            )
            out.append(ast.fix_missing_locations(ast.copy_location(node, s)))
            rest = stmts[i + 1 :]
            if rest:
                guard = ast.If(
                    test=ast.UnaryOp(op=ast.Not(), operand=ast.Name(id=_SKIP, ctx=ast.Load())),
                    body=_rewrite_exits(rest),
                    orelse=[],
                )
                out.append(ast.fix_missing_locations(ast.copy_location(guard, rest[0])))
            return out
        out.append(s)
    return out


def _loop_body_with_exits(stmts, like):
    return [_flag(_SKIP, False, like)] + _rewrite_exits(stmts)


def _ends_in_raise(block):
    return bool(block) and isinstance(block[-1], ast.Raise)


class _UndefinedType:
    def __repr__(self):
        return "<undefined>"


_Undefined = _UndefinedType()


class _ConditionalExpressions(ast.NodeTransformer):
    """Rewrites `a if c else b`, `a and b`, `a or b` and `not a` into calls the converter
    resolves, so a tensor condition becomes graph control flow instead of a Python bool."""

    def visit_IfExp(self, node):
        self.generic_visit(node)
        return _call("__kiln_select__", [node.test, _thunk(node.body), _thunk(node.orelse)], node)

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        result = node.values[-1]
        for value in reversed(node.values[:-1]):
            # a and b == b if a else a;  a or b == a if a else b (a evaluated once via a lambda arg)
            name = "__kiln_v"
            left = ast.Name(id=name, ctx=ast.Load())
            if isinstance(node.op, ast.And):
                body = _call("__kiln_select__", [left, _thunk(result), _thunk(left)], node)
            else:
                body = _call("__kiln_select__", [left, _thunk(left), _thunk(result)], node)
            lam = ast.Lambda(
                args=ast.arguments(
                    posonlyargs=[],
                    args=[ast.arg(arg=name)],
                    kwonlyargs=[],
                    kw_defaults=[],
                    defaults=[],
                ),
                body=body,
            )
            result = ast.Call(func=lam, args=[value], keywords=[])
            ast.copy_location(result, node)
        return result

    def visit_Compare(self, node):
        """a < b < c -> (a < b) and (b < c), so chained comparisons of tensors become graph ops."""
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        operands = [node.left] + node.comparators
        parts = [
            ast.copy_location(
                ast.Compare(left=operands[i], ops=[op], comparators=[operands[i + 1]]), node
            )
            for i, op in enumerate(node.ops)
        ]
        return self.visit_BoolOp(ast.copy_location(ast.BoolOp(op=ast.And(), values=parts), node))

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return _call("__kiln_not__", [node.operand], node)
        return node


def _call(name, args, like):
    call = ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=args, keywords=[])
    return ast.copy_location(call, like)


def _thunk(expr):
    return ast.Lambda(
        args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=expr,
    )


def _copy(node):
    import copy  # noqa: PLC0415

    return copy.deepcopy(node)


def _and_not(cond, flag):
    """cond and not flag, for a loop condition with a break flag."""
    if flag is False:
        return cond
    from kiln.ops._core import call  # noqa: PLC0415

    return call(
        "logical_and",
        (_scalar_bool(cond) if isinstance(cond, GraphTensor) else cond, _logical_not(flag)),
    )


def _logical_not(value):
    if isinstance(value, GraphTensor):
        from kiln.ops._core import call  # noqa: PLC0415

        return call("logical_not", (value,))
    return not value


def _region_frame(frame):
    inner = Frame(frame.source, frame.fn_globals, frame.closure, frame.locals)
    inner.region_depth = frame.region_depth + 1
    inner.loop_depth = frame.loop_depth
    inner.one_branch = dict(frame.one_branch)
    return inner


def _scalar_bool(value):
    from kiln.ops._core import call  # noqa: PLC0415

    if value.size != 1:
        raise CompileTimeValueError(
            f"a condition must be a single value, got a tensor of shape "
            f"{value.shape}; use .any() or .all()"
        )
    if value.shape != ():
        value = call("reshape", (value,), ((),))
    if value._dtype != _bool_enum():
        value = call("not_equal", (value, 0))
    return value


def _bool_enum():
    from kiln import _C  # noqa: PLC0415

    return _C.DType.bool


def _int64():
    from kiln import _C  # noqa: PLC0415

    return _C.DType.int64


def _kind(value):
    if isinstance(value, (GraphTensor, Tensor)):
        return f"tensor ({value.dtype})"
    return type(value).__name__


def _leaf_names(names, values):
    out = []
    for n, v in zip(names, values):
        count = len(flatten(v)[0])
        out += [n] * count if count > 1 else [n]
    return out


def _as_load(target):
    node = ast.parse(ast.unparse(target), mode="eval").body
    return ast.copy_location(node, target)


def _where(source, lineno):
    return f'File "{source.filename}", line {lineno}\n    {source.line_text(lineno)}\n'


def _at_line(error, source, lineno):
    """The same kind of exception, with the user's file, line and source text appended."""
    message = f"{error}\n  at {_where(source, lineno).rstrip()}"
    try:
        new = type(error)(message)
    except Exception:  # noqa: BLE001 - exception types with unusual constructors
        new = RuntimeError(message)
    return new


def _is_parameter(value):
    from kiln.common.parameter import Parameter  # noqa: PLC0415

    return isinstance(value, Parameter)
