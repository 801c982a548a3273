"""Image layers (MindSpore names and arguments): Upsample, PixelShuffle, PixelUnshuffle, Unfold,
Dropout1d/2d/3d (channel dropout), ChannelShuffle; built on kiln.ops.interpolate /
pixel_shuffle / dropout*d / channel_shuffle and strided views."""
import numbers

from kiln import ops
from kiln.nn.cell import Cell
from kiln.ops.function.spatial import image_patches

__all__ = ["Upsample", "PixelShuffle", "PixelUnshuffle", "Unfold", "Dropout1d", "Dropout2d",
           "Dropout3d", "ChannelShuffle"]


class Upsample(Cell):
    """Resizes (N, C, ...) like ops.interpolate: size or scale_factor; mode 'nearest',
    'linear', 'bilinear', 'trilinear' or 'area'."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size = size
        self.scale_factor = scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def construct(self, x):
        return ops.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                               self.recompute_scale_factor)

    def extend_repr(self):
        return f"size={self.size}, scale_factor={self.scale_factor}, mode={self.mode}"


class PixelShuffle(Cell):
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r)."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def construct(self, x):
        return ops.pixel_shuffle(x, self.upscale_factor)


class PixelUnshuffle(Cell):
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W)."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def construct(self, x):
        return ops.pixel_unshuffle(x, self.downscale_factor)


def _four(value, who, name):
    """MindSpore's [1, a, b, 1] form of ksizes/strides/rates -> (a, b)."""
    if not isinstance(value, (tuple, list)) or len(value) != 4 or value[0] != 1 or \
            value[3] != 1 or any(isinstance(v, bool) or not isinstance(v, numbers.Integral)
                                 or v < 1 for v in value):
        raise ValueError(f"{who}: {name} must be a tuple [1, a, b, 1] of positive ints, got "
                         f"{value!r}")
    return int(value[1]), int(value[2])


class Unfold(Cell):
    """Extracts kh x kw patches of (N, C, H, W) as MindSpore's Unfold (TensorFlow's
    extract_image_patches): output (N, kh * kw * C, out_rows, out_cols), where output channel
    (i * kw + j) * C + c holds kernel position (i, j) of input channel c. ksizes, strides and
    rates are [1, a, b, 1]; padding is 'valid' or 'same'."""

    def __init__(self, ksizes, strides, rates, padding="valid"):
        super().__init__()
        self.ksizes = _four(ksizes, "Unfold", "ksizes")
        self.strides = _four(strides, "Unfold", "strides")
        self.rates = _four(rates, "Unfold", "rates")
        if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
            raise ValueError(f"Unfold: padding must be 'valid' or 'same', got {padding!r}")
        self.padding = padding.lower()

    def _pads(self, h, w):
        if self.padding == "valid":
            return (0, 0, 0, 0)
        pads = []
        for size, k, s, r in zip((h, w), self.ksizes, self.strides, self.rates):
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * r + 1 - size, 0)
            pads += [total // 2, total - total // 2]
        return tuple(pads)

    def construct(self, x):
        if len(x.shape) != 4:
            raise ValueError(f"Unfold: expected an (N, C, H, W) input, got shape "
                             f"{tuple(x.shape)}")
        n, c, h, w = x.shape
        views, oh, ow = image_patches(x, self.ksizes, self.strides, self.rates,
                                      self._pads(h, w))
        return ops.reshape(ops.stack(views, 1), (n, len(views) * c, oh, ow))


class _ChannelDropout(Cell):
    """Zeroes whole channels with probability p in training (scaling the rest by 1 / (1 - p));
    the identity in evaluation."""

    _OP = staticmethod(ops.dropout2d)

    def __init__(self, p=0.5):
        super().__init__()
        who = type(self).__name__
        if isinstance(p, bool) or not isinstance(p, numbers.Real):
            raise TypeError(f"{who}: p must be a float, got {p!r}")
        if not 0 <= p <= 1:
            raise ValueError(f"{who}: p must be a float in [0, 1], got {p!r}")
        self.p = float(p)

    def construct(self, x):
        if not self.training or self.p == 0:
            return x
        return self._OP(x, self.p, True)

    def extend_repr(self):
        return f"p={self.p}"


class Dropout1d(_ChannelDropout):
    """Channel dropout of (N, C, L) or (C, L)."""
    _OP = staticmethod(ops.dropout1d)


class Dropout2d(_ChannelDropout):
    """Channel dropout of (N, C, H, W)."""
    _OP = staticmethod(ops.dropout2d)


class Dropout3d(_ChannelDropout):
    """Channel dropout of (N, C, D, H, W)."""
    _OP = staticmethod(ops.dropout3d)


class ChannelShuffle(Cell):
    """Regroups the channels of (N, C, ...): (groups, C / groups) -> (C / groups, groups)."""

    def __init__(self, groups):
        super().__init__()
        if isinstance(groups, bool) or not isinstance(groups, int):
            raise TypeError(f"ChannelShuffle: groups must be an int, got {type(groups).__name__}")
        if groups < 1:
            raise ValueError(f"ChannelShuffle: groups must be > 0, got {groups}")
        self.groups = groups

    def construct(self, x):
        return ops.channel_shuffle(x, self.groups)
