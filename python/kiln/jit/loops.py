"""Loops: while and for unrolled at compile time or built as graph while loops, with exits."""

import ast

from kiln.common.tensor import Tensor
from kiln.jit import builtins_graph
from kiln.jit.conditions import and_not, int64_dtype, scalar_bool
from kiln.jit.errors import at_line, where
from kiln.jit.frames import BreakSignal, ContinueSignal, TensorExit, region_frame
from kiln.jit.graph_tensor import CompileTimeValueError, GraphTensor
from kiln.jit.rewrites import (
    BREAK_FLAG,
    RETURN_VALUE,
    RETURNED_FLAG,
    SKIP_FLAG,
    has_loop_exit,
    loop_body_with_exits,
    rewrite_returns,
    unless_broken,
)
from kiln.jit.source import GraphSyntaxError, assigned_names
from kiln.jit.trees import flatten, unflatten
from kiln.ops._core import call

MAX_UNROLLED_ITERATIONS = 100_000


class LoopsMixin:
    """Converter methods for while and for loops, and for return statements inside loops."""

    def exec_While(self, stmt, frame):
        if stmt.orelse:
            raise GraphSyntaxError(where(frame.source, stmt.lineno) + "while/else is not supported")
        test = self.eval(stmt.test, frame)
        if not isinstance(test, GraphTensor) and has_loop_exit(stmt.body):
            # Try it as a compile-time loop; if an exit turns out to depend on a tensor, the trip
            # count is data dependent: forget the attempt and build a graph loop instead.
            mark, saved = self.emitter.mark(), dict(frame.locals)
            try:
                self._unrolled_while(stmt, frame, test)
                return
            except TensorExit:
                self.emitter.truncate(mark)
                frame.locals.clear()
                frame.locals.update(saved)
                test = self.emitter.to_graph(test, "while")
        if not isinstance(test, GraphTensor):
            self._unrolled_while(stmt, frame, test)
            return
        self._tensor_while(stmt, frame)

    def _tensor_while(self, stmt, frame):
        """A while loop in the graph; break/continue become flags the loop carries."""
        if not has_loop_exit(stmt.body):
            self._tensor_loop(stmt, frame, lambda inner: self.eval(stmt.test, inner), stmt.body)
            return
        frame.locals[BREAK_FLAG] = False
        body = loop_body_with_exits(stmt.body, stmt)

        def cond(inner):
            test = self.emitter.to_graph(self.eval(stmt.test, inner), "while")
            return and_not(test, inner.locals[BREAK_FLAG])

        self._tensor_loop(stmt, frame, cond, body)
        del frame.locals[BREAK_FLAG]

    def _unrolled_while(self, stmt, frame, test):
        saved_depth, frame.loop_depth = frame.loop_depth, frame.region_depth
        try:
            self._unrolled_while_body(stmt, frame, test)
        finally:
            frame.loop_depth = saved_depth

    def _unrolled_while_body(self, stmt, frame, test):
        count = 0
        while test:
            try:
                self.exec_block(stmt.body, frame)
            except BreakSignal:
                break
            except ContinueSignal:
                pass
            count += 1
            if count > MAX_UNROLLED_ITERATIONS:
                raise at_line(
                    RuntimeError(
                        "this while loop ran more than 100000 times at "
                        "compile time; make its condition a tensor"
                    ),
                    frame.source,
                    stmt.lineno,
                )
            test = self.eval(stmt.test, frame)
            if isinstance(test, GraphTensor):
                raise TensorExit()

    def _tensor_loop(self, stmt, frame, make_cond, body, extra=None):
        """A loop in the graph; names the body assigns that exist before it are carried."""
        carried_names = _carried_names(body, frame, extra)
        values = [frame.locals[n] for n in carried_names]
        leaves, tree = flatten(tuple(values))
        _check_carriable(leaves, frame, stmt)
        init = [self.emitter.to_graph(v, "while") for v in leaves]
        metas = [(v._dtype, list(v.shape)) for v in init]
        emitter = self.emitter
        group = emitter.new_group()

        def enter(prefix):
            params = emitter.begin_region(group, prefix, metas)
            inner = region_frame(frame)
            for n, v in zip(carried_names, unflatten(tree, params)):
                inner.locals[n] = v
            return inner

        cond = self._loop_condition(enter("while_cond"), make_cond, frame, stmt)
        emitter.end_region([cond.handle])
        inner = enter("while_body")
        try:
            self._run_region(body, inner, returns=False)
        except BaseException:
            self._abandon_region()
            raise
        results = self._carried_after(inner, carried_names, values, tree, init, frame, stmt)
        emitter.end_region(results)
        self.set_loc(stmt, frame)
        outs = emitter.while_(init, group)
        for n, v in zip(carried_names, unflatten(tree, outs)):
            frame.locals[n] = v

    def _loop_condition(self, inner, make_cond, frame, stmt):
        """Builds the loop condition in the open condition region, as a 0-d bool tensor."""
        try:
            cond = make_cond(inner)
        except BaseException:
            self._abandon_region()
            raise
        if not isinstance(cond, GraphTensor):
            cond = self.emitter.to_graph(bool(cond), "while")
        try:
            return scalar_bool(cond)
        except (CompileTimeValueError, ValueError) as e:
            raise at_line(e, frame.source, stmt.lineno) from None

    def _carried_after(self, inner, names, values, tree, init, frame, stmt):
        """Handles of the carried values after one iteration; each must keep its dtype and
        shape (`init`: their graph values before the loop)."""
        new_leaves, new_tree = flatten(tuple(inner.locals[n] for n in names))
        if new_tree != tree:
            raise at_line(
                TypeError("a loop-carried value changes structure in the loop body"),
                frame.source,
                stmt.lineno,
            )
        results = []
        for n, before, after in zip(_leaf_names(names, values), init, new_leaves):
            g = self.emitter.to_graph(after, "while")
            if g._dtype != before._dtype or g.shape != before.shape:
                raise at_line(
                    TypeError(
                        f"loop-carried {n} is {before.dtype}{list(before.shape)} before the "
                        f"loop and {g.dtype}{list(g.shape)} after an iteration; both must agree"
                    ),
                    frame.source,
                    stmt.lineno,
                )
            results.append(g.handle)
        return results

    def exec_For(self, stmt, frame):
        if stmt.orelse:
            raise GraphSyntaxError(where(frame.source, stmt.lineno) + "for/else is not supported")
        iterable = self.eval(stmt.iter, frame)
        if isinstance(iterable, builtins_graph.TensorRange):
            self._tensor_for(stmt, iterable, frame)
            return
        exits = has_loop_exit(stmt.body)
        body = loop_body_with_exits(stmt.body, stmt) if exits else stmt.body
        if exits:
            frame.locals[BREAK_FLAG] = False
        saved_depth, frame.loop_depth = frame.loop_depth, frame.region_depth
        try:
            self._unrolled_for(stmt, frame, iterable, body, exits)
        finally:
            frame.loop_depth = saved_depth

    def _unrolled_for(self, stmt, frame, iterable, body, exits):
        for count, item in enumerate(iterable):
            if count > MAX_UNROLLED_ITERATIONS:
                raise at_line(
                    RuntimeError("this for loop unrolls more than 100000 times"),
                    frame.source,
                    stmt.lineno,
                )
            broke = frame.locals.get(BREAK_FLAG, False) if exits else False
            if broke is True:
                break
            self.assign(stmt.target, item, frame)
            if isinstance(broke, GraphTensor):  # an earlier iteration may have broken at run time
                self.exec_block([unless_broken(body, stmt)], frame)
            else:
                self.exec_block(body, frame)
        if exits:
            frame.locals.pop(BREAK_FLAG, None)
            frame.locals.pop(SKIP_FLAG, None)

    def _tensor_for(self, stmt, rng, frame):
        """for i in range(tensor): a graph loop over a hidden counter."""
        if not isinstance(stmt.target, ast.Name):
            raise GraphSyntaxError(
                where(frame.source, stmt.lineno)
                + "a loop over range(tensor) needs a single loop variable"
            )
        counter = "__kiln_for_counter"
        frame.locals[counter] = call(
            "cast", (self.emitter.to_graph(rng.start, "range"),), (int64_dtype(),)
        )
        frame.locals[stmt.target.id] = frame.locals[counter]
        stop = rng.stop
        assign_target, bump = _counter_statements(stmt, counter, rng.step)
        exits = has_loop_exit(stmt.body)
        inner_body = loop_body_with_exits(stmt.body, stmt) if exits else stmt.body
        body = [assign_target] + inner_body + [bump]
        extra = [counter]
        if exits:
            frame.locals[BREAK_FLAG] = False
            extra.append(BREAK_FLAG)

        def cond(inner):
            c = call("less", (inner.locals[counter], stop))
            return and_not(c, inner.locals[BREAK_FLAG]) if exits else c

        self._tensor_loop(stmt, frame, cond, body, extra=extra)
        del frame.locals[counter]
        frame.locals.pop(BREAK_FLAG, None)

    # ---- return inside a loop ----
    def _loop_with_return(self, loop, rest, frame):
        """`return v` in a loop becomes: remember v, set a flag, break; after the loop,
        `if flag: return v` with the rest of the block as its else branch. The remembered value
        is carried by the loop, so its type is found first by building one iteration on the side
        (a function nothing calls, which dead-code elimination drops)."""
        body = rewrite_returns(loop.body)
        new_loop = ast.copy_location(
            type(loop)(**{**{f: getattr(loop, f) for f in loop._fields}, "body": body}), loop
        )
        template = self._probe_return(new_loop, frame)
        if template is None:
            raise GraphSyntaxError(
                where(frame.source, loop.lineno) + "could not work out the type "
                "of the value this loop returns; return after the loop instead"
            )
        leaves, tree = flatten(template)
        frame.locals[RETURN_VALUE] = unflatten(tree, [self._placeholder(v) for v in leaves])
        frame.locals[RETURNED_FLAG] = False
        after = ast.If(
            test=ast.Name(id=RETURNED_FLAG, ctx=ast.Load()),
            body=[ast.Return(value=ast.Name(id=RETURN_VALUE, ctx=ast.Load()))],
            orelse=[],
        )
        ast.fix_missing_locations(ast.copy_location(after, loop))
        self.exec_block([new_loop, after] + rest, frame)

    _return_slot = None  # while probing: a list that receives the first value returned

    def _note_return(self, value):
        if self._return_slot is not None and not self._return_slot:
            self._return_slot.append(value)
        return value

    def _probe_return(self, loop, frame):
        """The value the loop's first return gives, from building one iteration in a throwaway
        region; None when it could not be found."""
        emitter = self.emitter
        group = emitter.new_group()
        emitter.begin_region(group, "probe")
        self._return_slot = slot = []
        inner = region_frame(frame)
        inner.locals.update({RETURNED_FLAG: False, RETURN_VALUE: None, BREAK_FLAG: False})
        try:
            if isinstance(loop, ast.For):
                iterable = self.eval(loop.iter, inner)
                first = (
                    iterable.start
                    if isinstance(iterable, builtins_graph.TensorRange)
                    else next(iter(iterable))
                )
                self.assign(loop.target, first, inner)
            self.exec_block(loop_body_with_exits(loop.body, loop), inner)
        except Exception:  # noqa: BLE001 - the probe only looks for the returned value's type
            pass
        finally:
            self._return_slot = None
            emitter.truncate(0)  # the probe leaves no nodes behind
            emitter.end_region([])
        return slot[0] if slot else None


