"""kiln.common.initializer -- MindSpore's parameter initializers (classes and string names).

Random initializers draw from kiln's global generator through the C++ random ops
(`ops.uniform`, `ops.standard_normal`), the same generator dropout and the random ops use, so
`kiln.set_seed(n)` followed by the same sequence of layer constructions gives the same weights.
"""
import math
import numbers

import numpy as np

from kiln import _C, _graph_state, ops
from kiln.common import dtype as mstype
from kiln.common._arrays import tensor_of

__all__ = [
    "Initializer", "initializer", "Zero", "One", "Constant", "Normal", "Uniform", "HeUniform",
    "HeNormal", "XavierUniform", "XavierNormal", "TruncatedNormal", "Identity",
]


def _calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (MindSpore's and PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, numbers.Real):
            raise TypeError(f"leaky_relu gain: negative_slope must be a number, got {slope!r}")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(shape, who):
    """fan_in = in * receptive field, fan_out = out * receptive field; weights: (out, in, ...)."""
    shape = tuple(shape)
    if len(shape) == 0:
        raise ValueError(f"{who}: cannot compute fan in/out of a scalar (shape ())")
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


class Initializer:
    """Base class: an initializer fills a NumPy array in place when called (`init(arr)`), and
    `init_data(shape, dtype)` gives a kiln Tensor."""

    def __init__(self, **kwargs):
        self._kwargs = kwargs

    def _sample(self, shape):
        """A float64 NumPy array of `shape` with this initializer's values."""
        raise NotImplementedError

    def __call__(self, arr):
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"{type(self).__name__}: expected a numpy.ndarray to fill, got "
                            f"{type(arr).__name__}")
        arr[...] = self._sample(arr.shape).astype(arr.dtype, copy=False)
        return arr

    def init_data(self, shape, dtype=mstype.float32):
        dtype = mstype.to_dtype(dtype)
        with _graph_state.eager():  # initial values are computed now, even inside a jitted function
            values = self._sample(tuple(int(s) for s in shape))
        if dtype is mstype.bfloat16:
            return ops.cast(tensor_of(values.astype(np.float32)), dtype)
        # A copy in kiln's own memory: a tensor borrowing a NumPy array counts as written from
        # outside (Storage::numpy_alias), and compiled graphs do not cache packed copies of it.
        return tensor_of(values.astype(mstype.dtype_to_nptype(dtype)))._clone()

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        return f"{type(self).__name__}({args})"


def _uniform(shape, low, high):
    """Uniform samples from kiln's seeded global generator, as float64 NumPy values."""
    if int(np.prod(shape)) == 0:
        return np.zeros(shape)
    t = ops.uniform(tuple(shape), float(low), float(high), dtype=mstype.float64)
    return np.array(t.asnumpy(), dtype=np.float64)


def _normal(shape, mean, std):
    if int(np.prod(shape)) == 0:
        return np.zeros(shape)
    t = ops.standard_normal(tuple(shape), dtype=mstype.float64)
    return np.array(t.asnumpy(), dtype=np.float64) * std + mean


class Zero(Initializer):
    def _sample(self, shape):
        return np.zeros(shape)


class One(Initializer):
    def _sample(self, shape):
        return np.ones(shape)


class Constant(Initializer):
    """Every element equal to `value`."""

    def __init__(self, value):
        if isinstance(value, bool) or not isinstance(value, numbers.Number):
            if not (isinstance(value, (np.ndarray, _C.TensorBase)) and np.size(value) == 1):
                raise TypeError(f"Constant: value must be a number, got {type(value).__name__}")
            value = np.asarray(value).item()
        super().__init__(value=value)
        self.value = value

    def _sample(self, shape):
        return np.full(shape, self.value, dtype=np.float64)


class Normal(Initializer):
    """N(mean, sigma^2) samples; MindSpore's defaults sigma=0.01, mean=0."""

    def __init__(self, sigma=0.01, mean=0.0):
        super().__init__(sigma=sigma, mean=mean)
        self.sigma, self.mean = float(sigma), float(mean)

    def _sample(self, shape):
        return _normal(shape, self.mean, self.sigma)


class Uniform(Initializer):
    """U(-scale, scale); MindSpore's default scale=0.07."""

    def __init__(self, scale=0.07):
        super().__init__(scale=scale)
        self.scale = float(scale)

    def _sample(self, shape):
        return _uniform(shape, -self.scale, self.scale)


class _HeBase(Initializer):
    def __init__(self, negative_slope=0, mode="fan_in", nonlinearity="leaky_relu"):
        if mode not in ("fan_in", "fan_out"):
            raise ValueError(f"{type(self).__name__}: mode must be 'fan_in' or 'fan_out', "
                             f"got {mode!r}")
        super().__init__(negative_slope=negative_slope, mode=mode, nonlinearity=nonlinearity)
        self.negative_slope, self.mode, self.nonlinearity = negative_slope, mode, nonlinearity

    def _std(self, shape):
        fan_in, fan_out = _calculate_fan_in_and_fan_out(shape, type(self).__name__)
        fan = fan_in if self.mode == "fan_in" else fan_out
        return _calculate_gain(self.nonlinearity, self.negative_slope) / math.sqrt(fan)


