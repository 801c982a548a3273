"""Activation layers (MindSpore names, arguments and defaults): ReLU, ReLU6, GELU, Sigmoid, Tanh,
Softmax, LogSoftmax, LeakyReLU, SiLU, PReLU, ELU, CELU, SeLU, HSwish, HSigmoid, Hardtanh, Mish,
Softsign, LogSigmoid, Softmin, Softmax2d, Tanhshrink, SoftShrink, HShrink, Threshold, GLU, RReLU
(MindSpore 2.10 has no nn.Softplus: use ops.softplus)."""
import numbers

import numpy as np

from kiln import _C, ops
from kiln.common import dtype as mstype
from kiln.common.parameter import Parameter
from kiln.common.tensor import Tensor
from kiln.nn import _functional as F
from kiln.nn.cell import Cell

__all__ = ["ReLU", "ReLU6", "GELU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "LeakyReLU", "SiLU",
           "PReLU", "ELU", "CELU", "SeLU", "HSwish", "HSigmoid", "Hardtanh", "Mish",
           "Softsign", "LogSigmoid", "Softmin", "Softmax2d", "Tanhshrink", "SoftShrink",
           "HShrink", "Threshold", "GLU", "RReLU", "get_activation"]


def _check_axis(axis, who):
    if isinstance(axis, bool) or not isinstance(axis, (int, tuple)):
        raise TypeError(f"{who}: axis must be an int, got {axis!r}")
    return axis


class ReLU(Cell):
    def construct(self, x):
        return ops.relu(x)


class GELU(Cell):
    """GELU; approximate=True (MindSpore's default) uses the tanh formula, False uses erf."""

    def __init__(self, approximate=True):
        super().__init__()
        if not isinstance(approximate, bool):
            raise TypeError(f"GELU: approximate must be a bool, got {approximate!r}")
        self.approximate = approximate

    def construct(self, x):
        return ops.gelu(x, "tanh" if self.approximate else "none")

    def extend_repr(self):
        return f"approximate={self.approximate}"


class Sigmoid(Cell):
    def construct(self, x):
        return ops.sigmoid(x)


class Tanh(Cell):
    def construct(self, x):
        return ops.tanh(x)


class Softmax(Cell):
    def __init__(self, axis=-1):
        super().__init__()
        self.axis = _check_axis(axis, "Softmax")

    def construct(self, x):
        return F.softmax(x, self.axis)

    def extend_repr(self):
        return f"axis={self.axis}"


class LogSoftmax(Cell):
    def __init__(self, axis=-1):
        super().__init__()
        self.axis = _check_axis(axis, "LogSoftmax")

    def construct(self, x):
        return F.log_softmax(x, self.axis)

    def extend_repr(self):
        return f"axis={self.axis}"


