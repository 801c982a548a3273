"""Conv3d and Conv3dTranspose (MindSpore's arguments and weight layouts, pad_mode "same" by
default) composed of 2-D convolutions: the depth taps are kd conv2d (or conv2d_backward_input)
calls over depth slices folded into the batch, summed; gradients follow from their rules."""
import math

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.initializer import HeUniform, Uniform, initializer
from kiln.common.parameter import Parameter
from kiln.nn import _functional as F
from kiln.nn.cell import Cell
from kiln.nn.layer.basic import check_bool, check_int
from kiln.ops import _core
from kiln.ops._core import shape_attr
from kiln.ops.function.spatial import pad_constant_axis

__all__ = ["Conv3d", "Conv3dTranspose"]

_PAD_MODES = ("same", "valid", "pad")


def _triple(value, who, name, minimum):
    items = shape_attr(value, who, name)
    if len(items) == 1:
        items = items * 3
    if len(items) != 3:
        raise ValueError(f"{who}: {name} must be an int or a tuple of 3 ints, got {value!r}")
    if min(items) < minimum:
        raise ValueError(f"{who}: {name} must be >= {minimum}, got {value!r}")
    return items


def _same(size, kernel, stride, dilation):
    return F.same_padding(size, kernel, stride, dilation)


def conv3d_taps(x, weight, stride, pads, dilation, group):
    """(N, C_in, D, H, W) convolved with weight, pads = (head, tail, top, bottom, left, right):
    kd conv2d calls over the depth taps (depth slices folded into the batch), summed."""
    shape = tuple(x.shape)
    n = shape[0]
    x = pad_constant_axis(x, 2, pads[0], pads[1], 0)
    depth, (kd, sd, dd) = x.shape[2], (weight.shape[2], stride[0], dilation[0])
    out_d = (depth - dd * (kd - 1) - 1) // sd + 1
    if out_d < 1:
        raise ValueError(f"Conv3d: the kernel depth {kd} (dilation {dd}) does not fit the "
                         f"padded input depth {depth}")
    total = None
    for k in range(kd):
        start = k * dd
        taps = F.slice_nd(x, (0, 0, start, 0, 0),
                          (n, shape[1], start + (out_d - 1) * sd + 1) + tuple(x.shape[3:]),
                          (1, 1, sd, 1, 1))
        folded = F.reshape(F.transpose(taps, (0, 2, 1, 3, 4)),
                           (n * out_d, shape[1]) + tuple(x.shape[3:]))
        w_k = F.reshape(F.slice_nd(weight, (0, 0, k, 0, 0),
                                   weight.shape[:2] + (k + 1,) + weight.shape[3:],
                                   (1,) * 5), weight.shape[:2] + weight.shape[3:])
        y = F.conv2d(folded, w_k, None, tuple(stride[1:]), tuple(pads[2:]), tuple(dilation[1:]),
                     group)
        total = y if total is None else total + y
    return F.transpose(F.reshape(total, (n, out_d) + tuple(total.shape[1:])), (0, 2, 1, 3, 4))


