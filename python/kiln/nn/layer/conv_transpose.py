"""Conv2dTranspose and Conv1dTranspose (MindSpore's arguments, (C_in, C_out / group, kh, kw)
weights and output sizes): the adjoint of conv2d, i.e. the registry's conv2d_backward_input op,
whose gradient rules (conv2d and conv2d_backward_weight) make the layer differentiable."""
import math

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.initializer import HeUniform, Uniform, initializer
from kiln.common.parameter import Parameter
from kiln.nn import _functional as F
from kiln.nn.cell import Cell
from kiln.nn.layer.basic import check_bool, check_int
from kiln.nn.layer.conv import _int_arg, _weight_3d_as_4d, resolve_padding
from kiln.ops import _core
from kiln.ops.function.array import size_when_run

__all__ = ["Conv2dTranspose", "Conv1dTranspose"]


def _output_length(pad_mode, size, kernel, stride, dilation, pads):
    """MindSpore's deconvolution output length for one spatial axis."""
    span = kernel + (kernel - 1) * (dilation - 1)
    if pad_mode == "valid":
        return size * stride + max(span - stride, 0)
    if pad_mode == "same":
        return size * stride
    return size * stride - pads + span - stride


class Conv2dTranspose(Cell):
    """Transposed 2-D convolution of (N, C_in, H, W) to (N, C_out, H_out, W_out):
    H_out = H * stride ('same'), H * stride + max(k' - stride, 0) ('valid', k' the dilated
    kernel), H * stride - (top + bottom) + k' - stride ('pad'); output_padding (pad mode
    only) appends zeros after the bias, as MindSpore does."""

    _WHO = "Conv2dTranspose"

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same",
                 padding=0, output_padding=0, dilation=1, group=1, has_bias=False,
                 weight_init=None, bias_init=None, dtype=mstype.float32):
        super().__init__()
        who = self._WHO
        self.in_channels = check_int(in_channels, who, "in_channels")
        self.out_channels = check_int(out_channels, who, "out_channels")
        self.kernel_size = F.pair(kernel_size, who, "kernel_size")
        self.stride = F.pair(stride, who, "stride")
        self.dilation = F.pair(dilation, who, "dilation")
        if min(self.kernel_size + self.stride + self.dilation) < 1:
            raise ValueError(f"{who}: kernel_size, stride and dilation must be positive")
        self.group = check_int(group, who, "group")
        if self.in_channels % self.group or self.out_channels % self.group:
            raise ValueError(f"{who}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by group ({group})")
        self.pad_mode, self.padding = resolve_padding(who, pad_mode, padding)
        self.output_padding = F.pair(output_padding, who, "output_padding")
        for op, s, d in zip(self.output_padding, self.stride, self.dilation):
            if not 0 <= op < max(s, d):
                raise ValueError(f"{who}: output_padding must be in [0, max(stride, dilation)), "
                                 f"got {output_padding}")
        if any(self.output_padding) and self.pad_mode != "pad":
            raise ValueError(f"{who}: a nonzero output_padding needs pad_mode='pad'")
        self.has_bias = check_bool(has_bias, who, "has_bias")
        shape = (self.in_channels, self.out_channels // self.group) + self.kernel_size
        self.weight = Parameter(initializer(HeUniform(math.sqrt(5)) if weight_init is None
                                            else weight_init, shape, dtype), name="weight")
        self.bias = None
        if self.has_bias:
            fan_in = shape[1] * shape[2] * shape[3]
            self.bias = Parameter(initializer(Uniform(1 / math.sqrt(fan_in)) if bias_init is None
                                              else bias_init, (self.out_channels,), dtype),
                                  name="bias")

    def _pads(self, out_size):
        if self.pad_mode == "pad":
            return self.padding
        if self.pad_mode == "valid":
            return (0, 0, 0, 0)
        return (F.same_padding(out_size[0], self.kernel_size[0], self.stride[0],
                               self.dilation[0])
                + F.same_padding(out_size[1], self.kernel_size[1], self.stride[1],
                                 self.dilation[1]))

    def construct(self, x):
        return self._transpose2d(x)

    def _transpose2d(self, x):
        shape = tuple(x.shape)
        if len(shape) != 4 or shape[1] != self.in_channels:
            raise ValueError(f"{self._WHO}: expected an (N, {self.in_channels}, H, W) input, got "
                             f"shape {shape}")
        if min(shape[2:]) < 0:  # the output size is computed from the input's
            _core.require_known_sizes(self._WHO, x)
        p = self.padding
        out = tuple(_output_length(self.pad_mode, size, k, s, d, pads)
                    for size, k, s, d, pads in zip(shape[2:], self.kernel_size, self.stride,
                                                   self.dilation, (p[0] + p[1], p[2] + p[3])))
        if min(out) < 1:
            raise ValueError(f"{self._WHO}: the output size {out} is empty for input {shape}")
        attrs = ((shape[0], self.out_channels) + out, self.stride, self._pads(out),
                 self.dilation, self.group)
        inputs = (x, ops.cast(self.weight, x.dtype))
        if shape[0] < 0:  # a batch of any size: the output's shape as the graph runs
            inputs += (ops.zeros((size_when_run(x, 0), self.out_channels) + out, x.dtype),)
        y = _core.call("conv2d_backward_input", inputs, attrs)
        if self.has_bias:
            y = y + F.reshape(ops.cast(self.bias, y.dtype), (1, self.out_channels, 1, 1))
        if any(self.output_padding):
            y = ops.pad(y, (0, self.output_padding[1], 0, self.output_padding[0]))
        return y

    def extend_repr(self):
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"pad_mode={self.pad_mode}, padding={self.padding}, dilation={self.dilation}, "
                f"group={self.group}, has_bias={self.has_bias}")


class Conv1dTranspose(Conv2dTranspose):
    """Transposed 1-D convolution of (N, C_in, L): Conv2dTranspose over a height-1 plane, with
    MindSpore's (C_in, C_out / group, 1, kernel_size) weight."""

    _WHO = "Conv1dTranspose"

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same",
                 padding=0, dilation=1, group=1, has_bias=False, weight_init=None,
                 bias_init=None, dtype=mstype.float32):
        who = self._WHO
        k = _int_arg(kernel_size, who, "kernel_size", 1)
        s = _int_arg(stride, who, "stride", 1)
        p = _int_arg(padding, who, "padding", 0)
        d = _int_arg(dilation, who, "dilation", 1)
        super().__init__(in_channels, out_channels, (1, k), (1, s), pad_mode, (0, 0, p, p), 0,
                         (1, d), group, has_bias, _weight_3d_as_4d(weight_init, who), bias_init,
                         dtype)

    def construct(self, x):
        if len(x.shape) != 3:
            raise ValueError(f"{self._WHO}: expected an (N, C, L) input, got shape "
                             f"{tuple(x.shape)}")
        return ops.squeeze(self._transpose2d(ops.expand_dims(x, 2)), 2)
