"""Elementwise functional ops: arithmetic, comparisons, math, activations, cast/clamp/where."""
import numpy as np

from kiln.common import dtype as mstype
from kiln.ops._core import call, dtype_attr, is_tensor

__all__ = [
    "add", "sub", "mul", "div", "divide", "floor_divide", "remainder", "fmod", "pow", "neg",
    "negative", "abs", "absolute", "exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
    "tanh",
    "sigmoid", "relu", "gelu", "silu", "square", "sign", "floor", "round", "maximum", "minimum",
    "equal",
    "not_equal", "ne", "less", "lt", "less_equal", "le", "greater", "gt", "greater_equal", "ge",
    "logical_and", "logical_or", "logical_xor", "logical_not", "where", "cast", "clamp", "clip",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
    "invert",
    "subtract", "multiply", "true_divide", "addn",
]


def add(input, other):  # noqa: A002 - MindSpore's argument names
    return call("add", (input, other))


def addn(x):
    """The element-wise sum of a tuple or list of tensors of one shape and dtype (AddN)."""
    if not isinstance(x, (tuple, list)):
        raise TypeError(f"addn: x must be a tuple or list of Tensors, got {type(x).__name__}")
    if not x:
        raise ValueError("addn: x must hold at least one Tensor, got an empty sequence")
    for i, t in enumerate(x):
        if not is_tensor(t):
            raise TypeError(f"addn: x[{i}] must be a Tensor, got {type(t).__name__}")
        if tuple(t.shape) != tuple(x[0].shape) or t.dtype != x[0].dtype:
            raise ValueError(f"addn: all tensors must have one shape and dtype; x[0] is "
                             f"{x[0].dtype}{tuple(x[0].shape)}, x[{i}] is "
                             f"{t.dtype}{tuple(t.shape)}")
    total = call("identity", (x[0],))
    for t in x[1:]:
        total = call("add", (total, t))
    return total


def sub(input, other):  # noqa: A002
    return call("sub", (input, other))


def mul(input, other):  # noqa: A002
    return call("mul", (input, other))


def div(input, other, *, rounding_mode=None):  # noqa: A002
    """True division; rounding_mode "floor" floors the quotient, "trunc" rounds it to zero."""
    if rounding_mode is None:
        return call("div", (input, other))
    if rounding_mode == "floor":
        return call("floor_div", (input, other))
    if rounding_mode == "trunc":
        q = call("div", (input, other))
        trunc = where(q < 0, neg(floor(neg(q))), floor(q))
        dtype = _result_dtype(input, other)
        return trunc if dtype.is_floating_point else cast(trunc, dtype)
    raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")


def _result_dtype(a, b):
    return call("add", (a, b)).dtype  # the promoted type of a and b


def floor_divide(input, other):  # noqa: A002
    return call("floor_div", (input, other))


def remainder(input, other):  # noqa: A002
    """Python's %: the result takes the sign of `other`."""
    return call("mod", (input, other))


def fmod(input, other):  # noqa: A002
    """C's fmod: the result takes the sign of `input` (exact, as C's)."""
    return call("fmod", (input, other))


def pow(input, exponent):  # noqa: A002
    return call("pow", (input, exponent))


def neg(input):  # noqa: A002
    return call("neg", (input,))


def abs(input):  # noqa: A002
    return call("abs", (input,))


def exp(input):  # noqa: A002
    return call("exp", (input,))


def log(input):  # noqa: A002
    return call("log", (input,))


def sqrt(x):
    return call("sqrt", (x,))


def rsqrt(input):  # noqa: A002
    return call("rsqrt", (input,))


def reciprocal(input):  # noqa: A002
    """1 / input; integer and bool inputs give float32 (as MindSpore), floats keep their dtype."""
    if not is_tensor(input):
        raise TypeError(f"reciprocal: input must be a Tensor, got {type(input).__name__}")
    if not input.dtype.is_floating_point:
        input = cast(input, "float32")
    return call("div", (1.0, input))


def sin(input):  # noqa: A002
    return call("sin", (input,))


def cos(input):  # noqa: A002
    return call("cos", (input,))


def tanh(input):  # noqa: A002
    return call("tanh", (input,))


def sigmoid(input):  # noqa: A002
    return call("sigmoid", (input,))


def relu(input):  # noqa: A002
    return call("relu", (input,))


def gelu(input_x, approximate="none"):
    """GELU; approximate="tanh" uses the tanh formula instead of erf."""
    return call("gelu", (input_x,), (approximate,))


def silu(input):  # noqa: A002
    return call("silu", (input,))


def square(input):  # noqa: A002
    return call("square", (input,))