class Conv3d(Cell):
    """3-D convolution of (N, C_in, D, H, W). pad_mode 'same' (output ceil(size / stride),
    the odd pixel after), 'valid', or 'pad' with padding an int or (head, tail, top, bottom,
    left, right)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same",
                 padding=0, dilation=1, group=1, has_bias=False, weight_init=None,
                 bias_init=None, data_format="NCDHW", dtype=mstype.float32):
        super().__init__()
        who = "Conv3d"
        self.in_channels = check_int(in_channels, who, "in_channels")
        self.out_channels = check_int(out_channels, who, "out_channels")
        self.group = check_int(group, who, "group")
        if self.in_channels % self.group or self.out_channels % self.group:
            raise ValueError(f"{who}: in_channels and out_channels must be divisible by group")
        self.kernel_size = _triple(kernel_size, who, "kernel_size", 1)
        self.stride = _triple(stride, who, "stride", 1)
        self.dilation = _triple(dilation, who, "dilation", 1)
        if not isinstance(pad_mode, str) or pad_mode.lower() not in _PAD_MODES:
            raise ValueError(f"{who}: pad_mode must be one of {_PAD_MODES}, got {pad_mode!r}")
        self.pad_mode = pad_mode.lower()
        pads = shape_attr(padding, who, "padding")
        pads = pads * 6 if len(pads) == 1 else pads
        if len(pads) != 6 or min(pads) < 0:
            raise ValueError(f"{who}: padding must be a non-negative int or a tuple of 6 ints, "
                             f"got {padding!r}")
        if self.pad_mode != "pad" and any(pads):
            raise ValueError(f"{who}: padding must be 0 unless pad_mode is 'pad', got "
                             f"{padding!r}")
        self.padding = pads
        if data_format != "NCDHW":
            raise ValueError(f"{who}: only data_format='NCDHW' is supported, got "
                             f"{data_format!r}")
        self.data_format = data_format
        self.has_bias = check_bool(has_bias, who, "has_bias")
        shape = (self.out_channels, self.in_channels // self.group) + self.kernel_size
        self.weight = Parameter(initializer(HeUniform(math.sqrt(5)) if weight_init is None
                                            else weight_init, shape, dtype), name="weight")
        self.bias = None
        if self.has_bias:
            fan_in = shape[1] * shape[2] * shape[3] * shape[4]
            self.bias = Parameter(initializer(Uniform(1 / math.sqrt(fan_in)) if bias_init is None
                                              else bias_init, (self.out_channels,), dtype),
                                  name="bias")

    def _pads(self, sizes):
        if self.pad_mode == "pad":
            return self.padding
        if self.pad_mode == "valid":
            return (0,) * 6
        out = ()
        for size, k, s, d in zip(sizes, self.kernel_size, self.stride, self.dilation):
            out += _same(size, k, s, d)
        return out

    def construct(self, x):
        shape = tuple(x.shape)
        if len(shape) != 5 or shape[1] != self.in_channels:
            raise ValueError(f"Conv3d: expected an (N, {self.in_channels}, D, H, W) input, got "
                             f"shape {shape}")
        pads = self._pads(shape[2:])
        out = conv3d_taps(x, ops.cast(self.weight, x.dtype), self.stride, pads, self.dilation,
                          self.group)
        if self.has_bias:
            out = out + F.reshape(ops.cast(self.bias, out.dtype), (1, self.out_channels, 1, 1, 1))
        return out

    def extend_repr(self):
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"pad_mode={self.pad_mode}, padding={self.padding}, dilation={self.dilation}, "
                f"group={self.group}, has_bias={self.has_bias}")


def _full_length(size, kernel, stride, dilation):
    return (size - 1) * stride + dilation * (kernel - 1) + 1


def _fit(x, axis, start, length):
    """x's slice [start, start + length) along axis, zeros past its end."""
    size = x.shape[axis]
    stop = min(start + length, size)
    begin = [0] * len(x.shape)
    end = list(x.shape)
    begin[axis], end[axis] = start, stop
    x = F.slice_nd(x, tuple(begin), tuple(end), (1,) * len(x.shape))
    return pad_constant_axis(x, axis, 0, length - (stop - start), 0)


