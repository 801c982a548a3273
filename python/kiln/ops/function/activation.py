"""Activation functional ops composed of registry ops (their gradients follow): leaky_relu, elu,
selu, celu, relu6, hardsigmoid, hardswish, hardtanh, mish, softplus, softsign, logsigmoid, prelu,
log1p, expm1, softmin, threshold, glu, tanhshrink, softshrink, hardshrink, rrelu. MindSpore 2.x
names, arguments and defaults."""
import numbers

from kiln.ops._core import call, int_arg, is_tensor

__all__ = [
    "leaky_relu", "elu", "selu", "celu", "relu6", "hardsigmoid", "hardswish", "hardtanh", "mish",
    "softplus", "softsign", "logsigmoid", "prelu", "log1p", "expm1", "softmin", "threshold",
    "glu", "tanhshrink", "softshrink", "hardshrink", "rrelu",
]

# SELU's constants (Klambauer et al., 2017), as MindSpore's SeLU uses them.
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _float_input(op, x, name="input"):
    if not is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: {name} must be a floating-point Tensor (float16, bfloat16, "
                        f"float32 or float64), got {x.dtype}")
    return x


def _real(op, name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {name} must be a float, got {value!r}")
    return float(value)


def log1p(input):  # noqa: A002
    """log(1 + x), accurate for small x (the log1p op: glibc's vector log1p for floats)."""
    return call("log1p", (_float_input("log1p", input),))


def expm1(input):  # noqa: A002
    """exp(x) - 1, accurate for small x (the expm1 op: a series near 0, exp(x) - 1 beyond)."""
    return call("expm1", (_float_input("expm1", input),))


def leaky_relu(input, alpha=0.2):  # noqa: A002
    """max(alpha * x, x) for alpha <= 1 (min for alpha > 1), as MindSpore's LeakyReLU."""
    x = _float_input("leaky_relu", input)
    alpha = _real("leaky_relu", "alpha", alpha)
    scaled = call("mul", (x, alpha))
    return call("maximum" if alpha <= 1 else "minimum", (scaled, x))


def _exp_negative_part(x):
    """exp(x) - 1 on the negative part only: positive x contribute 0 and no overflow (their
    branch is discarded by where, but its gradient must stay finite)."""
    return expm1(call("minimum", (x, 0.0)))


def elu(input_x, alpha=1.0):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    x = _float_input("elu", input_x, "input_x")
    alpha = _real("elu", "alpha", alpha)
    neg = call("mul", (_exp_negative_part(x), alpha))
    return call("where", (call("greater", (x, 0.0)), x, neg))


def celu(x, alpha=1.0):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    x = _float_input("celu", x, "x")
    alpha = _real("celu", "alpha", alpha)
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0")
    neg = call("mul", (_exp_negative_part(call("div", (x, alpha))), alpha))
    return call("where", (call("greater", (x, 0.0)), x, neg))


def selu(input_x):
    """scale * (x for x > 0, alpha * (exp(x) - 1) otherwise), the self-normalizing constants."""
    x = _float_input("selu", input_x, "input_x")
    return call("mul", (elu(x, _SELU_ALPHA), _SELU_SCALE))


def relu6(x):
    """min(max(x, 0), 6)."""
    return call("clamp", (_float_input("relu6", x, "x"),), (0.0, 6.0))


def hardsigmoid(input):  # noqa: A002
    """relu6(x + 3) / 6."""
    x = _float_input("hardsigmoid", input)
    return call("div", (call("clamp", (call("add", (x, 3.0)),), (0.0, 6.0)), 6.0))


def hardswish(input):  # noqa: A002
    """x * relu6(x + 3) / 6."""
    x = _float_input("hardswish", input)
    return call("mul", (x, hardsigmoid(x)))


def hardtanh(input, min_val=-1.0, max_val=1.0):  # noqa: A002
    """x clamped to [min_val, max_val]."""
    x = _float_input("hardtanh", input)
    low, high = _real("hardtanh", "min_val", min_val), _real("hardtanh", "max_val", max_val)
    if low > high:
        raise ValueError(f"hardtanh: min_val ({low}) must not exceed max_val ({high})")
    return call("clamp", (x,), (low, high))


def _softplus_raw(z):
    """log(1 + exp(z)) without overflow and without a threshold (the softplus op)."""
    return call("softplus", (z,), (1.0, None))


def softplus(input, beta=1, threshold=20):  # noqa: A002
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (the softplus op,
    computed as max(z, 0) + log1p(exp(-|z|)) with z = beta * x, so it cannot overflow)."""
    x = _float_input("softplus", input)
    beta, threshold = _real("softplus", "beta", beta), _real("softplus", "threshold", threshold)
    if beta == 0:
        raise ValueError("softplus: beta must not be 0")
    return call("softplus", (x,), (beta, threshold))


def mish(x):
    """x * tanh(softplus(x))."""
    x = _float_input("mish", x, "x")
    return call("mul", (x, call("tanh", (_softplus_raw(x),))))


def softsign(x):
    """x / (1 + |x|)."""
    x = _float_input("softsign", x, "x")
    return call("div", (x, call("add", (call("abs", (x,)), 1.0))))


def logsigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), without overflow."""
    x = _float_input("logsigmoid", x, "x")
    return call("neg", (_softplus_raw(call("neg", (x,))),))


def prelu(input, weight):  # noqa: A002
    """max(0, x) + weight * min(0, x); weight is (1,) or one value per channel (axis 1, or axis
    0 for a 1-D x)."""
    x = _float_input("prelu", input)
    if not is_tensor(weight):
        raise TypeError(f"prelu: weight must be a Tensor, got {type(weight).__name__}")
    shape, wshape = tuple(x.shape), tuple(weight.shape)
    if len(wshape) != 1:
        raise ValueError(f"prelu: weight must be 1-D, got shape {wshape}")
    if wshape[0] != 1:
        axis = 1 if len(shape) >= 2 else 0
        if not shape or shape[axis] != wshape[0]:
            raise ValueError(f"prelu: weight has {wshape[0]} values but x of shape {shape} has "
                             f"{shape[axis] if shape else 0} channels (axis {axis})")
        weight = call("reshape", (weight,), ((wshape[0],) + (1,) * (len(shape) - axis - 1),))
    if weight.dtype != x.dtype:
        weight = call("cast", (weight,), (x.dtype._enum,))
    neg = call("mul", (call("minimum", (x, 0.0)), weight))
    return call("add", (call("relu", (x,)), neg))


def softmin(x, axis=-1, *, dtype=None):
    """softmax(-x) along axis (cast to dtype first when given)."""
    x = _float_input("softmin", x, "x")
    if dtype is not None:
        x = call("cast", (x,), (dtype._enum,))
    axis = tuple(int_arg(a, "softmin", "axis") for a in axis) if isinstance(axis, tuple) \
        else (int_arg(axis, "softmin", "axis"),)
    if len(axis) != 1:
        # Several axes: exp(-x) normalized over all of them together.
        neg = call("neg", (x,))
        shifted = call("sub", (neg, call("reduce_max", (neg,), (axis, True))))
        e = call("exp", (shifted,))
        return call("div", (e, call("reduce_sum", (e,), (axis, True, None))))
    return call("softmax", (call("neg", (x,)),), (axis[0],))


def threshold(input, thr, value):  # noqa: A002
    """input where input > thr, else value."""
    if not is_tensor(input):
        raise TypeError(f"threshold: input must be a Tensor, got {type(input).__name__}")
    thr, value = _real("threshold", "thr", thr), _real("threshold", "value", value)
    # The replacement is made in the input's dtype (a 0-d constant that where broadcasts).
    fill = call("fill", (), ((), value, input.dtype._enum))
    return call("where", (call("greater", (input, thr)), input, fill))


def glu(x, axis=-1):
    """a * sigmoid(b) for the two halves a, b of x along axis."""
    x = _float_input("glu", x, "x")
    shape = tuple(x.shape)
    ax = int_arg(axis, "glu", "axis") % len(shape) if shape else 0
    if not shape or shape[ax] % 2:
        raise ValueError(f"glu: the size of axis {axis} must be even, got shape {shape}")
    half = shape[ax] // 2
    a, b = call("split", (x,), (ax, (half, half)))
    return call("mul", (a, call("sigmoid", (b,))))


def tanhshrink(input):  # noqa: A002
    """x - tanh(x)."""
    x = _float_input("tanhshrink", input)
    return call("sub", (x, call("tanh", (x,))))


def softshrink(input, lambd=0.5):  # noqa: A002
    """x - lambd where x > lambd, x + lambd where x < -lambd, else 0."""
    x = _float_input("softshrink", input)
    lambd = _real("softshrink", "lambd", lambd)
    if lambd < 0:
        raise ValueError(f"softshrink: lambd must be >= 0, got {lambd}")
    shrunk = call("sub", (x, call("mul", (call("sign", (x,)), lambd))))
    return call("where", (call("greater", (call("abs", (x,)), lambd)), shrunk, 0.0))


def hardshrink(input, lambd=0.5):  # noqa: A002
    """x where |x| > lambd, else 0."""
    x = _float_input("hardshrink", input)
    lambd = _real("hardshrink", "lambd", lambd)
    return call("where", (call("greater", (call("abs", (x,)), lambd)), x, 0.0))


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3):  # noqa: A002
    """x for x >= 0, a * x otherwise with a drawn from U(lower, upper) per element (always
    random, as MindSpore's rrelu)."""
    x = _float_input("rrelu", input)
    lower, upper = _real("rrelu", "lower", lower), _real("rrelu", "upper", upper)
    if lower > upper:
        raise ValueError(f"rrelu: upper must be >= lower, got lower={lower}, upper={upper}")
    slope = call("uniform_real", (x,), (tuple(x.shape), x.dtype._enum, lower, upper, None))
    return call("where", (call("less", (x, 0.0)), call("mul", (x, slope)), x))
