"""Tensor-dependent branches: if statements, conditional expressions and raises as graph ifs."""

import ast

from kiln.common.tensor import Tensor
from kiln.jit import lax
from kiln.jit.conditions import bool_dtype, logical_not, scalar_bool
from kiln.jit.errors import at_line, where
from kiln.jit.frames import RaisedSignal, ReturnSignal, region_frame
from kiln.jit.graph_tensor import CompileTimeValueError, GraphTensor
from kiln.jit.source import GraphSyntaxError, always_returns, assigned_names, contains_return
from kiln.jit.trees import flatten, unflatten
from kiln.ops._core import call
from kiln.ops.function.array import zeros

RAISED = object()  # what running a region that ended in a raise gives


class _UndefinedType:
    def __repr__(self):
        return "<undefined>"


UNDEFINED = _UndefinedType()  # a name a branch did not assign


class BranchesMixin:
    """Converter methods that build graph if regions and merge the values their branches give."""

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
        """A graph if; it merges the names the branches assign, or (`returns`) the value both
        branches return, which it then returns from the function."""
        try:
            cond = scalar_bool(test)
        except (CompileTimeValueError, ValueError) as e:
            raise at_line(e, frame.source, stmt.lineno) from None
        if _ends_in_raise(body) and not _ends_in_raise(orelse):
            # Build the branch that raises second, so it can mirror the other branch's results.
            cond, body, orelse = logical_not(cond), orelse, body
        names = [] if returns else _merged_names(body, orelse, frame)
        emitter = self.emitter
        group = emitter.new_group()
        branches = []
        for label, block in (("then", body), ("else", orelse)):
            branches.append(self._if_branch(group, label, block, frame, names, returns, branches))
        internal = set() if returns else _internal_positions(names, branches)
        described = names or ["the returned value"]
        self._join(branches, None, frame, stmt, described, internal)  # check before emitting
        self.set_loc(stmt, frame)
        outs = emitter.if_(cond, group)
        result = self._join(branches, outs, frame, stmt, described, internal)
        if returns:
            raise ReturnSignal(result)
        for n, v in zip(names, result):
            if v is not UNDEFINED:
                frame.locals[n] = v
        for n in assigned_names(body + orelse):
            if n not in frame.locals:
                frame.one_branch[n] = stmt.lineno

    def _if_branch(self, group, label, block, frame, names, returns, built):
        """Builds one branch as a region: (leaves, structure, constants) of its results. A branch
        that raised gives placeholders shaped like those of the branch `built` before it."""
        self.emitter.begin_region(group, f"if_{label}")
        inner = region_frame(frame)
        try:
            value = self._run_region(block, inner, returns)
        except BaseException:
            self._abandon_region()
            raise
        if value is RAISED and built:
            leaves, tree = built[0][0], built[0][1]
            leaves = [self._placeholder(v) for v in leaves]
        else:
            if value is RAISED:
                value = None
            result = value if returns else tuple(inner.locals.get(n, UNDEFINED) for n in names)
            leaves, tree = flatten(result)
        handles, consts = self._region_outputs(leaves)
        self.emitter.end_region(handles)
        return leaves, tree, consts

    def _raise_if(self, cond, error_type, message, values, negate=False):
        """Emits a graph if whose branch raises error_type when cond (or, negated, not cond)."""
        if negate:
            cond = call("logical_not", (call("cast", (cond,), (bool_dtype(),)),))
        emitter = self.emitter
        group = emitter.new_group()
        emitter.begin_region(group, "raise")
        emitter.raise_(error_type, message, values)
        emitter.end_region([])
        emitter.begin_region(group, "no_raise")
        emitter.end_region([])
        emitter.if_(scalar_bool(cond), group)

    def select(self, cond, if_true, if_false):
        """`a if cond else b` (and the pieces of `and`/`or`): a graph if for tensor conditions."""
        if not isinstance(cond, GraphTensor):
            return if_true() if cond else if_false()
        emitter = self.emitter
        group = emitter.new_group()
        branches = []
        for label, thunk in (("then", if_true), ("else", if_false)):
            emitter.begin_region(group, f"select_{label}")
            try:
                leaves, tree = flatten(thunk())
            except BaseException:
                self._abandon_region()
                raise
            handles, consts = self._region_outputs(leaves)
            emitter.end_region(handles)
            branches.append((leaves, tree, consts))
        self._join_values(branches, None, "this conditional expression")  # check before emitting
        outs = emitter.if_(scalar_bool(cond), group)
        return self._join_values(branches, outs, "this conditional expression")

    def _placeholder(self, value):
        """A value of the same type for a branch that raised (never used at run time)."""
        if isinstance(value, GraphTensor):
            return zeros(value.shape, value.dtype)
        return value

    def _abandon_region(self):
        """Closes a region whose building failed: it keeps no nodes and nothing calls it."""
        self.emitter.truncate(0)
        self.emitter.end_region([])

    def _run_region(self, block, frame, returns):
        """Runs a block inside the open region: what it returns (with `returns`), RAISED, or
        None."""
        self.frames.append((frame, self.emitter.current_func))
        try:
            self.exec_block(block, frame)
        except ReturnSignal as r:
            if not returns:
                raise GraphSyntaxError(
                    where(frame.source, block[-1].lineno)
                    + "return inside a tensor-dependent branch of a loop is not "
                    "supported yet"
                ) from None
            return r.value
        except RaisedSignal:
            return RAISED
        finally:
            self.frames.pop()
        return None

    def _region_outputs(self, leaves):
        """Graph handles for a region's results; Python values become constants in the graph."""
        handles, consts = [], []
        for leaf in leaves:
            if isinstance(leaf, lax.RuntimeObject):  # its handle is the region's result
                handles.append(leaf.graph.handle)
                consts.append(None)
            elif isinstance(leaf, (GraphTensor, Tensor, bool, int, float)):
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
            raise at_line(e, frame.source, stmt.lineno) from None

    def _join_values(self, branches, outs, what, internal=()):
        """Merges two branches' results; `internal` leaf positions (the converter's own loop
        flags) may mix Python bools and bool tensors. With `outs` None it only checks."""
        (la, ta, ca), (lb, tb, cb) = branches
        if ta != tb or len(la) != len(lb):
            raise TypeError(
                f"the two branches give different structures for {what}: "
                f"{unflatten(ta, la)!r} vs {unflatten(tb, lb)!r}"
            )
        joined, k = [], 0
        for pos, (a, b, x, y) in enumerate(zip(la, lb, ca, cb)):
            a_graph, b_graph = x is None, y is None
            if isinstance(a, lax.RuntimeObject) or isinstance(b, lax.RuntimeObject):
                joined.append(_join_objects(a, b, outs, k, self.emitter, what))
                k += 1
                continue
            numeric = isinstance(a, _NUMERIC)
            if numeric != isinstance(b, _NUMERIC):  # e.g. a tensor and None
                raise TypeError(
                    f"the two branches give a {_kind(a)} and a {_kind(b)} for {what}; "
                    f"both sides must agree in kind and dtype"
                )
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
            _check_same_kind(a, b, a_graph, b_graph, what)
            joined.append(a if not a_graph and a == b else out)
        return unflatten(ta, joined)