class Conv3dTranspose(Cell):
    """Transposed 3-D convolution of (N, C_in, D, H, W) with a (C_in, C_out / group, kd, kh, kw)
    weight. Output sizes as MindSpore's: D * stride ('same'), D * stride + max(k' - stride,
    0) ('valid', k' the dilated kernel), (D - 1) * stride + k' - (head + tail) +
    output_padding ('pad'). Built from the registry's conv2d_backward_input over depth taps,
    each placed at its strided depth offsets."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same",
                 padding=0, dilation=1, group=1, output_padding=0, has_bias=False,
                 weight_init=None, bias_init=None, data_format="NCDHW", dtype=mstype.float32):
        super().__init__()
        who = "Conv3dTranspose"
        self.in_channels = check_int(in_channels, who, "in_channels")
        self.out_channels = check_int(out_channels, who, "out_channels")
        self.group = check_int(group, who, "group")
        if self.in_channels % self.group or self.out_channels % self.group:
            raise ValueError(f"{who}: in_channels and out_channels must be divisible by group")
        self.kernel_size = _triple(kernel_size, who, "kernel_size", 1)
        self.stride = _triple(stride, who, "stride", 1)
        self.dilation = _triple(dilation, who, "dilation", 1)
        self.output_padding = _triple(output_padding, who, "output_padding", 0)
        if not isinstance(pad_mode, str) or pad_mode.lower() not in _PAD_MODES:
            raise ValueError(f"{who}: pad_mode must be one of {_PAD_MODES}, got {pad_mode!r}")
        self.pad_mode = pad_mode.lower()
        pads = shape_attr(padding, who, "padding")
        pads = pads * 6 if len(pads) == 1 else pads
        if len(pads) != 6 or min(pads) < 0 or (self.pad_mode != "pad" and any(pads)):
            raise ValueError(f"{who}: padding must be 0 (or, with pad_mode 'pad', a "
                             f"non-negative int or 6 ints), got {padding!r}")
        if any(self.output_padding) and self.pad_mode != "pad":
            raise ValueError(f"{who}: a nonzero output_padding needs pad_mode='pad'")
        self.padding = pads
        if data_format != "NCDHW":
            raise ValueError(f"{who}: only data_format='NCDHW' is supported")
        self.has_bias = check_bool(has_bias, who, "has_bias")
        shape = (self.in_channels, self.out_channels // self.group) + self.kernel_size
        self.weight = Parameter(initializer(HeUniform(math.sqrt(5)) if weight_init is None
                                            else weight_init, shape, dtype), name="weight")
        self.bias = None
        if self.has_bias:
            fan_in = shape[1] * shape[2] * shape[3] * shape[4]
            self.bias = Parameter(initializer(Uniform(1 / math.sqrt(fan_in)) if bias_init is None
                                              else bias_init, (self.out_channels,), dtype),
                                  name="bias")

    def _crop(self, size, axis):
        """(start, length) of the output within the full transposed result along axis."""
        k, s, d = self.kernel_size[axis], self.stride[axis], self.dilation[axis]
        full = _full_length(size, k, s, d)
        if self.pad_mode == "valid":
            return 0, size * s + max(d * (k - 1) + 1 - s, 0)
        if self.pad_mode == "same":
            return max(full - size * s, 0) // 2, size * s
        head, tail = self.padding[2 * axis], self.padding[2 * axis + 1]
        return head, full - head - tail + self.output_padding[axis]

    def construct(self, x):
        shape = tuple(x.shape)
        if len(shape) != 5 or shape[1] != self.in_channels:
            raise ValueError(f"Conv3dTranspose: expected an (N, {self.in_channels}, D, H, W) "
                             f"input, got shape {shape}")
        n, _, depth, h, w = shape
        (kd, kh, kw), (sd, sh, sw), (dd, dh, dw) = self.kernel_size, self.stride, self.dilation
        full = (_full_length(depth, kd, sd, dd), _full_length(h, kh, sh, dh),
                _full_length(w, kw, sw, dw))
        folded = F.reshape(F.transpose(x, (0, 2, 1, 3, 4)), (n * depth, shape[1], h, w))
        weight = ops.cast(self.weight, x.dtype)
        total = None
        for a in range(kd):
            w_a = F.reshape(F.slice_nd(weight, (0, 0, a, 0, 0),
                                       weight.shape[:2] + (a + 1,) + weight.shape[3:],
                                       (1,) * 5), weight.shape[:2] + weight.shape[3:])
            attrs = ((n * depth, self.out_channels) + full[1:], (sh, sw), (0, 0, 0, 0),
                     (dh, dw), self.group)
            y = _core.call("conv2d_backward_input", (folded, w_a), attrs)
            y = F.reshape(y, (n, depth, 1, self.out_channels) + full[1:])
            if sd > 1:  # depth d lands at d * sd: interleave sd - 1 zero planes
                y = ops.concat([y, ops.zeros(tuple(y.shape[:2]) + (sd - 1,) + tuple(y.shape[3:]),
                                             y.dtype)], 2)
            y = F.reshape(y, (n, depth * sd, self.out_channels) + full[1:])
            y = _fit(y, 1, 0, (depth - 1) * sd + 1)
            y = pad_constant_axis(y, 1, a * dd, full[0] - a * dd - ((depth - 1) * sd + 1), 0)
            total = y if total is None else total + y
        out = F.transpose(total, (0, 2, 1, 3, 4))
        for axis, size in enumerate((depth, h, w)):
            start, length = self._crop(size, axis)
            out = _fit(out, 2 + axis, start, length)
        if self.has_bias:
            out = out + F.reshape(ops.cast(self.bias, out.dtype), (1, self.out_channels, 1, 1, 1))
        return out
