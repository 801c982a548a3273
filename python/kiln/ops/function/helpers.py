"""Small functional helpers MindSpore code calls as ``ops.x`` or ``F.x``: fill, shape, dtype,
select, partial, and the compile-time predicates is_sequence_value_unknown and
is_sequence_shape_unknown. Each works alike in PyNative and in compiled code."""
import functools

from kiln import _C, _graph_state
from kiln.common import dtype as mstype
from kiln.ops._core import call, is_tensor, shape_attr
from kiln.ops.function.array import _fill
from kiln.ops.primitive import _is_variable

__all__ = ["fill", "shape", "dtype", "select", "partial", "is_sequence_value_unknown",
           "is_sequence_shape_unknown"]


def fill(type, shape, value):  # noqa: A002 - MindSpore's argument names
    """A tensor of `shape` and dtype `type` holding `value` everywhere."""
    try:
        dtype_ = mstype.to_dtype(type)
    except TypeError as e:
        raise TypeError(f"fill: type must be a kiln dtype: {e}") from None
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"fill: shape must be a tuple of ints, got {shape!r}")
    shape_attr(shape, "fill", "shape")  # a float or bool dimension: TypeError naming `shape`
    if isinstance(value, _C.TensorBase):
        value = value.item()
    elif is_tensor(value) or value is None or isinstance(value, str):
        raise TypeError(f"fill: value must be a number (or a tensor in PyNative), got {value!r}")
    return _fill(shape, value, dtype_, "fill")


def shape(input_x):
    """The shape of a tensor, as a tuple of ints."""
    _check_tensor(input_x, "shape")
    return input_x.shape


def dtype(input):  # noqa: A002
    """The dtype of a tensor."""
    _check_tensor(input, "dtype")
    return input.dtype


def select(cond, input, other):  # noqa: A002
    """input where the bool tensor cond holds, else other (tensors or numbers, broadcast
    together)."""
    _check_tensor(cond, "select", "cond")
    if cond.dtype != mstype.bool_:
        raise TypeError(f"select: cond must be a bool tensor, got {cond.dtype}")
    for name, value in (("input", input), ("other", other)):
        if not is_tensor(value) and (isinstance(value, bool) or
                                     not isinstance(value, (int, float))):
            raise TypeError(f"select: {name} must be a Tensor, int or float, got "
                            f"{type(value).__name__}")
    return call("where", (cond, input, other))


def partial(func, *args, **kwargs):
    """func with arguments bound, positional and by keyword (MindSpore's F.partial)."""
    if not callable(func):
        raise TypeError(f"partial: func must be callable, got {type(func).__name__}")
    return functools.partial(func, *args, **kwargs)


def is_sequence_value_unknown(x):
    """True when some item of the tuple/list x (at any depth) is only known when the compiled
    graph runs: a graph value or a mutable() number. Always False outside compiled code."""
    _check_sequence(x, "is_sequence_value_unknown")
    return _graph_state.compiling() and any(_is_variable(v) for v in x)


def is_sequence_shape_unknown(x):
    """True when the tuple/list x is a mutable(seq, dynamic_len=True) sequence: its length is
    declared variable. kiln compiles a graph per length of such a sequence (a new length
    recompiles), and tuple()/list() of it is an ordinary fixed-length sequence. Always False
    outside compiled code."""
    _check_sequence(x, "is_sequence_shape_unknown")
    return _graph_state.compiling() and bool(getattr(x, "dynamic_len", False))


def _check_sequence(value, op):
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{op}: x must be a tuple or list, got {type(value).__name__}")


def _check_tensor(value, op, name="input"):
    if not is_tensor(value):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(value).__name__}")
