"""Creation beyond zeros/ones/arange: eye, linspace, logspace, range, vander and the window
functions. Sizes must be known while building (as MindSpore requires in graphs too)."""
import math

import numpy as np

from kiln.common import dtype as mstype
from kiln.common._arrays import tensor_of
from kiln.ops._core import call, dtype_attr, int_arg, is_runtime_size, is_tensor
from kiln.ops.function.array import runtime_positions

__all__ = ["eye", "linspace", "logspace", "range", "vander", "hann_window", "hamming_window",
           "bartlett_window", "blackman_window"]


def _const(array, dtype):
    """A constant tensor of `dtype` holding array."""
    t = tensor_of(np.ascontiguousarray(array))
    return t if t.dtype == dtype else call("cast", (t,), (dtype_attr(dtype),))


def _number(op, name, value):
    """A Python number from a number or a one-element tensor (read now: sizes are static)."""
    if is_tensor(value):
        if value.size != 1:
            raise ValueError(f"{op}: {name} must hold one element, got shape "
                             f"{tuple(value.shape)}")
        return value.asnumpy().reshape(()).item()
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"{op}: {name} must be a number or a one-element Tensor, got "
                        f"{type(value).__name__}")
    return value


def eye(n, m=None, dtype=None):
    """An n x m matrix (m defaults to n) with ones on the diagonal; float32 by default."""
    if any(is_runtime_size(v) for v in (n, m)):
        return _eye_of_runtime_sizes(n, n if m is None else m, dtype)
    n = int_arg(n, "eye", "n")
    m = n if m is None else int_arg(m, "eye", "m")
    if n < 0 or m < 0:
        raise ValueError(f"eye: n and m must be non-negative, got {n} and {m}")
    return _const(np.eye(n, m, dtype=np.float32), mstype.to_dtype(dtype or mstype.float32))


def _eye_of_runtime_sizes(n, m, dtype):
    """eye for sizes read off dimensions of any size: row position == column position."""
    def positions(size):
        if is_runtime_size(size):
            return runtime_positions(size)
        return call("arange", (), (0, int_arg(size, "eye", "n"), 1, dtype_attr(mstype.int64)))

    rows = call("expand_dims", (positions(n),), (1,))
    on = call("equal", (rows, call("expand_dims", (positions(m),), (0,))))
    return call("cast", (on,), (dtype_attr(mstype.to_dtype(dtype or mstype.float32)),))


def linspace(start, end, steps):
    """`steps` evenly spaced float32 values from start to end inclusive."""
    a, b = _number("linspace", "start", start), _number("linspace", "end", end)
    steps = int_arg(_number("linspace", "steps", steps), "linspace", "steps")
    if steps < 1:
        raise ValueError(f"linspace: steps must be positive, got {steps}")
    return _const(np.linspace(a, b, steps, dtype=np.float64), mstype.float32)


def logspace(start, end, steps, base=10, *, dtype=mstype.float32):
    """base ** linspace(start, end, steps)."""
    a, b = _number("logspace", "start", start), _number("logspace", "end", end)
    steps = int_arg(steps, "logspace", "steps")
    if steps < 0:
        raise ValueError(f"logspace: steps must be non-negative, got {steps}")
    values = np.power(float(base), np.linspace(a, b, steps, dtype=np.float64))
    return _const(values, mstype.to_dtype(dtype))


def range(start, end, step, maxlen=1000000):  # noqa: A001 - MindSpore's name
    """start, start + step, ... below end (above it for a negative step); int64 for integer
    bounds, float32 for float ones."""
    vals = [_number("range", n, v) for n, v in (("start", start), ("end", end), ("step", step))]
    if vals[2] == 0:
        raise ValueError("range: step must not be zero")
    count = max(0, math.ceil((vals[1] - vals[0]) / vals[2]))
    if count > maxlen:
        raise ValueError(f"range: {count} elements exceed maxlen {maxlen}")
    floats = any(isinstance(v, float) for v in vals)
    out = np.arange(vals[0], vals[1], vals[2], dtype=np.float64 if floats else np.int64)
    return _const(out, mstype.float32 if floats else mstype.int64)


def vander(x, N=None):  # noqa: N803 - MindSpore's name
    """Columns x^(N-1), ..., x^1, x^0 of the 1-D tensor x."""
    if not is_tensor(x) or len(x.shape) != 1:
        raise ValueError("vander: x must be a 1-D Tensor")
    n = x.shape[0] if N is None else int_arg(N, "vander", "N")
    if n < 0:
        raise ValueError(f"vander: N must be non-negative, got {n}")
    col = call("expand_dims", (x,), (1,))
    powers = _const(np.arange(n - 1, -1, -1, dtype=np.int64), mstype.int64)
    if x.dtype.is_floating_point:
        powers = call("cast", (powers,), (dtype_attr(x.dtype),))
    else:
        col = call("cast", (col,), (dtype_attr(mstype.int64),))
    return call("pow", (col, powers))


def _window(op, window_length, periodic, dtype, fn):
    n = int_arg(_number(op, "window_length", window_length), op, "window_length")
    if n < 0:
        raise ValueError(f"{op}: window_length must be non-negative, got {n}")
    if not isinstance(periodic, bool):
        raise TypeError(f"{op}: periodic must be a bool, got {type(periodic).__name__}")
    dtype = mstype.to_dtype(dtype or mstype.float32)
    if not dtype.is_floating_point:
        raise TypeError(f"{op}: dtype must be a float type, got {dtype}")
    if n <= 1:
        return _const(np.ones(n), dtype)
    denom = n if periodic else n - 1
    return _const(fn(np.arange(n, dtype=np.float64), denom), dtype)


def hann_window(window_length, periodic=True, *, dtype=None):
    """The Hann window; float64 unless dtype says otherwise (what MindSpore 2.10 returns,
    unlike its other windows)."""
    return _window("hann_window", window_length, periodic, dtype or mstype.float64,
                   lambda k, d: 0.5 - 0.5 * np.cos(2 * np.pi * k / d))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None):
    return _window("hamming_window", window_length, periodic, dtype,
                   lambda k, d: alpha - beta * np.cos(2 * np.pi * k / d))


def bartlett_window(window_length, periodic=True, *, dtype=None):
    return _window("bartlett_window", window_length, periodic, dtype,
                   lambda k, d: 1 - np.abs(2 * k / d - 1))


def blackman_window(window_length, periodic=True, *, dtype=None):
    return _window("blackman_window", window_length, periodic, dtype,
                   lambda k, d: 0.42 - 0.5 * np.cos(2 * np.pi * k / d)
                   + 0.08 * np.cos(4 * np.pi * k / d))
