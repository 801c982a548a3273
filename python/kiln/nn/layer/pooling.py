"""Pooling layers: MaxPool2d/AvgPool2d (MindSpore defaults: kernel_size=1, stride=1,
pad_mode="valid"), their 1-D forms over a height-1 plane, and adaptive pooling."""
import numbers

from kiln import ops
from kiln.nn import _functional as F
from kiln.nn.cell import Cell
from kiln.nn.layer.basic import check_bool
from kiln.nn.layer.conv import resolve_padding, spatial_pads

__all__ = ["MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
           "LPPool1d", "LPPool2d"]


class _Pool2d(Cell):
    def __init__(self, who, kernel_size, stride, pad_mode, padding, ceil_mode, data_format):
        super().__init__()
        self.kernel_size = F.pair(kernel_size, who, "kernel_size")
        self.stride = F.pair(stride, who, "stride")
        if min(self.kernel_size) < 1 or min(self.stride) < 1:
            raise ValueError(f"{who}: kernel_size and stride must be positive, got "
                             f"{self.kernel_size} and {self.stride}")
        self.pad_mode, self.padding = resolve_padding(who, pad_mode, padding)
        self.ceil_mode = check_bool(ceil_mode, who, "ceil_mode")
        if data_format != "NCHW":
            raise ValueError(f"{who}: only data_format='NCHW' is supported, got {data_format!r}")

    def _prepare(self, x, who, dilation=(1, 1)):
        """A 4-D input (a 3-D (C, H, W) one gets a batch axis) and its (t, b, l, r) padding."""
        shape = tuple(x.shape)
        if len(shape) not in (3, 4):
            raise ValueError(f"{who}: expected an (N, C, H, W) or (C, H, W) input, got shape "
                             f"{shape}")
        if len(shape) == 3:
            x = ops.expand_dims(x, 0)
        pads = spatial_pads(self.pad_mode, self.padding, tuple(x.shape[2:]), self.kernel_size,
                            self.stride, dilation)
        return x, pads, len(shape) == 3

    def extend_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"pad_mode={self.pad_mode.upper()}")


class MaxPool2d(_Pool2d):
    """Maximum over kernel_size windows; padding (modes "same"/"pad") never wins the max."""

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, dilation=1,
                 return_indices=False, ceil_mode=False, data_format="NCHW"):
        super().__init__("MaxPool2d", kernel_size, stride, pad_mode, padding, ceil_mode,
                         data_format)
        self.dilation = F.pair(dilation, "MaxPool2d", "dilation")
        self.return_indices = check_bool(return_indices, "MaxPool2d", "return_indices")

    def construct(self, x):
        return self._max_pool2d(x)

    def _max_pool2d(self, x):
        x, pads, squeeze = self._prepare(x, "MaxPool2d", self.dilation)
        out = F.max_pool2d(x, self.kernel_size, self.stride, pads, self.dilation, self.ceil_mode,
                           self.return_indices)
        if not self.return_indices:
            return ops.squeeze(out, 0) if squeeze else out
        y, indices = out
        return (ops.squeeze(y, 0), ops.squeeze(indices, 0)) if squeeze else (y, indices)


class AvgPool2d(_Pool2d):
    """Mean over kernel_size windows. With pad_mode="same" padding is not counted; with "pad",
    count_include_pad decides (default True); divisor_override replaces the divisor."""

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None, data_format="NCHW"):
        super().__init__("AvgPool2d", kernel_size, stride, pad_mode, padding, ceil_mode,
                         data_format)
        self.count_include_pad = check_bool(count_include_pad, "AvgPool2d", "count_include_pad")
        if divisor_override is not None and (isinstance(divisor_override, bool) or not
                                             isinstance(divisor_override, int) or
                                             divisor_override <= 0):
            raise ValueError(f"AvgPool2d: divisor_override must be a positive int or None, got "
                             f"{divisor_override!r}")
        self.divisor_override = divisor_override

    def construct(self, x):
        return self._avg_pool2d(x)

    def _avg_pool2d(self, x):
        x, pads, squeeze = self._prepare(x, "AvgPool2d")
        y = F.avg_pool2d(x, self.kernel_size, self.stride, pads, self.ceil_mode,
                         self.count_include_pad, self.divisor_override,
                         exclude_asymmetric_pad=self.pad_mode == "same")
        return ops.squeeze(y, 0) if squeeze else y


def _one_d(value, who, name):
    """A 1-D size (an int, or a 1-tuple) as the (1, n) pair of the height-1 2-D pooling."""
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{who}: {name} must be an int, got {value!r}")
    return (1, int(value))


