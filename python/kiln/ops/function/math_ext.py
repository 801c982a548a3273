"""Elementwise math beyond the basics: inverse trig, hyperbolic, special functions, float tests."""
import math

import numpy as np

from kiln.common import dtype as mstype
from kiln.ops._core import call, dtype_attr, is_tensor

__all__ = [
    "tan", "asin", "arcsin", "acos", "arccos", "atan", "arctan", "sinh", "cosh", "asinh",
    "arcsinh", "acosh", "arccosh", "atanh", "arctanh", "erf", "erfc", "erfinv", "lgamma",
    "digamma", "mvlgamma", "ceil", "trunc", "atan2", "arctan2", "log2", "log10", "exp2",
    "deg2rad", "rad2deg", "inv", "sinc", "frac", "logit", "positive", "sgn",
    "signbit", "isfinite", "isinf", "isnan", "isneginf", "isposinf", "isreal", "nan_to_num",
    "hypot", "logaddexp", "logaddexp2", "copysign", "heaviside", "fmax", "fmin", "float_power",
    "xlogy", "xdivy", "lerp", "ldexp", "floor_div", "floor_mod", "truncate_div", "truncate_mod",
    "eq", "tensor_gt", "tensor_lt", "isclose", "approximate_equal", "addcdiv", "addcmul",
]

_F32 = dtype_attr(mstype.float32)


def _tensor(op, x, name="input"):
    if not is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def _floating(op, x, name="input"):
    """x as a float tensor: integer and bool inputs become float32 (MindSpore's documented rule
    for these functions; its CPU build refuses some of them)."""
    _tensor(op, x, name)
    return x if x.dtype.is_floating_point else call("cast", (x,), (_F32,))


def _float_only(op, x, name="input"):
    """x must already be a float tensor (TypeError otherwise, as MindSpore's check says)."""
    _tensor(op, x, name)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: {name} must be a float16, float32 or float64 Tensor, got "
                        f"{x.dtype}")
    return x


def _unary(registry_name, public_name):
    def fn(input):  # noqa: A002 - MindSpore's argument name
        return call(registry_name, (_floating(public_name, input),))

    fn.__name__ = fn.__qualname__ = public_name
    fn.__doc__ = f"Elementwise {public_name}; integer inputs compute in float32."
    return fn


tan = _unary("tan", "tan")
asin = _unary("asin", "asin")
acos = _unary("acos", "acos")
atan = _unary("atan", "atan")
sinh = _unary("sinh", "sinh")
cosh = _unary("cosh", "cosh")
asinh = _unary("asinh", "asinh")
acosh = _unary("acosh", "acosh")
atanh = _unary("atanh", "atanh")
erf = _unary("erf", "erf")
erfc = _unary("erfc", "erfc")
erfinv = _unary("erfinv", "erfinv")
lgamma = _unary("lgamma", "lgamma")
digamma = _unary("digamma", "digamma")
arcsin, arccos, arctan = asin, acos, atan
arcsinh, arccosh, arctanh = asinh, acosh, atanh


def mvlgamma(input, p):  # noqa: A002
    """The multivariate log-gamma of dimension p: sum_i lgamma(x - i/2) + p(p-1)/4 log(pi)."""
    x = _float_only("mvlgamma", input)
    if not isinstance(p, int) or isinstance(p, bool) or p < 1:
        raise ValueError(f"mvlgamma: p must be an int >= 1, got {p!r}")
    total = call("lgamma", (x,))
    for i in range(1, p):
        total = call("add", (total, call("lgamma", (call("sub", (x, i / 2)),))))
    return call("add", (total, p * (p - 1) / 4 * math.log(math.pi)))


def ceil(input):  # noqa: A002
    """The smallest integer not below x; float tensors only (MindSpore's rule)."""
    return call("ceil", (_float_only("ceil", input),))


def trunc(input):  # noqa: A002
    """x rounded toward zero; integer tensors come back unchanged."""
    return call("trunc", (_tensor("trunc", input),))


