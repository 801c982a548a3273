"""Small functional helpers MindSpore code calls as ``ops.x`` or ``F.x``: fill, shape, dtype,
select, partial. Each works alike in PyNative and in compiled code."""
import functools

from kiln import _C
from kiln.common import dtype as mstype
from kiln.ops._core import call, is_tensor, shape_attr
from kiln.ops.function.array import _fill

__all__ = ["fill", "shape", "dtype", "select", "partial"]


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


def partial(func, *args):
    """func with its first arguments bound (MindSpore's F.partial)."""
    if not callable(func):
        raise TypeError(f"partial: func must be callable, got {type(func).__name__}")
    return functools.partial(func, *args)


def _check_tensor(value, op, name="input"):
    if not is_tensor(value):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(value).__name__}")
