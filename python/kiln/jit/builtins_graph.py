"""Builtins that need to know about graph values: print, isinstance, range and friends."""

import builtins
import types

from kiln import _graph_state as _state
from kiln.common import dtype as mstype
from kiln.common.tensor import Tensor
from kiln.jit import builtin_checks
from kiln.jit.callables import BuildAtCompileTime, real_classes, two_argument_super
from kiln.jit.forbidden import ForbiddenCall
from kiln.jit.graph_tensor import GraphTensor, is_tensor, with_runtime_dims
from kiln.jit.rewrites import CALL_METHOD_FN, LSHIFT_FN, RSHIFT_FN
from kiln.jit.scope import CellProxy


def _print(*args, sep=" ", end="\n", file=None, flush=False):
    """print at run time: tensors are formatted with their values when the graph runs, also
    inside tuples, lists and dicts (there, like Python, with the tensor's repr)."""
    from kiln.jit import lax, lax_text  # noqa: PLC0415

    if lax.uses_runtime(args):  # Python objects made when the graph runs: Python prints them
        lax_text.print_at_runtime(args, sep, end)
        return
    values = []
    text = sep.join(_format(a, values, str) for a in args) + ("" if end == "\n" else end)
    _state.emitter().print_(text, values)


def _format(value, values, outer):
    """Text for print with `{}` where a tensor's run-time value goes; literal braces are doubled
    (the run-time formatter follows str.format's `{{`/`}}` escapes)."""
    if is_tensor(value):
        values.append(value)
        if outer is str:
            return "{}"
        return f"Tensor(shape={list(value.shape)}, dtype={value.dtype}, value=\n{{}})"
    if type(value) in (tuple, list):
        items = [_format(v, values, repr) for v in value]
        if isinstance(value, tuple):
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        return "[" + ", ".join(items) + "]"
    if type(value) is dict:
        items = (f"{_escape(repr(k))}: {_format(v, values, repr)}" for k, v in value.items())
        return "{{" + ", ".join(items) + "}}"
    return _escape(outer(value))


def _escape(text):
    return text.replace("{", "{{").replace("}", "}}")


def _isinstance(obj, classinfo):
    """isinstance on what compiled code sees: a Cell class stands for itself (not the wrapper
    that builds it at compile time), `self` and sub-Cells for their Cell, and a graph value for
    the tensor it was made from (a Parameter stays a Parameter)."""
    _check_classinfo(classinfo)
    classes = real_classes(classinfo)
    if isinstance(obj, CellProxy):
        obj = obj._cell
    if isinstance(obj, GraphTensor):
        source = _state.emitter().source_of(obj)
        if source is not None:
            return builtins.isinstance(source, classes) or GraphTensor in classes
        return any(builtins.isinstance(c, type) and issubclass(Tensor, c) or c is GraphTensor
                   for c in classes)
    return builtins.isinstance(obj, classes)


def _check_classinfo(classinfo):
    """TypeError for an isinstance second argument that is not a class, a (nested) tuple of
    classes or a union, naming what it was (Python's own message does not)."""
    if isinstance(classinfo, tuple):
        for item in classinfo:
            _check_classinfo(item)
        return
    if isinstance(classinfo, (BuildAtCompileTime, ForbiddenCall, types.UnionType)):
        return
    if any("__instancecheck__" in vars(k) for k in type(classinfo).__mro__):
        return  # classes, unions, and objects with their own isinstance check
    if is_tensor(classinfo):
        kind, shown = "Tensor", f"of shape {tuple(classinfo.shape)}"
    else:
        kind, shown = type(classinfo).__name__, repr(classinfo)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
    raise TypeError(f"isinstance() arg 2 must be a type or tuple of types (or a union of "
                    f"types), but got {kind} {shown}")


def _super(*args):
    """Two-argument super(Cls, self) (zero-argument super() is set up per call)."""
    return two_argument_super(_state.converter(), args)


class TensorRange:
    """range() with a tensor bound: a `for` over it becomes a loop in the graph."""

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step


def _range(*args):
    args = with_runtime_dims(args)
    for i, a in enumerate(args):
        if isinstance(a, GraphTensor) and (a.size != 1 or a.dtype.is_floating_point
                                           or a.dtype == mstype.bool_):
            raise TypeError(f"range() takes integers: the {i}th input should be a int scalar "
                            f"(a Python int or an integer tensor of one element), but got a "
                            f"{a.dtype} tensor of shape {tuple(a.shape)}")
    if any(isinstance(a, GraphTensor) for a in args):
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args + (1,))[:3]
        return TensorRange(start, stop, step)
    return builtins.range(*args)


def _len(obj):
    from kiln.jit import lax  # noqa: PLC0415

    if isinstance(obj, lax.RuntimeObject):  # a value Python computes when the graph runs
        return lax.length(obj)
    return len(obj)


SPECIAL = {
    "print": _print,
    "isinstance": _isinstance,
    "range": _range,
    "len": _len,
    "super": _super,
    "max": builtin_checks.checked_max,
    "min": builtin_checks.checked_min,
    "enumerate": builtin_checks.checked_enumerate,
    CALL_METHOD_FN: builtin_checks.call_method,
    LSHIFT_FN: builtin_checks.left_shift,
    RSHIFT_FN: builtin_checks.right_shift,
}