def atan2(input, other):  # noqa: A002
    """The angle of (other, input) in (-pi, pi], quadrant-aware; broadcasts."""
    y, x = _promote_float("atan2", input, other)
    x_zero = call("equal", (x, 0))
    q = call("atan", (call("div", (y, call("where", (x_zero, 1.0, x)))),))
    y_neg = call("cast", (signbit(y),), (dtype_attr(y.dtype),))  # -0.0 too: atan2(-0, -1) = -pi
    shift = call("mul", (call("sub", (1.0, call("mul", (y_neg, 2.0)))), math.pi))  # y's dtype
    q = call("where", (call("less", (x, 0)), call("add", (q, shift)), q))
    on_axis = call("mul", (call("sign", (y,)), math.pi / 2))
    return call("where", (x_zero, on_axis, q))


def _promote_float(op, a, b):
    """a and b (tensors or numbers) as float tensors of their promoted type."""
    if not is_tensor(a) and not is_tensor(b):
        raise TypeError(f"{op}: at least one of input and other must be a Tensor")
    dtype = call("add", (a, b)).dtype
    target = dtype if dtype.is_floating_point else mstype.float32
    return tuple(call("cast", (v if is_tensor(v) else _like(v, target),), (dtype_attr(target),))
                 for v in (a, b))


def _like(value, dtype):
    from kiln.common._arrays import tensor_of  # noqa: PLC0415 - a constant, built when needed
    return tensor_of(np.asarray(value, mstype.dtype_to_nptype(dtype)))


arctan2 = atan2


def log2(input):  # noqa: A002
    return call("div", (call("log", (_float_only("log2", input),)), math.log(2)))


def log10(input):  # noqa: A002
    return call("div", (call("log", (_float_only("log10", input),)), math.log(10)))


def exp2(input):  # noqa: A002
    """2 ** x; integer inputs give float32."""
    return call("exp", (call("mul", (_floating("exp2", input), math.log(2))),))


def deg2rad(x):
    return call("mul", (_float_only("deg2rad", x, "x"), math.pi / 180))


def rad2deg(x):
    return call("mul", (_float_only("rad2deg", x, "x"), 180 / math.pi))


def inv(x):
    """1 / x (ops.reciprocal); integer inputs give float32."""
    from kiln.ops.function.elementwise import reciprocal  # noqa: PLC0415 - sibling module
    return reciprocal(x)


def sinc(input):  # noqa: A002
    """sin(pi x) / (pi x), 1 at 0; integer inputs give float32."""
    x = _floating("sinc", input)
    zero = call("equal", (x, 0))
    px = call("mul", (call("where", (zero, 1.0, x)), math.pi))
    return call("where", (zero, 1.0, call("div", (call("sin", (px,)), px))))


def frac(x):
    """x - trunc(x): the fractional part with x's sign; zeros for integer tensors."""
    return call("sub", (_tensor("frac", x, "x"), call("trunc", (x,))))


def logit(input, eps=None):  # noqa: A002
    """log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps is given."""
    x = _floating("logit", input)
    if eps is not None:
        x = call("clamp", (x,), (float(eps), 1.0 - float(eps)))
    return call("log", (call("div", (x, call("sub", (1.0, x)))),))


def positive(input):  # noqa: A002
    """+x (a new tensor); TypeError for bool tensors, like MindSpore."""
    _tensor("positive", input)
    if input.dtype == mstype.bool_:
        raise TypeError("positive: not supported for bool tensors")
    return call("identity", (input,))


def sgn(input):  # noqa: A002
    """The sign of x (for real tensors, sign)."""
    return call("sign", (_tensor("sgn", input),))


def signbit(input):  # noqa: A002
    """True where the sign bit is set: negative numbers and -0.0."""
    x = _tensor("signbit", input)
    if not x.dtype.is_floating_point:
        return call("less", (x, 0))
    inv_neg = call("less", (call("div", (1.0, x)), 0))  # 1 / -0.0 is -inf
    neg_zero = call("logical_and", (call("equal", (x, 0)), inv_neg))
    return call("logical_or", (call("less", (x, 0)), neg_zero))


def isnan(input):  # noqa: A002
    x = _tensor("isnan", input)
    return call("not_equal", (x, x))


def isinf(input):  # noqa: A002
    x = _tensor("isinf", input)
    if not x.dtype.is_floating_point:
        return call("not_equal", (x, x))  # all False, x's shape
    return call("equal", (call("abs", (x,)), math.inf))


def isfinite(input):  # noqa: A002
    x = _tensor("isfinite", input)
    if not x.dtype.is_floating_point:
        return call("equal", (x, x))
    return call("less", (call("abs", (x,)), math.inf))  # NaN compares False