def _carried_names(body, frame, extra):
    """Names a graph loop carries: those its body assigns that exist before it, then `extra`."""
    names = [n for n in assigned_names(body) if n in frame.locals]
    if extra:
        names += [n for n in extra if n not in names]
    return names


def _check_carriable(leaves, frame, stmt):
    for leaf in leaves:
        if not isinstance(leaf, (GraphTensor, Tensor, bool, int, float)):
            raise at_line(
                TypeError(
                    f"a loop whose condition is a tensor can only carry "
                    f"tensors and numbers, not {leaf!r}"
                ),
                frame.source,
                stmt.lineno,
            )


def _counter_statements(stmt, counter, step):
    """`target = counter` and `counter += step`, placed at the loop's line."""
    assign_target = ast.Assign(targets=[stmt.target], value=ast.Name(id=counter, ctx=ast.Load()))
    bump = ast.AugAssign(
        target=ast.Name(id=counter, ctx=ast.Store()),
        op=ast.Add(),
        value=ast.Constant(value=step),
    )
    for node in (assign_target, bump):
        ast.copy_location(node, stmt)
        ast.fix_missing_locations(node)
    return assign_target, bump


def _leaf_names(names, values):
    """Each carried name repeated once per leaf of its value, for messages about one leaf."""
    out = []
    for n, v in zip(names, values):
        count = len(flatten(v)[0])
        out += [n] * count if count > 1 else [n]
    return out