def _float_arg(value, who, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{who}: {name} must be a float, got {value!r}")
    return float(value)


class ReLU6(Cell):
    """min(max(x, 0), 6)."""

    def construct(self, x):
        return ops.relu6(x)


class LeakyReLU(Cell):
    """max(alpha * x, x) (min for alpha > 1); alpha defaults to 0.2 as in MindSpore."""

    def __init__(self, alpha=0.2):
        super().__init__()
        self.alpha = _float_arg(alpha, "LeakyReLU", "alpha")

    def construct(self, x):
        return ops.leaky_relu(x, self.alpha)

    def extend_repr(self):
        return f"alpha={self.alpha}"


class SiLU(Cell):
    """x * sigmoid(x)."""

    def construct(self, x):
        return ops.silu(x)


class PReLU(Cell):
    """max(0, x) + w * min(0, x) with a learned slope per channel (axis 1): the Parameter is
    named 'a' and holds `channel` values starting at w (MindSpore's defaults: 1 and 0.25)."""

    def __init__(self, channel=1, w=0.25):
        super().__init__()
        if isinstance(channel, bool) or not isinstance(channel, int) or channel < 1:
            raise ValueError(f"PReLU: channel must be a positive int, got {channel!r}")
        if isinstance(w, (float, np.floating)) or (isinstance(w, int) and not isinstance(w, bool)):
            w = Tensor(np.full((channel,), float(w), np.float32))
        elif isinstance(w, list):
            if len(w) != channel:
                raise ValueError(f"PReLU: w has {len(w)} values, expected channel={channel}")
            w = Tensor(np.asarray(w, np.float32))
        elif isinstance(w, _C.TensorBase):
            if w.dtype not in (mstype.float16, mstype.float32) or tuple(w.shape) != (channel,):
                raise ValueError(f"PReLU: a w Tensor must be float16/float32 of shape "
                                 f"({channel},), got {w.dtype} {tuple(w.shape)}")
        else:
            raise TypeError(f"PReLU: w must be a float, a list or a Tensor, got "
                            f"{type(w).__name__}")
        self.channel = channel
        self.w = Parameter(w, name="a")

    def construct(self, x):
        return ops.prelu(x, ops.cast(self.w, x.dtype))


class ELU(Cell):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = _float_arg(alpha, "ELU", "alpha")

    def construct(self, x):
        return ops.elu(x, self.alpha)


class CELU(Cell):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = _float_arg(alpha, "CELU", "alpha")
        if self.alpha == 0:
            raise ValueError("CELU: alpha must not be 0")

    def construct(self, x):
        return ops.celu(x, self.alpha)


class SeLU(Cell):
    """Scaled ELU with the self-normalizing constants."""

    def construct(self, x):
        return ops.selu(x)


class HSwish(Cell):
    """x * relu6(x + 3) / 6."""

    def construct(self, x):
        return ops.hardswish(x)


class HSigmoid(Cell):
    """relu6(x + 3) / 6."""

    def construct(self, x):
        return ops.hardsigmoid(x)


class Hardtanh(Cell):
    """x clamped to [min_val, max_val]."""

    def __init__(self, min_val=-1.0, max_val=1.0):
        super().__init__()
        self.min_val = _float_arg(min_val, "Hardtanh", "min_val")
        self.max_val = _float_arg(max_val, "Hardtanh", "max_val")
        if self.min_val > self.max_val:
            raise ValueError(f"Hardtanh: min_val ({min_val}) must not exceed max_val "
                             f"({max_val})")

    def construct(self, x):
        return ops.hardtanh(x, self.min_val, self.max_val)


class Mish(Cell):
    """x * tanh(softplus(x))."""

    def construct(self, x):
        return ops.mish(x)


class Softsign(Cell):
    """x / (1 + |x|)."""

    def construct(self, x):
        return ops.softsign(x)


class LogSigmoid(Cell):
    """log(sigmoid(x))."""

    def construct(self, x):
        return ops.logsigmoid(x)


class Softmin(Cell):
    """softmax(-x) along axis."""

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = _check_axis(axis, "Softmin")

    def construct(self, x):
        return ops.softmin(x, self.axis)


class Softmax2d(Cell):
    """Softmax over the channel axis (-3) of (C, H, W) or (N, C, H, W)."""

    def construct(self, x):
        if len(x.shape) not in (3, 4):
            raise ValueError(f"Softmax2d: the input must have 3 or 4 dims, got shape "
                             f"{tuple(x.shape)}")
        return ops.softmax(x, -3)


class Tanhshrink(Cell):
    """x - tanh(x)."""

    def construct(self, x):
        return ops.tanhshrink(x)


class SoftShrink(Cell):
    """x - lambd * sign(x) where |x| > lambd, else 0."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = _float_arg(lambd, "SoftShrink", "lambd")

    def construct(self, input):  # noqa: A002 - MindSpore's argument name
        return ops.softshrink(input, self.lambd)


class HShrink(Cell):
    """x where |x| > lambd, else 0."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = _float_arg(lambd, "HShrink", "lambd")

    def construct(self, input):  # noqa: A002
        return ops.hardshrink(input, self.lambd)


class Threshold(Cell):
    """x where x > threshold, else value."""

    def __init__(self, threshold, value):
        super().__init__()
        self.threshold = _float_arg(threshold, "Threshold", "threshold")
        self.value = _float_arg(value, "Threshold", "value")

    def construct(self, input_x):
        return ops.threshold(input_x, self.threshold, self.value)


class GLU(Cell):
    """a * sigmoid(b) for the halves a, b of x along axis."""

    def __init__(self, axis=-1):
        super().__init__()
        self.dim = _check_axis(axis, "GLU")

    def construct(self, x):
        return ops.glu(x, self.dim)


class RReLU(Cell):
    """x for x >= 0, a * x otherwise with a ~ U(lower, upper) drawn per element on every call
    (training or not, as MindSpore's RReLU)."""

    def __init__(self, lower=1 / 8, upper=1 / 3):
        super().__init__()
        self.lower = _float_arg(lower, "RReLU", "lower")
        self.upper = _float_arg(upper, "RReLU", "upper")
        if self.lower > self.upper:
            raise ValueError(f"RReLU: upper must be >= lower, got lower={lower}, upper={upper}")

    def construct(self, x):
        return ops.rrelu(x, self.lower, self.upper)


# MindSpore 2.10's get_activation names (those kiln has).
_ACTIVATIONS = {
    "softmin": Softmin, "softmax": Softmax, "softmax2d": Softmax2d, "logsoftmax": LogSoftmax,
    "relu": ReLU, "relu6": ReLU6, "rrelu": RReLU, "silu": SiLU, "tanh": Tanh,
    "tanhshrink": Tanhshrink, "hardtanh": Hardtanh, "gelu": GELU, "elu": ELU,
    "sigmoid": Sigmoid, "softsign": Softsign, "prelu": PReLU, "leakyrelu": LeakyReLU,
    "hswish": HSwish, "hsigmoid": HSigmoid, "logsigmoid": LogSigmoid, "softshrink": SoftShrink,
    "hshrink": HShrink, "mish": Mish,
}


def get_activation(name):
    """The activation Cell for a MindSpore activation name ('relu', 'gelu', ...); None -> None."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise TypeError(f"get_activation: name must be a str, got {type(name).__name__}")
    key = name.lower()
    if key not in _ACTIVATIONS:
        raise KeyError(f"get_activation: unknown activation {name!r}; known: "
                       f"{sorted(_ACTIVATIONS)}")
    return _ACTIVATIONS[key]()