def isposinf(input):  # noqa: A002
    return call("equal", (_float_only("isposinf", input), math.inf))


def isneginf(input):  # noqa: A002
    return call("equal", (_float_only("isneginf", input), -math.inf))


def isreal(input):  # noqa: A002
    """True everywhere: kiln has no complex dtypes."""
    x = _tensor("isreal", input)
    return call("equal", (call("mul", (x, 0)), 0)) if x.dtype != mstype.bool_ else \
        call("logical_or", (x, call("logical_not", (x,))))


def nan_to_num(input, nan=None, posinf=None, neginf=None):  # noqa: A002
    """NaN -> nan (0.0), +inf -> posinf, -inf -> neginf (the dtype's largest/lowest finite
    values by default)."""
    x = _float_only("nan_to_num", input)
    info = np.finfo(mstype.dtype_to_nptype(x.dtype)) if x.dtype != mstype.bfloat16 else None
    big = float(info.max) if info is not None else 3.3895313892515355e38
    x = call("where", (isnan(x), 0.0 if nan is None else float(nan), x))
    x = call("where", (isposinf(x), big if posinf is None else float(posinf), x))
    return call("where", (isneginf(x), -big if neginf is None else float(neginf), x))


def hypot(input, other):  # noqa: A002
    """sqrt(x^2 + y^2) without overflow for large x or y; broadcasts."""
    x, y = _promote_float("hypot", input, other)
    ax, ay = call("abs", (x,)), call("abs", (y,))
    big, small = call("maximum", (ax, ay)), call("minimum", (ax, ay))
    safe = call("where", (call("equal", (big, 0)), 1.0, big))
    ratio = call("div", (small, safe))
    out = call("mul", (big, call("sqrt", (call("add", (1.0, call("mul", (ratio, ratio)))),))))
    return call("where", (call("equal", (big, math.inf)), math.inf, out))


def logaddexp(input, other):  # noqa: A002
    """log(exp(x) + exp(y)) without overflow; float tensors only (MindSpore's rule)."""
    return _logaddexp("logaddexp", input, other, math.e)


def logaddexp2(input, other):  # noqa: A002
    """log2(2^x + 2^y) without overflow; float tensors only."""
    return _logaddexp("logaddexp2", input, other, 2.0)


def _logaddexp(op, a, b, base):
    for name, v in (("input", a), ("other", b)):
        if not is_tensor(v) or not v.dtype.is_floating_point:
            raise TypeError(f"{op}: {name} must be a float Tensor, got "
                            f"{v.dtype if is_tensor(v) else type(v).__name__}")
    m = call("maximum", (a, b))
    same = call("equal", (a, b))  # also +-inf with itself, where a - b is NaN
    d = call("where", (same, 0.0, call("abs", (call("sub", (a, b)),))))
    lnb = math.log(base)
    return call("add", (m, call("div", (_log1p_exp_neg(d, lnb), lnb))))


def _log1p_exp_neg(d, lnb):
    """ln(1 + base^-d) for d >= 0."""
    return call("log1p", (call("exp", (call("mul", (d, -lnb)),)),))


def copysign(x, other):
    """|x| with the sign of other; integer x gives float32. As in MindSpore, -0.0 in other
    counts as positive (NumPy would take its sign bit)."""
    xf = _floating("copysign", x, "x")
    neg = call("less", (other, 0)) if is_tensor(other) else other < 0
    mag = call("abs", (xf,))
    return call("where", (neg, call("neg", (mag,)), mag))


def heaviside(input, values):  # noqa: A002
    """0 where x < 0, values where x == 0, 1 where x > 0; input and values of one dtype."""
    _tensor("heaviside", input)
    if is_tensor(values) and values.dtype != input.dtype:
        raise TypeError(f"heaviside: input and values must have one dtype, got {input.dtype} "
                        f"and {values.dtype}")
    step = call("cast", (call("greater", (input, 0)),), (dtype_attr(input.dtype),))
    return call("where", (call("equal", (input, 0)), values, step))


def fmax(input, other):  # noqa: A002
    """Elementwise maximum that ignores NaN (NaN only where both are NaN)."""
    return _nan_ignoring("fmax", "maximum", input, other)


def fmin(input, other):  # noqa: A002
    return _nan_ignoring("fmin", "minimum", input, other)


