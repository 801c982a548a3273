"""Padding layers (MindSpore names and argument forms): Pad, ZeroPad2d, ConstantPad1d/2d/3d,
ReflectionPad1d/2d/3d, ReplicationPad1d/2d/3d; all built on kiln.ops.pad's per-axis helpers."""
import numbers

from kiln import ops
from kiln.nn.cell import Cell
from kiln.ops._core import shape_attr
from kiln.ops.function.spatial import pad_constant_axis, pad_gather_axis

__all__ = ["Pad", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
           "ReplicationPad2d", "ReplicationPad3d"]

_MODES = {"CONSTANT": "constant", "REFLECT": "reflect", "SYMMETRIC": "symmetric"}


class Pad(Cell):
    """Pads every dimension by paddings[d] = (before, after): mode "CONSTANT" (zeros),
    "REFLECT" (mirror without the edge) or "SYMMETRIC" (mirror with the edge)."""

    def __init__(self, paddings, mode="CONSTANT"):
        super().__init__()
        if not isinstance(paddings, (tuple, list)) or not all(
                isinstance(p, (tuple, list)) and len(p) == 2 for p in paddings):
            raise TypeError(f"Pad: paddings must be a tuple of (before, after) pairs, got "
                            f"{paddings!r}")
        self.paddings = tuple(shape_attr(p, "Pad", "paddings") for p in paddings)
        if any(v < 0 for p in self.paddings for v in p):
            raise ValueError(f"Pad: paddings must be non-negative, got {paddings!r}")
        if not isinstance(mode, str) or mode.upper() not in _MODES:
            raise ValueError(f"Pad: mode must be one of {tuple(_MODES)}, got {mode!r}")
        self.mode = mode.upper()

    def construct(self, x):
        if len(self.paddings) != len(x.shape):
            raise ValueError(f"Pad: paddings has {len(self.paddings)} pairs but the input has "
                             f"{len(x.shape)} dimensions (shape {tuple(x.shape)})")
        mode = _MODES[self.mode]
        for axis, (before, after) in enumerate(self.paddings):
            if not before and not after:
                continue
            if mode == "constant":
                x = pad_constant_axis(x, axis, before, after, 0)
            else:
                x = pad_gather_axis("Pad", x, axis, before, after, mode)
        return x

    def extend_repr(self):
        return f"paddings={self.paddings}, mode={self.mode}"


class _PadNd(Cell):
    """Pads the last N dims: padding is an int (every side) or 2N ints (left, right, top,
    bottom, front, back: from the last dimension backwards, as ops.pad)."""

    _N = 1
    _MODE = "constant"

    def __init__(self, padding, value=None):
        super().__init__()
        who = type(self).__name__
        count = 2 * self._N
        if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
            padding = (int(padding),) * count
        if not isinstance(padding, (tuple, list)) or len(padding) != count:
            raise ValueError(f"{who}: padding must be an int or a tuple of {count} ints, got "
                             f"{padding!r}")
        self.padding = shape_attr(padding, who, "padding")
        if self._MODE != "constant" and min(self.padding) < 0:
            raise ValueError(f"{who}: padding must be non-negative, got {padding!r}")
        if value is not None and (isinstance(value, bool) or
                                  not isinstance(value, numbers.Real)):
            raise TypeError(f"{who}: value must be a number, got {value!r}")
        self.value = value

    def construct(self, x):
        if len(x.shape) < self._N + 1:
            raise ValueError(f"{type(self).__name__}: expected an input with at least "
                             f"{self._N + 1} dimensions, got shape {tuple(x.shape)}")
        value = self.value if self._MODE == "constant" else None
        return ops.pad(x, self.padding, self._MODE, value)

    def extend_repr(self):
        return f"padding={self.padding}"


class ConstantPad1d(_PadNd):
    """Pads the last dimension with `value`."""
    _N = 1

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ConstantPad2d(_PadNd):
    """Pads the last two dimensions with `value`."""
    _N = 2

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ConstantPad3d(_PadNd):
    """Pads the last three dimensions with `value`."""
    _N = 3

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ZeroPad2d(_PadNd):
    """Pads the last two dimensions with zeros: padding (left, right, top, bottom)."""
    _N = 2

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ReflectionPad1d(_PadNd):
    _N = 1
    _MODE = "reflect"


class ReflectionPad2d(_PadNd):
    _N = 2
    _MODE = "reflect"


class ReplicationPad1d(_PadNd):
    _N = 1
    _MODE = "replicate"


class ReplicationPad2d(_PadNd):
    _N = 2
    _MODE = "replicate"


class ReflectionPad3d(_PadNd):
    _N = 3
    _MODE = "reflect"


class ReplicationPad3d(_PadNd):
    _N = 3
    _MODE = "replicate"