def _one_d_padding(padding, who):
    if isinstance(padding, (tuple, list)) and len(padding) == 2:
        left, right = padding
    else:
        left = right = _one_d(padding, who, "padding")[1]
    return (0, 0, left, right)


def _as_plane(x, who):
    """(N, C, L) -> (N, C, 1, L) and (C, L) -> (C, 1, L)."""
    if len(x.shape) not in (2, 3):
        raise ValueError(f"{who}: expected an (N, C, L) or (C, L) input, got shape "
                         f"{tuple(x.shape)}")
    return ops.expand_dims(x, -2)


class MaxPool1d(MaxPool2d):
    """Maximum over kernel_size windows of (N, C, L) / (C, L); indices (return_indices) are
    positions along L."""

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, dilation=1,
                 return_indices=False, ceil_mode=False):
        who = "MaxPool1d"
        super().__init__(_one_d(kernel_size, who, "kernel_size"), _one_d(stride, who, "stride"),
                         pad_mode, _one_d_padding(padding, who), _one_d(dilation, who,
                                                                         "dilation"),
                         return_indices, ceil_mode)

    def construct(self, x):
        out = self._max_pool2d(_as_plane(x, "MaxPool1d"))
        if self.return_indices:
            return ops.squeeze(out[0], -2), ops.squeeze(out[1], -2)
        return ops.squeeze(out, -2)


class AvgPool1d(AvgPool2d):
    """Mean over kernel_size windows of (N, C, L) / (C, L)."""

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, ceil_mode=False,
                 count_include_pad=True):
        who = "AvgPool1d"
        super().__init__(_one_d(kernel_size, who, "kernel_size"), _one_d(stride, who, "stride"),
                         pad_mode, _one_d_padding(padding, who), ceil_mode, count_include_pad)

    def construct(self, x):
        return ops.squeeze(self._avg_pool2d(_as_plane(x, "AvgPool1d")), -2)


class AdaptiveAvgPool1d(Cell):
    """Averages (N, C, L) over output_size windows (PyTorch's adaptive bounds)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = _one_d(output_size, "AdaptiveAvgPool1d", "output_size")[1]

    def construct(self, x):
        return ops.adaptive_avg_pool1d(x, self.output_size)


class AdaptiveMaxPool1d(Cell):
    """Maximum of (N, C, L) over output_size equal windows; as in MindSpore, output_size must
    divide L."""

    def __init__(self, output_size):
        super().__init__()
        if isinstance(output_size, bool) or not isinstance(output_size, int):
            raise TypeError(f"AdaptiveMaxPool1d: output_size must be an int, got "
                            f"{output_size!r}")
        if output_size < 1:
            raise ValueError(f"AdaptiveMaxPool1d: output_size must be >= 1, got {output_size}")
        self.output_size = output_size

    def construct(self, x):
        if len(x.shape) != 3:
            raise ValueError(f"AdaptiveMaxPool1d: expected an (N, C, L) input, got shape "
                             f"{tuple(x.shape)}")
        width = x.shape[-1]
        if width % self.output_size:
            raise ValueError(f"AdaptiveMaxPool1d: the input's last dimension must be divisible "
                             f"by output_size={self.output_size}, got {width}")
        window = width // self.output_size
        y = ops.max_pool2d(ops.expand_dims(x, 2), (1, window), (1, window))
        return ops.squeeze(y, 2)


class AdaptiveAvgPool2d(Cell):
    """Averages (N, C, H, W) over output_size windows of any size (None keeps that size)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def construct(self, x):
        return ops.adaptive_avg_pool2d(x, self.output_size)


class AdaptiveAvgPool3d(Cell):
    """Averages (N, C, D, H, W) over output_size windows of any size (None keeps that size)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def construct(self, x):
        return ops.adaptive_avg_pool3d(x, self.output_size)


class AdaptiveMaxPool2d(Cell):
    """Maximum of (N, C, H, W) over output_size windows (None keeps that size)."""

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = check_bool(return_indices, "AdaptiveMaxPool2d", "return_indices")

    def construct(self, x):
        return ops.adaptive_max_pool2d(x, self.output_size, self.return_indices)


class LPPool1d(Cell):
    """Power-average pooling: (sum over each window of x^p) ^ (1 / p) for (N, C, L) or (C, L)."""

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride = norm_type, kernel_size, stride
        self.ceil_mode = ceil_mode

    def construct(self, x):
        return ops.lp_pool1d(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(LPPool1d):
    """Power-average pooling of (N, C, H, W): (sum over each window of x^p) ^ (1 / p)."""

    def construct(self, x):
        return ops.lp_pool2d(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)
