"""Basic layers: Dense, Linear, Flatten, Dropout, Identity (MindSpore argument names and
defaults)."""
import math
import numbers

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.initializer import HeUniform, Uniform, initializer
from kiln.common.parameter import Parameter
from kiln.nn import _functional as F
from kiln.nn.cell import Cell
from kiln.nn.layer.activation import get_activation

__all__ = ["Dense", "Linear", "Flatten", "Unflatten", "Dropout", "Identity"]


def check_int(value, who, name, minimum=1):
    """value as an int >= minimum, else TypeError/ValueError naming the layer and argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{who}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{who}: {name} must be >= {minimum}, got {value}")
    return int(value)


def check_bool(value, who, name):
    if not isinstance(value, bool):
        raise TypeError(f"{who}: {name} must be a bool, got {value!r}")
    return value


class Dense(Cell):
    """y = activation(x @ weight.T + bias); weight is (out_channels, in_channels).

    Defaults as MindSpore 2.x: weight HeUniform(negative_slope=sqrt(5)) and bias
    Uniform(1 / sqrt(in_channels)), i.e. both U(-1/sqrt(in), 1/sqrt(in)).
    """

    def __init__(self, in_channels, out_channels, weight_init=None, bias_init=None,
                 has_bias=True, activation=None, dtype=mstype.float32):
        super().__init__()
        self.in_channels = check_int(in_channels, "Dense", "in_channels")
        self.out_channels = check_int(out_channels, "Dense", "out_channels")
        self.has_bias = check_bool(has_bias, "Dense", "has_bias")
        shape = (self.out_channels, self.in_channels)
        if weight_init is None:
            weight_init = HeUniform(math.sqrt(5))
        elif hasattr(weight_init, "shape") and tuple(weight_init.shape) != shape:
            raise ValueError(f"Dense: weight_init has shape {tuple(weight_init.shape)}, "
                             f"expected (out_channels, in_channels) = {shape}")
        self.weight = Parameter(initializer(weight_init, shape, dtype), name="weight")
        self.bias = None
        if self.has_bias:
            if bias_init is None:
                bias_init = Uniform(1 / math.sqrt(self.in_channels))
            elif hasattr(bias_init, "shape") and tuple(bias_init.shape) != (self.out_channels,):
                raise ValueError(f"Dense: bias_init has shape {tuple(bias_init.shape)}, "
                                 f"expected ({self.out_channels},)")
            self.bias = Parameter(initializer(bias_init, (self.out_channels,), dtype),
                                  name="bias")
        if activation is None or isinstance(activation, str):
            self.activation = get_activation(activation)
        elif isinstance(activation, Cell) or callable(activation):
            self.activation = activation
        else:
            raise TypeError(f"Dense: activation must be a str, a Cell or None, got "
                            f"{type(activation).__name__}")
        self.activation_flag = self.activation is not None

    def construct(self, x):
        shape = tuple(x.shape)
        if len(shape) < 1 or shape[-1] != self.in_channels:
            raise ValueError(f"Dense: expected an input whose last dimension is in_channels="
                             f"{self.in_channels}, got shape {shape}")
        y = F.dense(x, self.weight, self.bias)
        if self.activation_flag:
            y = self.activation(y)
        return y

    def extend_repr(self):
        s = (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
             f"has_bias={self.has_bias}")
        if self.activation_flag:
            s += f", activation={self.activation}"
        return s


class Linear(Dense):
    """y = x @ weight.T + bias with MindSpore's Linear arguments (in_features, out_features,
    bias, weight_init, bias_init, dtype); the same parameters and initializers as Dense."""

    def __init__(self, in_features, out_features, bias=True, weight_init=None, bias_init=None,
                 dtype=None):
        super().__init__(in_features, out_features, weight_init, bias_init,
                         check_bool(bias, "Linear", "bias"), None,
                         mstype.float32 if dtype is None else dtype)
        self.in_features, self.out_features = self.in_channels, self.out_channels

    def extend_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.has_bias}")


class Flatten(Cell):
    """Merges the axes start_dim..end_dim (default: all but the batch axis)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = check_int(start_dim, "Flatten", "start_dim", minimum=-2**31)
        self.end_dim = check_int(end_dim, "Flatten", "end_dim", minimum=-2**31)

    def construct(self, x):
        return ops.flatten(x, start_dim=self.start_dim, end_dim=self.end_dim)


class Unflatten(Cell):
    """Splits axis `axis` into unflattened_size (a tuple or list; one entry may be -1)."""

    def __init__(self, axis, unflattened_size):
        super().__init__()
        self.axis = check_int(axis, "Unflatten", "axis", minimum=-2**31)
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(f"Unflatten: unflattened_size must be a tuple or list, got "
                            f"{type(unflattened_size).__name__}")
        self.unflattened_size = tuple(unflattened_size)

    def construct(self, input_x):
        shape = tuple(input_x.shape)
        axis = self.axis % len(shape)
        return ops.reshape(input_x, shape[:axis] + self.unflattened_size + shape[axis + 1:])


class Identity(Cell):
    def construct(self, x):
        return x


class Dropout(Cell):
    """Zeroes elements with probability p in training mode (scaling the rest by 1/(1-p));
    the identity in evaluation mode.

    MindSpore's signature: the first positional argument is keep_prob (deprecated), the
    keyword p is the drop probability; with neither, p = 0.5.
    """

    def __init__(self, keep_prob=None, p=None, dtype=mstype.float32):
        super().__init__()
        if p is None:
            p = 0.5 if keep_prob is None else 1.0 - self._prob(keep_prob, "keep_prob")
        p = self._prob(p, "p")
        if p >= 1.0 and keep_prob is None:
            raise ValueError(f"Dropout: p must be in [0, 1), got {p}")
        if keep_prob is not None and not 0 < keep_prob <= 1:
            raise ValueError(f"Dropout: keep_prob must be in (0, 1], got {keep_prob}")
        self.p = p
        self.keep_prob = 1.0 - p

    @staticmethod
    def _prob(value, name):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"Dropout: {name} must be a float, got {value!r}")
        if not 0 <= value <= 1:
            raise ValueError(f"Dropout: {name} must be in [0, 1], got {value}")
        return float(value)

    def construct(self, x):
        if not self.training or self.p == 0:
            return x
        return F.dropout(x, self.p)

    def extend_repr(self):
        return f"p={self.p}"
