"""The source-to-graph converter: runs a function's statements, building graph control flow.

Expressions are evaluated by Python itself in a Scope (so arithmetic, calls, comprehensions and
lambdas keep Python's exact meaning) on graph values, whose operations add nodes. Statements
are interpreted by the Converter, whose methods are spread over mixins: simple statements
(statements.py), branches (branches.py) and loops (loops.py). An `if` or `while` whose condition
is a tensor becomes an if/while node with region functions; one whose condition is a Python value
is decided at compile time, and a `for` over a Python sequence is unrolled.
"""

import ast
import functools
import inspect
import types

from kiln.common.parameter import Parameter
from kiln.common.tensor import Tensor
from kiln.jit import builtin_checks, cell_hooks, lax_text
from kiln.jit.branches import BranchesMixin
from kiln.jit.builtins_graph import SPECIAL
from kiln.jit.callables import BuildAtCompileTime, ZeroArgSuper
from kiln.jit.cell_interface import CellBase
from kiln.jit.conditions import contains, has_key, logical_not
from kiln.jit.errors import at_line, explain_one_branch_name, where
from kiln.jit.forbidden import refused
from kiln.jit.frames import (
    BreakSignal,
    ContinueSignal,
    Frame,
    RaisedSignal,
    ReturnSignal,
)
from kiln.jit.guards import Guards
from kiln.jit.loops import LoopsMixin
from kiln.jit.rewrites import (
    BUILTIN_FN,
    CONTAINS_FN,
    FSTRING_FN,
    GENERATOR_FN,
    HAS_KEY_FN,
    LIST_METHOD_FN,
    NOT_FN,
    NOTE_RETURN_FN,
    SELECT_FN,
    STR_FORMAT_FN,
    has_return,
    rewrite_conditionals,
)
from kiln.jit.scope import CellProxy, Converted, Scope, is_library
from kiln.jit.source import (
    FunctionSource,
    GraphSyntaxError,
    assigned_attributes,
    bind_arguments,
    check_strict,
)
from kiln.jit.statements import StatementsMixin
from kiln.ops._core import call


