"""General transforms on column arrays: composition, casts, one-hot, fill, concatenation, and
random application. Each is a callable usable in map() or on its own."""
import numbers

import numpy as np

from kiln.common import dtype as mstype
from kiln.dataset import _random


def as_numpy(value):
    if hasattr(value, "asnumpy"):
        return value.asnumpy()
    return np.asarray(value)


class TensorOperation:
    """The base of kiln's transforms: ``op(*columns)`` returns the transformed column(s)."""

    def __call__(self, *args):
        if not args:
            raise TypeError(f"{type(self).__name__}: expected at least one input")
        return self._apply(*args)

    def _apply(self, *args):
        raise NotImplementedError


def _check_callables(name, transforms):
    if not isinstance(transforms, (list, tuple)) or not transforms:
        raise TypeError(f"{name}: transforms must be a non-empty list of callables")
    for t in transforms:
        if not callable(t):
            raise TypeError(f"{name}: {t!r} is not callable")
    return list(transforms)


def _run(transforms, args):
    for t in transforms:
        out = t(*args)
        args = out if isinstance(out, tuple) else (out,)
    return args[0] if len(args) == 1 else tuple(args)


class Compose(TensorOperation):
    """The transforms in order, each one's outputs the next one's inputs."""

    def __init__(self, transforms):
        self.transforms = _check_callables("Compose", transforms)

    def _apply(self, *args):
        return _run(self.transforms, args)


class RandomApply(TensorOperation):
    """All of the transforms (in order) with probability `prob`, else none."""

    def __init__(self, transforms, prob=0.5):
        self.transforms = _check_callables("RandomApply", transforms)
        if isinstance(prob, bool) or not isinstance(prob, numbers.Real) or not 0 <= prob <= 1:
            raise ValueError(f"RandomApply: prob must be in [0, 1], got {prob!r}")
        self.prob = float(prob)

    def _apply(self, *args):
        if _random.generator().random() < self.prob:
            return _run(self.transforms, args)
        return args[0] if len(args) == 1 else args


class RandomChoice(TensorOperation):
    """One of the transforms, chosen uniformly."""

    def __init__(self, transforms):
        self.transforms = _check_callables("RandomChoice", transforms)

    def _apply(self, *args):
        chosen = self.transforms[int(_random.generator().integers(len(self.transforms)))]
        return _run([chosen], args)


def _np_dtype(data_type, who):
    try:
        if isinstance(data_type, mstype.Type):
            return np.dtype(mstype.dtype_to_nptype(data_type))
        return np.dtype(data_type)
    except (TypeError, ValueError, KeyError) as exc:
        raise TypeError(f"{who}: {data_type!r} is not a data type") from exc


class TypeCast(TensorOperation):
    """The column cast to `data_type` (a kiln dtype such as ms.int32, or a NumPy type)."""

    def __init__(self, data_type):
        self.data_type = _np_dtype(data_type, "TypeCast")

    def _apply(self, x):
        return as_numpy(x).astype(self.data_type)


class OneHot(TensorOperation):
    """Integer labels (a scalar or a 1-D array) as one-hot rows of `num_classes`; with
    `smoothing_rate` s, (1 - s) on the label and s / num_classes spread over all classes."""

    def __init__(self, num_classes, smoothing_rate=0.0):
        if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral):
            raise TypeError(f"OneHot: num_classes must be an int, got {num_classes!r}")
        if num_classes < 1:
            raise ValueError(f"OneHot: num_classes must be >= 1, got {num_classes}")
        if not 0.0 <= float(smoothing_rate) <= 1.0:
            raise ValueError(f"OneHot: smoothing_rate must be in [0, 1], got {smoothing_rate}")
        self.num_classes, self.smoothing_rate = int(num_classes), float(smoothing_rate)

    def _apply(self, label):
        label = as_numpy(label)
        if label.ndim > 1 or label.dtype.kind not in "iu":
            raise RuntimeError(f"OneHot: expected integer labels of 0 or 1 dimensions, got "
                               f"{label.dtype} of shape {label.shape}")
        if label.size and (label.min() < 0 or label.max() >= self.num_classes):
            raise RuntimeError(f"OneHot: labels must be in [0, {self.num_classes}), got "
                               f"{label.min()}..{label.max()}")
        out = np.eye(self.num_classes, dtype=label.dtype)[label]
        if self.smoothing_rate:
            s = self.smoothing_rate
            out = (out * (1 - s) + s / self.num_classes).astype(np.float32)
        return out


class Fill(TensorOperation):
    """An array of the input's shape and dtype holding `fill_value` everywhere."""

    def __init__(self, fill_value):
        if not isinstance(fill_value, (numbers.Number, str, bytes, np.generic)):
            raise TypeError(f"Fill: fill_value must be a number or a string, got "
                            f"{type(fill_value).__name__}")
        self.fill_value = fill_value

    def _apply(self, x):
        x = as_numpy(x)
        return np.full(x.shape, self.fill_value, dtype=x.dtype)


class Concatenate(TensorOperation):
    """`prepend` + the input + `append` along `axis` (1-D arrays, as in MindSpore); with
    several inputs, all of them joined."""

    def __init__(self, axis=0, prepend=None, append=None):
        if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
            raise TypeError(f"Concatenate: axis must be an int, got {axis!r}")
        self.axis = int(axis)
        self.prepend = None if prepend is None else as_numpy(prepend)
        self.append = None if append is None else as_numpy(append)

    def _apply(self, *inputs):
        parts = ([self.prepend] if self.prepend is not None else []) + [
            as_numpy(x) for x in inputs] + ([self.append] if self.append is not None else [])
        for p in parts:
            if p.ndim != 1:
                raise RuntimeError(f"Concatenate: expects 1-D arrays, got shape {p.shape}")
        if self.axis not in (0, -1):
            raise RuntimeError(f"Concatenate: axis must be 0 or -1 for 1-D arrays, got "
                               f"{self.axis}")
        return np.concatenate(parts)