_NUMERIC = (GraphTensor, Tensor, bool, int, float)  # what a branch result may carry as a value


def _join_objects(a, b, outs, k, emitter, what):
    """Two Python objects computed when the graph runs (LAX), one per branch: the one of the
    branch taken, typed (for use as a tensor) only when both branches' example values agree."""
    if not (isinstance(a, lax.RuntimeObject) and isinstance(b, lax.RuntimeObject)):
        raise TypeError(
            f"the two branches give a {_kind(a)} and a {_kind(b)} for {what}; a value computed in "
            f"Python when the graph runs merges only with another such value"
        )
    if outs is None:
        return a
    return lax.join(emitter.wrap(outs[k]), a, b)


def _merged_names(body, orelse, frame):
    """Names an if merges: those the branches assign that exist before it or that both assign."""
    return [
        n
        for n in assigned_names(body + orelse)
        if n in frame.locals or (n in assigned_names(body) and n in assigned_names(orelse))
    ]


def _internal_positions(names, branches):
    """Leaf positions, among the merged values, of the converter's own `__kiln_` names."""
    internal, k = set(), 0
    for n, v in zip(names, unflatten(branches[0][1], branches[0][0])):
        count = len(flatten(v)[0])
        if n.startswith("__kiln_"):
            internal.update(range(k, k + count))
        k += count
    return internal


def _check_same_kind(a, b, a_graph, b_graph, what):
    """Two numeric leaves merge only when both are tensors of one dtype or both Python numbers
    of one type."""
    if a_graph != b_graph or (not a_graph and type(a) is not type(b)):
        raise TypeError(
            f"the two branches give a {_kind(a)} and a {_kind(b)} for {what}; "
            f"both sides must agree in kind and dtype"
        )
    if a_graph and (a.dtype != b.dtype if hasattr(a, "dtype") and hasattr(b, "dtype") else False):
        raise TypeError(
            f"the two branches give {_kind(a)} and {_kind(b)} for {what}; "
            f"both sides must agree in dtype"
        )
    shapes = tuple(getattr(v, "shape", ()) for v in (a, b))
    if a_graph and shapes[0] != shapes[1] and -1 not in shapes[0] + shapes[1]:
        # A graph value has one static shape (as MindSpore's STRICT join requires).
        raise TypeError(
            f"the two branches give tensors of shapes {shapes[0]} and {shapes[1]} for {what}; "
            f"both sides must agree in shape"
        )


def _ends_in_raise(block):
    return bool(block) and isinstance(block[-1], ast.Raise)


def _kind(value):
    if isinstance(value, (GraphTensor, Tensor)):
        return f"tensor ({value.dtype})"
    return type(value).__name__