class Converter(StatementsMixin, BranchesMixin, LoopsMixin):
    """Compiles calls from source into the emitter's graph; one per compilation."""

    graph_builtins = SPECIAL  # builtins compiled code sees in place of Python's (print, ...)

    def __init__(self, emitter, lax=True):
        self.emitter = emitter
        self.lax = lax  # LAX syntax level: what STRICT cannot compile runs in Python (jit/lax.py)
        emitter.converter = self  # what compiled code calls back into (_graph_state.converter)
        self.guards = Guards()
        emitter.is_outside = self.guards.holds
        self.depth = 0
        self.max_call_depth = None  # set_context's, read on the first call
        self.frames = []  # (frame, graph function it runs in), innermost last
        # (id(cell), name) of non-Parameter attributes compiled code assigns (LAX): run-time
        # state, read when the graph runs instead of folded and guarded
        self.written_attributes = set()

    # ---- values entering compiled code ----
    def wrap(self, value, description, getter, path=None, cell_attr=False, key=None):
        """`value` as compiled code sees it; with a getter, read again by a guard (`key`: what
        identifies the place it was read from, when the description alone may not)."""
        if getter is not None:
            self.guards.record(description, getter, value, cell_attr, key)
        seen = refused(value, self.guards)  # APIs a graph may not call or reads settings with
        if seen is not None:
            return seen
        if isinstance(value, CellBase):
            return CellProxy(self, value, path or description)
        if isinstance(value, Tensor):
            # Tensors entering compiled code (Parameters, and tensors of globals, closures and
            # `self`) are graph inputs, read fresh on every run, so changing one in place between
            # calls is seen, as in PyNative. Never computed with eagerly.
            return self.emitter.parameter(value)
        if isinstance(value, type) and issubclass(value, CellBase):
            return BuildAtCompileTime(value)
        if isinstance(value, types.FunctionType) and not is_library(value):
            return Converted(self, value)
        if isinstance(value, types.MethodType) and not is_library(value.__func__):
            return Converted(self, value.__func__, value.__self__)
        if (isinstance(value, functools.partial) and isinstance(value.func, types.FunctionType)
                and not is_library(value.func)):
            # functools.partial(user_fn, ...): user_fn compiled from source, the bound arguments
            # entering as globals do (a bound tensor is a graph input)
            bound = [self.wrap(a, f"{description} argument {i}", None)
                     for i, a in enumerate(value.args)]
            keywords = {k: self.wrap(v, f"{description} argument {k}", None)
                        for k, v in value.keywords.items()}
            return Converted(self, value.func, None, bound, keywords)
        return value

    def tensor_of_graph_value(self, value, dtype):
        """Tensor(value) in compiled code for a graph value: a graph tensor (a copy, as
        Tensor(tensor) shares in PyNative but a graph value has no storage to share yet)."""
        from kiln.jit import lax  # noqa: PLC0415

        if isinstance(value, lax.RuntimeObject):
            return lax.to_tensor(value, dtype)
        return value if dtype is None else call("cast", (value,), (_dtype_enum(dtype),))

    # ---- calls ----
    def call_function(self, fn, args, kwargs):
        source = FunctionSource.of(fn)
        check_strict(source, self.lax)
        sig = inspect.signature(fn)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{source.name}(): {e}") from None
        passed = set(bound.arguments)
        bound.apply_defaults()
        for name, value in bound.arguments.items():
            if name not in passed:
                # A default is one object shared by every call, as in Python, and enters compiled
                # code as a global does: a tensor becomes a graph input (changes to it are seen,
                # index assignment writes it back), a function or Cell is compiled from its
                # source rather than run as plain Python on graph values.
                bound.arguments[name] = self.wrap(value, f"{source.name}() default {name}", None)
        closure, cells = _closure_values(fn)
        if self.lax:
            self._note_written_attributes(source, bound.arguments)
        frame = Frame(source, fn.__globals__, closure, bound.arguments, cells)
        if "__class__" in closure and fn.__code__.co_varnames:
            first = frame.locals.get(fn.__code__.co_varnames[0])
            frame.locals.setdefault("super", ZeroArgSuper(self, closure["__class__"], first))
        if isinstance(source.node, ast.Lambda):
            return self.eval(source.node.body, frame)
        return self.run_body(source.node.body, frame)

    def _note_written_attributes(self, source, arguments):
        """Attributes of a Cell argument (`self`) that the function assigns are run-time state
        from the start of the compile, so reads before the assignment are run-time reads too."""
        for arg_name, attr in assigned_attributes(source.node):
            owner = arguments.get(arg_name)
            if isinstance(owner, CellProxy):
                cell = object.__getattribute__(owner, "_cell")
                if not isinstance(getattr(cell, attr, None), (Parameter, CellBase)):
                    self.written_attributes.add((id(cell), attr))

    def list_method(self, receiver, name, *args, **kwargs):
        """receiver.append/extend/insert/pop/remove/clear/reverse/sort(...) on a list from
        outside the function (a global, a closure variable, an attribute): at the LAX level the
        change happens when the graph runs, on every call, as in PyNative, and the list is
        run-time state from then on (guarded by identity only); STRICT refuses it."""
        builtin_checks.check_list_call(receiver, name, args)  # insert's and pop's index
        outside = type(receiver) is list and self.guards.read_directly(receiver)
        if not self.lax and type(receiver) is list and (outside or self.guards.reaches(receiver)):
            self.refuse_outside_change(f"list.{name}")
        if outside:
            from kiln.jit import lax  # noqa: PLC0415

            self.guards.by_identity(receiver)
            change = getattr(receiver, name)
            return lax.run_later(lambda *a, **k: change(*a, **k), args, kwargs,
                                 f"list.{name} on an outside list",
                                 output="object" if name == "pop" else "none", probe=False)
        return getattr(receiver, name)(*args, **kwargs)

    def refuse_outside_change(self, what):
        """STRICT: compiled code may not change a list or dict it read from outside (a global,
        a closure variable, an attribute of self): a graph holds no Python state (TypeError, as
        MindSpore's STRICT level)."""
        raise TypeError(
            f"Graph mode (STRICT): compiled code changes a list or dict from outside the "
            f"function ({what}); at STRICT syntax level a graph holds no Python state. Use the "
            f"LAX level (the default), or keep the state outside the compiled function"
        )

    def runtime_attribute(self, cell, path, name):
        """A read of an attribute compiled code writes (LAX): a run-time read."""
        from kiln.jit import lax  # noqa: PLC0415

        return lax.run_later(getattr, (cell, name), {}, f"{path}.{name}")

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
        cells = {n: c for n, c in outer.closure_cells.items() if n not in outer.locals}
        frame = Frame(outer.source, outer.fn_globals, closure, values, cells)
        return self.run_body(node.body, frame)

    def call_cell(self, cell, proxy, args, kwargs):
        """Compiles cell's construct into the graph, `self` being `proxy`. It is called as
        compiled code calls what it reads: a plain method is compiled from its source, and a
        jitted one (a JitFunction) compiles itself inline, as jitted functions called while
        compiling do."""
        construct = type(cell).construct
        if is_library(construct):
            body = lambda a, k: construct(proxy, *a, **k)  # noqa: E731 - kiln's layers run as is
        else:
            body = lambda a, k: self.wrap(construct, "construct", None)(proxy, *a, **k)  # noqa: E731
        # registering or removing a hook bumps the cell epoch: this guard then recompiles
        self.guards.record(f"hooks of {type(cell).__name__} {id(cell)}",
                           lambda: cell_hooks.key(cell), cell_hooks.key(cell), cell_attr=True)
        if not cell_hooks.has_hooks(cell):
            return body(args, kwargs)
        # hooks are compiled with the construct, as MindSpore compiles them; backward hooks
        # into the backward part of an enclosing grad (kiln.ops._backward_hooks)
        return cell_hooks.call_with_hooks(cell, proxy, args, kwargs, body,
                                          lambda fn, *a: self.wrap(fn, "hook", None)(*a))

    def assign_attribute(self, cell, path, name, value):
        target = getattr(cell, name, None)
        if isinstance(target, Parameter):
            call("assign", (target, value))
            return
        if self.lax and not isinstance(value, CellBase):
            # LAX: set when the graph runs, with the run-time value, as PyNative would; reads
            # of it in compiled code are run-time reads too (runtime_attribute)
            self.written_attributes.add((id(cell), name))
            from kiln.jit import lax  # noqa: PLC0415

            lax.run_later(setattr, (cell, name, value), {}, f"{path}.{name} = ...",
                          output="none", probe=False)
            return
        raise GraphSyntaxError(
            f"assigning {path}.{name} in Graph mode: only Parameters can be assigned on self "
            f"(STRICT syntax); keep other state outside the compiled function"
        )

    def run_body(self, stmts, frame):
        from kiln.context import get_context  # noqa: PLC0415

        limit = self.max_call_depth
        if limit is None:
            limit = self.max_call_depth = get_context("max_call_depth")
        if self.depth >= limit:
            raise RecursionError(
                f"Graph mode: calls nest more than {limit} deep in {frame.source.name} "
                f"(set_context(max_call_depth=...); recursion is unrolled at compile time, so "
                f"it needs a constant stopping condition)"
            )
        self.depth += 1
        self.frames.append((frame, self.emitter.current_func))
        try:
            self.exec_block(stmts, frame)
        except ReturnSignal as r:
            return r.value
        except RaisedSignal:
            return None
        finally:
            self.depth -= 1
            self.frames.pop()
        return None

    # ---- expressions ----
    def eval(self, node, frame):
        self.set_loc(node, frame)
        code = _expression_code(node, frame.source.filename)
        scope = Scope(self, frame)
        scope.locals.setdefault(SELECT_FN, self.select)
        scope.locals.setdefault(NOT_FN, logical_not)
        scope.locals.setdefault(CONTAINS_FN, contains)
        scope.locals.setdefault(HAS_KEY_FN, has_key)
        scope.locals.setdefault(FSTRING_FN, lax_text.fstring)
        scope.locals.setdefault(STR_FORMAT_FN, lax_text.str_format)
        scope.locals.setdefault(LIST_METHOD_FN, self.list_method)
        scope.locals.setdefault(BUILTIN_FN, lax_text.value_builtin)
        scope.locals.setdefault(GENERATOR_FN, iter)
        scope.locals.setdefault(NOTE_RETURN_FN, self._note_return)
        try:
            return eval(code, scope)  # noqa: S307 - compiled user code, as Python would run it
        except (ReturnSignal, BreakSignal, ContinueSignal, RaisedSignal):
            raise
        except GraphSyntaxError:
            raise
        except RecursionError as e:
            raise self._too_deep(e, frame, node) from None
        except Exception as e:
            e = explain_one_branch_name(e, frame)
            raise at_line(e, frame.source, node.lineno) from None

    def _too_deep(self, error, frame, node):
        """One RecursionError for calls nested too deep, located at the innermost call (not
        once more per level on its way out)."""
        if getattr(error, "kiln_located", False):
            return error
        message = str(error)
        if not message.startswith("Graph mode:"):  # Python's own recursion limit came first
            message = (f"Graph mode: calls nest {self.depth} deep, past Python's recursion limit "
                       f"(recursion is unrolled at compile time, so it needs a constant stopping "
                       f"condition)")
        located = at_line(RecursionError(message), frame.source, node.lineno)
        located.kiln_located = True
        return located

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
            if isinstance(stmt, (ast.While, ast.For)) and has_return(stmt.body):
                self._loop_with_return(stmt, stmts[i + 1 :], frame)
                return
            handler = getattr(self, "exec_" + type(stmt).__name__, None)
            if handler is None:
                raise GraphSyntaxError(
                    where(frame.source, stmt.lineno)
                    + f"{type(stmt).__name__} statements are not supported"
                )
            handler(stmt, frame)


def _dtype_enum(dtype):
    from kiln.common import dtype as mstype  # noqa: PLC0415

    return mstype.to_dtype(dtype)._enum


def _expression_code(node, filename):
    """The compiled code of an expression node, rewritten for graph conditionals; kept on the
    node, since an unrolled loop evaluates the same node once per iteration."""
    cached = getattr(node, "_kiln_code", None)
    if cached is not None and cached[0] == filename:
        return cached[1]
    expr = ast.Expression(body=rewrite_conditionals(node))
    ast.fix_missing_locations(expr)
    code = compile(expr, filename, "eval")
    node._kiln_code = (filename, code)
    return code


def _closure_values(fn):
    """The values of a function's closure cells, and the cells (read again by the guards); a
    cell not yet assigned is left out."""
    closure, cells = {}, {}
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                continue
            cells[name] = cell
    return closure, cells
