"""Simple statements: assignments, return/break/continue, nested def, assert and raise."""

import ast
import types

from kiln._graph_state import GraphValue
from kiln.common.tensor import Tensor
from kiln.jit import lax, lax_text, mutation
from kiln.jit.callables import NestedFunction
from kiln.jit.emitter import RAISE_ARG_SEPARATOR, RAISE_TENSOR_ARG
from kiln.jit.errors import at_line, where
from kiln.jit.frames import BreakSignal, ContinueSignal, RaisedSignal, ReturnSignal, TensorExit
from kiln.jit.graph_tensor import GraphTensor
from kiln.jit.rewrites import as_load
from kiln.jit.source import GraphSyntaxError


class StatementsMixin:
    """Converter methods for the statements that build no control flow of their own."""

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
        expr = getattr(stmt, "_kiln_expr", None)  # made once: an unrolled loop runs it often
        if expr is None:
            expr = ast.BinOp(left=as_load(stmt.target), op=stmt.op, right=stmt.value)
            stmt._kiln_expr = ast.copy_location(expr, stmt)
        self.assign(stmt.target, self.eval(expr, frame), frame)

    def assign(self, target, value, frame):
        if isinstance(target, ast.Name):
            frame.locals[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            self._unpack(target, value, frame)
        elif isinstance(target, ast.Attribute):
            obj = self.eval(target.value, frame)
            if self.guards.holds(obj):
                raise GraphSyntaxError(
                    where(frame.source, target.lineno) + f"assigning the attribute "
                    f"{target.attr!r} of an object from outside the compiled function: it "
                    f"would change once, while compiling, not on every call; return the value "
                    f"instead, or run this code in PyNative"
                )
            setattr(obj, target.attr, value)
        elif isinstance(target, ast.Subscript):
            self._assign_subscript(target, value, frame)
        else:
            raise GraphSyntaxError(
                where(frame.source, target.lineno) + "unsupported assignment target"
            )

    def _unpack(self, target, value, frame):
        items = list(value)
        stars = [i for i, e in enumerate(target.elts) if isinstance(e, ast.Starred)]
        if not stars:
            if len(items) != len(target.elts):
                raise at_line(
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
        container = self._subscript_target(target, frame)
        index = self.eval(target.slice, frame)
        if not self.lax and type(container) in (list, dict) and self.guards.reaches(container):
            try:
                self.refuse_outside_change(f"{type(container).__name__} item assignment")
            except TypeError as e:
                raise at_line(e, frame.source, target.lineno) from None
        if isinstance(container, (GraphTensor, Tensor)):
            try:
                mutation.set_item(self, container, index, value)
            except (TypeError, ValueError, IndexError) as e:
                raise at_line(e, frame.source, target.lineno) from None
            return
        container[index] = value

    def _subscript_target(self, target, frame):
        """The container of `target[...] = v`; a missing attribute of self is MindSpore's
        TypeError too (it is both: except AttributeError still catches it)."""
        try:
            return self.eval(target.value, frame)
        except AttributeError as e:
            if not (isinstance(target.value, ast.Attribute)
                    and isinstance(target.value.value, ast.Name)):
                raise
            owner, name = target.value.value.id, target.value.attr
            raise at_line(MissingContainerError(
                f"{str(e).splitlines()[0]}: `{owner}.{name}[...] = ...` assigns into an existing "
                f"container, so {owner}.{name} should be initialized in the '__init__' function "
                f"before subscript."), frame.source, target.lineno) from None

    def write_inplace(self, target, value):
        """An in-place Tensor method (x.add_(y)) on a graph value: x[...] = its result."""
        return mutation.set_item(self, target, Ellipsis, value)

    def exec_Return(self, stmt, frame):
        raise ReturnSignal(None if stmt.value is None else self.eval(stmt.value, frame))

    def exec_Break(self, stmt, frame):
        if frame.region_depth > frame.loop_depth:  # under a tensor condition
            raise TensorExit()
        raise BreakSignal()

    def exec_Continue(self, stmt, frame):
        if frame.region_depth > frame.loop_depth:
            raise TensorExit()
        raise ContinueSignal()

    def exec_FunctionDef(self, stmt, frame):
        if stmt.decorator_list:
            raise GraphSyntaxError(
                where(frame.source, stmt.lineno) + "decorated nested functions "
                "are not supported; define the function at module level"
            )
        frame.locals[stmt.name] = NestedFunction(self, stmt, frame)

    def exec_Assert(self, stmt, frame):
        test = self.eval(stmt.test, frame)
        message = "" if stmt.msg is None else self.eval(stmt.msg, frame)
        if isinstance(test, GraphTensor):
            self._raise_if(test, AssertionError, _format_literal(str(message)), [], negate=True)
        elif not test:
            raise at_line(AssertionError(message), frame.source, stmt.lineno)

    def exec_With(self, stmt, frame):
        """`with m as v:` (LAX) on an object known while compiling (a @jit_class or plain Python
        context manager): __enter__, the body, then __exit__ compiled like other methods; an
        error while compiling the body reaches __exit__ as Python's would."""
        exits = []
        try:
            for item in stmt.items:
                manager = self.eval(item.context_expr, frame)
                if isinstance(manager, GraphValue):
                    raise at_line(TypeError("with: the context manager is a value the graph "
                                            "computes; only objects known while compiling "
                                            "can be used"), frame.source, stmt.lineno)
                entered = self._special_method(manager, "__enter__")()
                exits.append(self._special_method(manager, "__exit__"))
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, entered, frame)
            self.exec_block(stmt.body, frame)
        except (ReturnSignal, BreakSignal, ContinueSignal, RaisedSignal):
            for leave in reversed(exits):
                leave(None, None, None)
            raise
        except Exception as e:  # noqa: BLE001 - offered to __exit__, as Python does
            if not any([bool(leave(type(e), e, e.__traceback__)) for leave in reversed(exits)]):
                raise
            return
        for leave in reversed(exits):
            leave(None, None, None)

    def _special_method(self, obj, name):
        method = getattr(type(obj), name, None)
        if method is None:
            raise TypeError(f"'{type(obj).__name__}' object does not support the context manager "
                            f"protocol (no {name})")
        return self.wrap(types.MethodType(method, obj), f"{type(obj).__name__}.{name}", None)

    def exec_Raise(self, stmt, frame):
        if stmt.exc is None:
            # Compiled code has no except block, so there is never an exception to re-raise.
            raise GraphSyntaxError(where(frame.source, stmt.lineno) + "No active exception to "
                                   "reraise: a bare raise needs an enclosing except block")
        exc = self.eval(stmt.exc, frame)
        exc_type = exc if isinstance(exc, type) else type(exc)
        if not issubclass(exc_type, BaseException):
            raise at_line(
                TypeError("exceptions must derive from BaseException"), frame.source, stmt.lineno
            )
        args = () if isinstance(exc, type) else exc.args
        if lax.uses_runtime(args):  # e.g. an f-string of tensors: Python raises it at run time
            lax_text.raise_at_runtime(exc_type, args)
            raise RaisedSignal()
        if self.emitter.raises_now() and not lax.uses_graph(args):
            # reached on every run before any effect: raised while compiling, as MindSpore does
            raise exc if isinstance(exc, BaseException) else exc_type()
        if len(args) == 1 and isinstance(args[0], str):  # the message, as the exception's text
            self.emitter.raise_(exc_type, _format_literal(args[0]), [])
            raise RaisedSignal()
        # Other arguments come back as they were (e.args == (a, b)); a tensor's as the text
        # of its value when the graph runs.
        values = [a for a in args if isinstance(a, (GraphTensor, Tensor))]
        template = [RAISE_TENSOR_ARG if isinstance(a, (GraphTensor, Tensor)) else a for a in args]
        self.emitter.raise_(exc_type, RAISE_ARG_SEPARATOR.join("{}" for _ in values), values,
                            template)
        raise RaisedSignal()


class MissingContainerError(AttributeError, TypeError):
    """Index assignment into an attribute that does not exist (MindSpore: TypeError)."""


def _format_literal(text):
    """Text for a run-time error's format string, where `{}` marks a tensor's value."""
    return text.replace("{", "{{").replace("}", "}}")