class HeUniform(_HeBase):
    """U(-b, b) with b = gain * sqrt(3 / fan) (Kaiming uniform)."""

    def _sample(self, shape):
        bound = math.sqrt(3.0) * self._std(shape)
        return _uniform(shape, -bound, bound)


class HeNormal(_HeBase):
    """N(0, (gain / sqrt(fan))^2) (Kaiming normal)."""

    def _sample(self, shape):
        return _normal(shape, 0.0, self._std(shape))


class XavierUniform(Initializer):
    """U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)) (Glorot uniform)."""

    def __init__(self, gain=1):
        super().__init__(gain=gain)
        self.gain = float(gain)

    def _sample(self, shape):
        fan_in, fan_out = _calculate_fan_in_and_fan_out(shape, "XavierUniform")
        bound = self.gain * math.sqrt(6.0 / (fan_in + fan_out))
        return _uniform(shape, -bound, bound)


class XavierNormal(Initializer):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""

    def __init__(self, gain=1):
        super().__init__(gain=gain)
        self.gain = float(gain)

    def _sample(self, shape):
        fan_in, fan_out = _calculate_fan_in_and_fan_out(shape, "XavierNormal")
        return _normal(shape, 0.0, self.gain * math.sqrt(2.0 / (fan_in + fan_out)))


class TruncatedNormal(Initializer):
    """N(mean, sigma^2) restricted to [a, b] (out-of-range samples are redrawn)."""

    def __init__(self, sigma=0.01, mean=0.0, a=-2.0, b=2.0):
        if not a < b:
            raise ValueError(f"TruncatedNormal: need a < b, got a={a}, b={b}")
        super().__init__(sigma=sigma, mean=mean, a=a, b=b)
        self.sigma, self.mean, self.a, self.b = float(sigma), float(mean), float(a), float(b)

    def _sample(self, shape):
        values = _normal(shape, self.mean, self.sigma)
        bad = (values < self.a) | (values > self.b)
        # Redraw rejected entries; each round keeps the in-range fraction, so this converges fast.
        for _ in range(100):
            n = int(bad.sum())
            if n == 0:
                return values
            values[bad] = _normal((n,), self.mean, self.sigma)
            bad = (values < self.a) | (values > self.b)
        return np.clip(values, self.a, self.b)  # only reached for a window far in the tail


class Identity(Initializer):
    """The identity matrix (2-D shapes only)."""

    def _sample(self, shape):
        if len(shape) != 2:
            raise ValueError(f"Identity: only 2-D shapes can be initialised, got {shape}")
        return np.eye(*shape)


# String names as MindSpore registers them; lookups ignore case and underscores.
_ALIASES = {
    "zeros": Zero, "zero": Zero, "ones": One, "one": One, "normal": Normal,
    "uniform": Uniform, "heuniform": HeUniform, "henormal": HeNormal,
    "xavieruniform": XavierUniform, "xaviernormal": XavierNormal,
    "truncatednormal": TruncatedNormal, "identity": Identity, "eye": Identity,
}


def _from_name(name):
    key = name.replace("_", "").lower()
    if key not in _ALIASES:
        raise ValueError(f"initializer: unknown initializer name {name!r}; known names: "
                         f"{sorted(set(_ALIASES))}")
    return _ALIASES[key]()


def initializer(init, shape=None, dtype=mstype.float32):
    """A Tensor of `shape` and `dtype` filled by `init` (already materialised: its init_data()
    gives the same values).

    `init` is an Initializer, its string name ('zeros', 'ones', 'normal', 'he_uniform', ...), a
    number (a constant) or a Tensor/ndarray whose shape must equal `shape`.
    """
    if shape is None:
        if isinstance(init, (_C.TensorBase, np.ndarray)):
            shape = tuple(init.shape)
        else:
            raise ValueError(f"initializer: shape is required for init={init!r}")
    if isinstance(shape, numbers.Integral):
        shape = (int(shape),)
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"initializer: shape must be an int or a sequence of ints, "
                        f"got {shape!r}") from None
    if any(s < 0 for s in shape):
        raise ValueError(f"initializer: shape must not have negative dimensions, got {shape}")
    dtype = mstype.to_dtype(dtype)
    if isinstance(init, (_C.TensorBase, np.ndarray)):
        if tuple(init.shape) != shape:
            raise ValueError(f"initializer: the init tensor has shape {tuple(init.shape)} but "
                             f"shape {shape} was requested")
        arr = np.array(init.asnumpy() if isinstance(init, _C.TensorBase) else init)
        if dtype is mstype.bfloat16:
            return ops.cast(tensor_of(arr.astype(np.float32)), dtype)
        return tensor_of(arr.astype(mstype.dtype_to_nptype(dtype)))
    if isinstance(init, str):
        init = _from_name(init)
    elif isinstance(init, numbers.Number) and not isinstance(init, bool):
        init = Constant(init)
    elif isinstance(init, type) and issubclass(init, Initializer):
        init = init()
    if not isinstance(init, Initializer):
        raise TypeError(f"initializer: init must be an Initializer, a str name, a number or a "
                        f"Tensor, got {type(init).__name__}")
    return init.init_data(shape, dtype)