def sign(input):  # noqa: A002
    return call("sign", (input,))


def floor(input):  # noqa: A002
    return call("floor", (input,))


def round(input, *, decimals=0):  # noqa: A001,A002 - MindSpore's names
    """Rounds half to even (NumPy's and MindSpore's rule); integer and bool tensors come back
    unchanged. One registry op, so PyNative and compiled graphs round alike."""
    if not is_tensor(input):
        raise TypeError(f"round: input must be a Tensor, got {type(input).__name__}")
    if not isinstance(decimals, int) or isinstance(decimals, bool):
        raise TypeError(f"round: decimals must be an int, got {type(decimals).__name__}")
    if not input.dtype.is_floating_point:
        return call("mul", (input, 1))  # a new tensor, as for floats
    if decimals:
        scale = 10.0 ** decimals
        return call("div", (call("round", (call("mul", (input, scale)),)), scale))
    return call("round", (input,))


def maximum(input, other):  # noqa: A002
    return call("maximum", (input, other))


def minimum(input, other):  # noqa: A002
    return call("minimum", (input, other))


def equal(input, other):  # noqa: A002
    return call("equal", (input, other))


def not_equal(input, other):  # noqa: A002
    return call("not_equal", (input, other))


def less(input, other):  # noqa: A002
    return call("less", (input, other))


def less_equal(input, other):  # noqa: A002
    return call("less_equal", (input, other))


def greater(input, other):  # noqa: A002
    return call("greater", (input, other))


def greater_equal(input, other):  # noqa: A002
    return call("greater_equal", (input, other))


# ---- bitwise: integers (and bools for and/or/xor/invert); a TypeError for floats, both modes
def bitwise_and(input, other):  # noqa: A002
    return call("bitwise_and", (input, other))


def bitwise_or(input, other):  # noqa: A002
    return call("bitwise_or", (input, other))


def bitwise_xor(input, other):  # noqa: A002
    return call("bitwise_xor", (input, other))


def bitwise_left_shift(input, other):  # noqa: A002
    """input << other; a shift by a negative count or by the bit width or more gives 0."""
    return call("bitwise_left_shift", (input, other))


def bitwise_right_shift(input, other):  # noqa: A002
    """input >> other (arithmetic); a shift past the bit width gives 0, or -1 when negative."""
    return call("bitwise_right_shift", (input, other))


def invert(input):  # noqa: A002
    """~input: bitwise not of an integer tensor, logical not of a bool tensor."""
    return call("bitwise_not", (input,))


def logical_and(input, other):  # noqa: A002
    return call("logical_and", (input, other))


def logical_or(input, other):  # noqa: A002
    return call("logical_or", (input, other))


def logical_xor(input, other):  # noqa: A002
    return call("logical_xor", (input, other))


def logical_not(input):  # noqa: A002
    return call("logical_not", (input,))


def where(condition, x, y):
    """x where condition holds, else y; all three broadcast together."""
    if not is_tensor(x) and not is_tensor(y):
        x, y = _scalar_branches(x, y)
    return call("where", (condition, x, y))


def _scalar_branches(x, y):
    """Two Python numbers as where's branches take MindSpore's default dtypes (float32 when
    either is a float, else int64), where NumPy's rules would give float64."""
    from kiln.common._arrays import tensor_of  # noqa: PLC0415 - kiln.common imports ops

    numbers = (bool, int, float)
    if not (isinstance(x, numbers) and isinstance(y, numbers)):
        return x, y
    if isinstance(x, float) or isinstance(y, float):
        dtype = np.float32
    else:
        dtype = np.bool_ if isinstance(x, bool) and isinstance(y, bool) else np.int64
    return tensor_of(np.array(x, dtype)), tensor_of(np.array(y, dtype))


def cast(input, dtype):  # noqa: A002
    return call("cast", (input,), (dtype_attr(dtype),))


def clamp(input, min=None, max=None):  # noqa: A002
    """Limits input to [min, max]; bounds may be numbers or tensors (then they broadcast)."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    if is_tensor(min) or is_tensor(max):
        out = input
        if min is not None:
            out = maximum(out, min)
        if max is not None:
            out = minimum(out, max)
        return out
    return call("clamp", (input,), (_number(min, "min"), _number(max, "max")))


def _number(value, name):
    if value is None or isinstance(value, (bool, int, float)):
        return value
    raise TypeError(f"clamp: {name} must be a number, a Tensor or None, got {type(value).__name__}")


clip = clamp
divide = div
true_divide = div
subtract = sub
multiply = mul
negative = neg
absolute = abs
ne = not_equal
lt = less
le = less_equal
gt = greater
ge = greater_equal

del mstype
