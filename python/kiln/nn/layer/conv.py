"""Conv2d and Conv1d with MindSpore's defaults: pad_mode="same", has_bias=False, NCHW,
(out, in/g, kh, kw) weights."""
import math

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.initializer import HeUniform, Uniform, initializer
from kiln.common.parameter import Parameter
from kiln.common.tensor import Tensor
from kiln.nn import _functional as F
from kiln.nn.cell import Cell
from kiln.nn.layer.basic import check_bool, check_int
from kiln.ops._core import pair_attr, shape_attr

__all__ = ["Conv2d", "Conv1d", "resolve_padding"]

_PAD_MODES = ("same", "valid", "pad")


def resolve_padding(who, pad_mode, padding):
    """Checks pad_mode/padding; returns explicit (top, bottom, left, right) for pad_mode 'pad'."""
    if not isinstance(pad_mode, str) or pad_mode.lower() not in _PAD_MODES:
        raise ValueError(f"{who}: pad_mode must be one of {_PAD_MODES}, got {pad_mode!r}")
    pad_mode = pad_mode.lower()
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        pads = shape_attr(padding, who, "padding")
    elif isinstance(padding, (tuple, list)) and len(padding) != 2:
        raise ValueError(f"{who}: padding must be an int or a tuple of 2 or 4 ints, got "
                         f"{len(padding)} values {padding!r}")
    else:
        h, w = pair_attr(padding, who, "padding")
        pads = (h, h, w, w)
    if any(p < 0 for p in pads):
        raise ValueError(f"{who}: padding must be non-negative, got {padding!r}")
    if pad_mode != "pad" and any(pads):
        raise ValueError(f"{who}: padding must be 0 when pad_mode is '{pad_mode}' (use "
                         f"pad_mode='pad' for explicit padding), got {padding!r}")
    return pad_mode, pads


def spatial_pads(pad_mode, pads, size, kernel, stride, dilation):
    """(top, bottom, left, right) for an input of spatial size (H, W)."""
    if pad_mode == "same":
        return (F.same_padding(size[0], kernel[0], stride[0], dilation[0])
                + F.same_padding(size[1], kernel[1], stride[1], dilation[1]))
    if pad_mode == "valid":
        return (0, 0, 0, 0)
    return pads


class Conv2d(Cell):
    """2-D convolution over an (N, C_in, H, W) input.

    pad_mode: "same" (output size ceil(H / stride), MindSpore's default), "valid" (no padding)
    or "pad" (explicit `padding`: an int or (top, bottom, left, right)).
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same",
                 padding=0, dilation=1, group=1, has_bias=False, weight_init=None,
                 bias_init=None, data_format="NCHW", dtype=mstype.float32):
        super().__init__()
        self.in_channels = check_int(in_channels, "Conv2d", "in_channels")
        self.out_channels = check_int(out_channels, "Conv2d", "out_channels")
        self.kernel_size = F.pair(kernel_size, "Conv2d", "kernel_size")
        self.stride = F.pair(stride, "Conv2d", "stride")
        self.dilation = F.pair(dilation, "Conv2d", "dilation")
        for name, value in (("kernel_size", self.kernel_size), ("stride", self.stride),
                            ("dilation", self.dilation)):
            if min(value) < 1:
                raise ValueError(f"Conv2d: {name} must be positive, got {value}")
        self.group = check_int(group, "Conv2d", "group")
        if self.in_channels % self.group or self.out_channels % self.group:
            raise ValueError(f"Conv2d: in_channels ({self.in_channels}) and out_channels "
                             f"({self.out_channels}) must be divisible by group ({self.group})")
        self.pad_mode, self.padding = resolve_padding("Conv2d", pad_mode, padding)
        if data_format != "NCHW":
            raise ValueError(f"Conv2d: only data_format='NCHW' is supported, got {data_format!r}")
        self.data_format = data_format
        self.has_bias = check_bool(has_bias, "Conv2d", "has_bias")
        shape = (self.out_channels, self.in_channels // self.group) + self.kernel_size
        if weight_init is None:
            weight_init = HeUniform(math.sqrt(5))
        self.weight = Parameter(initializer(weight_init, shape, dtype), name="weight")
        self.bias = None
        if self.has_bias:
            if bias_init is None:
                fan_in = shape[1] * shape[2] * shape[3]
                bias_init = Uniform(1 / math.sqrt(fan_in))
            self.bias = Parameter(initializer(bias_init, (self.out_channels,), dtype),
                                  name="bias")

    def construct(self, x):
        return self._conv2d(x)

    def _conv2d(self, x):
        # A method of its own so that Conv1d calls it without super() (compiled code reads
        # construct's source, where zero-argument super() has no class cell).
        shape = tuple(x.shape)
        if len(shape) != 4 or shape[1] != self.in_channels:
            raise ValueError(f"{type(self).__name__}: expected an (N, {self.in_channels}, H, W) "
                             f"input, got shape {shape}")
        pads = spatial_pads(self.pad_mode, self.padding, shape[2:], self.kernel_size,
                            self.stride, self.dilation)
        return F.conv2d(x, self.weight, self.bias, self.stride, pads, self.dilation, self.group)

    def extend_repr(self):
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"pad_mode={self.pad_mode}, padding={self.padding}, dilation={self.dilation}, "
                f"group={self.group}, has_bias={self.has_bias}")


def _int_arg(value, who, name, minimum):
    """MindSpore's 1-D conv arguments are plain ints (a tuple is a TypeError)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{who}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{who}: {name} must be >= {minimum}, got {value}")
    return value


def _weight_3d_as_4d(weight_init, who):
    """A 3-D (C_out, C_in / group, k) weight Tensor as the (C_out, C_in / group, 1, k) one the
    layer keeps (MindSpore stores Conv1d weights 4-D)."""
    if isinstance(weight_init, Tensor):
        if len(weight_init.shape) != 3:
            raise ValueError(f"{who}: a weight_init Tensor must be 3-D, got shape "
                             f"{tuple(weight_init.shape)}")
        return ops.expand_dims(weight_init, 2)
    return weight_init


class Conv1d(Conv2d):
    """1-D convolution over (N, C_in, L): a Conv2d over a height-1 plane, with MindSpore's
    (C_out, C_in / group, 1, kernel_size) weight and pad_mode="same" default."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same",
                 padding=0, dilation=1, group=1, has_bias=False, weight_init=None,
                 bias_init=None, dtype=mstype.float32):
        who = "Conv1d"
        k = _int_arg(kernel_size, who, "kernel_size", 1)
        s = _int_arg(stride, who, "stride", 1)
        p = _int_arg(padding, who, "padding", 0)
        d = _int_arg(dilation, who, "dilation", 1)
        super().__init__(in_channels, out_channels, (1, k), (1, s), pad_mode, (0, 0, p, p),
                         (1, d), group, has_bias, _weight_3d_as_4d(weight_init, who), bias_init,
                         dtype=dtype)

    def construct(self, x):
        if len(x.shape) != 3:
            raise ValueError(f"Conv1d: expected an (N, C, L) input, got shape {tuple(x.shape)}")
        return ops.squeeze(self._conv2d(ops.expand_dims(x, 2)), 2)