def _nan_ignoring(op, registry, a, b):
    if not is_tensor(a) and not is_tensor(b):
        raise TypeError(f"{op}: at least one of input and other must be a Tensor")
    m = call(registry, (a, b))
    if not m.dtype.is_floating_point:
        return m
    a_nan = call("not_equal", (a, a))
    b_nan = call("not_equal", (b, b))
    m = call("where", (a_nan, b, m))
    return call("where", (b_nan, a, m))


def float_power(input, exponent):  # noqa: A002
    """input ** exponent computed in float64."""
    f64 = dtype_attr(mstype.float64)
    a = call("cast", (input,), (f64,)) if is_tensor(input) else float(input)
    b = call("cast", (exponent,), (f64,)) if is_tensor(exponent) else float(exponent)
    if not is_tensor(a) and not is_tensor(b):
        raise TypeError("float_power: at least one of input and exponent must be a Tensor")
    return call("pow", (a, b))


def xlogy(input, other):  # noqa: A002
    """x * log(y), 0 where x == 0 (unless y is NaN)."""
    x, y = _promote_float("xlogy", input, other)
    x_zero = call("logical_and", (call("equal", (x, 0)), call("equal", (y, y))))
    safe_y = call("where", (x_zero, 1.0, y))
    return call("where", (x_zero, 0.0, call("mul", (x, call("log", (safe_y,))))))


def xdivy(x, y):
    """x / y, 0 where x == 0."""
    a, b = _promote_float("xdivy", x, y)
    x_zero = call("equal", (a, 0))
    return call("where", (x_zero, 0.0, call("div", (a, call("where", (x_zero, 1.0, b))))))


def lerp(input, end, weight):  # noqa: A002
    """input + weight * (end - input)."""
    _tensor("lerp", input)
    return call("add", (input, call("mul", (weight, call("sub", (end, input))))))


def ldexp(x, other):
    """x * 2 ** other (float32 for integer x)."""
    scale = exp2(other) if is_tensor(other) else 2.0 ** other
    return call("mul", (_floating("ldexp", x, "x"), scale))


def floor_div(x, y):
    return call("floor_div", (x, y))


def floor_mod(x, y):
    """x - floor(x / y) * y: the result takes y's sign."""
    return call("mod", (x, y))


def truncate_div(x, y):
    """x / y rounded toward zero, in the promoted dtype."""
    from kiln.ops.function.elementwise import div  # noqa: PLC0415 - sibling module
    return div(x, y, rounding_mode="trunc")


def truncate_mod(x, y):
    """The remainder of truncate_div: it takes x's sign (C's fmod)."""
    from kiln.ops.function.elementwise import fmod  # noqa: PLC0415
    return fmod(x, y)


def eq(input, other):  # noqa: A002
    return call("equal", (input, other))


def tensor_gt(input, other):  # noqa: A002
    return call("greater", (input, other))


def tensor_lt(input, other):  # noqa: A002
    return call("less", (input, other))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """|a - b| <= atol + rtol * |b|; infinities equal only themselves; NaN equal to NaN only
    with equal_nan."""
    _tensor("isclose", input)
    a, b = _promote_float("isclose", input, other)
    close = call("less_equal", (call("abs", (call("sub", (a, b)),)),
                                call("add", (atol, call("mul", (rtol, call("abs", (b,))))))))
    close = call("logical_or", (close, call("equal", (a, b))))
    finite = call("logical_and", (isfinite(a), isfinite(b)))
    close = call("logical_or", (call("logical_and", (close, finite)), call("equal", (a, b))))
    if equal_nan:
        close = call("logical_or", (close, call("logical_and", (isnan(a), isnan(b)))))
    return close


def approximate_equal(x, y, tolerance=1e-05):
    """|x - y| < tolerance."""
    _tensor("approximate_equal", x, "x")
    return call("less", (call("abs", (call("sub", (x, y)),)), float(tolerance)))


def addcdiv(input, tensor1, tensor2, value=1):  # noqa: A002
    """input + value * tensor1 / tensor2."""
    return call("add", (input, call("mul", (value, call("div", (tensor1, tensor2))))))


def addcmul(input, tensor1, tensor2, value=1):  # noqa: A002
    """input + value * tensor1 * tensor2."""
    return call("add", (input, call("mul", (value, call("mul", (tensor1, tensor2))))))
