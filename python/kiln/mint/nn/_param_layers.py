"""mint.nn's Cells with Parameters (PyTorch's constructors, parameter names and initial values):
convolutions, batch/group normalization, Embedding and PReLU."""
import math

import numpy as np

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.initializer import HeUniform, Normal, Uniform, initializer
from kiln.common.parameter import Parameter
from kiln.common.tensor import Tensor
from kiln.mint.nn import _conv_pool as C
from kiln.nn.cell import Cell
from kiln.ops._core import is_tensor

_PAD_MODES = ("zeros", "reflect", "replicate", "circular")
_TORCH_PAD = {"reflect": "reflect", "replicate": "replicate", "circular": "circular"}


class _ConvNd(Cell):
    _DIMS = 2
    _FN = staticmethod(C.conv2d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", dtype=None, transposed=False,
                 output_padding=0):
        super().__init__()
        who, n = type(self).__name__, self._DIMS
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{who}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in _PAD_MODES:
            raise ValueError(f"{who}: padding_mode must be one of {_PAD_MODES}, got "
                             f"{padding_mode!r}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = C._tuple(kernel_size, n, who, "kernel_size", 1)
        self.stride = C._tuple(stride, n, who, "stride", 1)
        self.dilation = C._tuple(dilation, n, who, "dilation", 1)
        self.padding = padding if isinstance(padding, str) else C._tuple(padding, n, who,
                                                                         "padding")
        self.output_padding = C._tuple(output_padding, n, who, "output_padding")
        self.padding_mode = padding_mode
        dtype = dtype or mstype.float32
        shape = ((in_channels, out_channels // groups) if transposed else
                 (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = Parameter(initializer(HeUniform(math.sqrt(5)), shape, dtype),
                                name="weight")
        self.bias = None
        if bias:
            fan_in = shape[1] * math.prod(self.kernel_size)
            self.bias = Parameter(initializer(Uniform(1 / math.sqrt(fan_in)), (out_channels,),
                                              dtype), name="bias")

    def construct(self, input):  # noqa: A002
        if self.padding_mode == "zeros":
            return self._FN(input, self.weight, self.bias, self.stride, self.padding,
                            self.dilation, self.groups)
        pads = C._conv_pads(type(self).__name__, self.padding, self.kernel_size, self.stride,
                            self.dilation)
        flat = tuple(v for pair in reversed(pads) for v in pair)
        x = ops.pad(input, flat, _TORCH_PAD[self.padding_mode])
        return self._FN(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


class Conv1d(_ConvNd):
    _DIMS = 1
    _FN = staticmethod(C.conv1d)


class Conv2d(_ConvNd):
    pass


class Conv3d(_ConvNd):
    _DIMS = 3
    _FN = staticmethod(C.conv3d)


class ConvTranspose2d(_ConvNd):
    """Transposed 2-D convolution; the weight is (in_channels, out_channels / groups, kh, kw)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f"ConvTranspose2d: only padding_mode 'zeros' is supported, got "
                             f"{padding_mode!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, dtype, True, output_padding)

    def construct(self, input, output_size=None):  # noqa: A002
        extra = self.output_padding
        if output_size is not None:
            size = tuple(output_size)[-2:]
            x = input.shape[-2:]
            base = tuple((n - 1) * s - 2 * p + d * (k - 1) + 1 for n, s, p, d, k in
                         zip(x, self.stride, self.padding, self.dilation, self.kernel_size))
            extra = tuple(o - b for o, b in zip(size, base))
        return C.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  extra, self.groups, self.dilation)


class _BatchNorm(Cell):
    _RANKS = (4,)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.dtype = dtype or mstype.float32
        self.weight = self.bias = None
        if affine:
            self.weight = Parameter(Tensor(np.ones(num_features), self.dtype), name="weight")
            self.bias = Parameter(Tensor(np.zeros(num_features), self.dtype), name="bias")
        self.running_mean = self.running_var = self.num_batches_tracked = None
        if track_running_stats:
            self.running_mean = Parameter(Tensor(np.zeros(num_features), self.dtype),
                                          name="running_mean", requires_grad=False)
            self.running_var = Parameter(Tensor(np.ones(num_features), self.dtype),
                                         name="running_var", requires_grad=False)
            self.num_batches_tracked = Parameter(Tensor(0, mstype.int64),
                                                 name="num_batches_tracked",
                                                 requires_grad=False)

    def _check_input_dim(self, input):  # noqa: A002
        if len(input.shape) not in self._RANKS:
            raise ValueError(f"expected {' or '.join(f'{r}D' for r in self._RANKS)} input, but "
                             f"got {len(input.shape)}D input")

    def _factor(self):
        """The running statistics' update factor: momentum, or with momentum None 1 / the
        batches seen (a cumulative average; a tensor, so compiled code reads it at run time)."""
        if not (self.training and self.track_running_stats):
            return 0.0
        self.num_batches_tracked += 1
        if self.momentum is None:
            return 1.0 / ops.cast(self.num_batches_tracked, self.dtype)
        return self.momentum

    def construct(self, input):  # noqa: A002
        self._check_input_dim(input)
        factor = self._factor()
        if is_tensor(factor):  # the cumulative average: updated here, not by batch_norm
            out = ops.batch_norm(input, None, None, self.weight, self.bias, True, 0.0, self.eps)
            self._update_running(input, factor)
            return out
        use_batch = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        return ops.batch_norm(input, self.running_mean if track else None,
                              self.running_var if track else None, self.weight, self.bias,
                              use_batch, factor, self.eps)

    def _update_running(self, x, factor, mean=None, var=None, count=None):
        """running = (1 - factor) * running + factor * batch (unbiased variance); mean, var
        (biased) and count are x's own unless given."""
        axes = (0,) + tuple(range(2, len(x.shape)))
        count = count or x.size // x.shape[1]
        if mean is None:
            x = ops.stop_gradient(x)
            mean = ops.mean(x, axes)
            centred = x - ops.reshape(mean, (1, -1) + (1,) * (len(x.shape) - 2))
            var = ops.sum(centred * centred, axes) / count
        unbiased = ops.stop_gradient(var) * (count / max(count - 1, 1))
        mean = ops.cast(ops.stop_gradient(mean), self.running_mean.dtype)
        unbiased = ops.cast(unbiased, self.running_var.dtype)
        ops.assign(self.running_mean, (1 - factor) * self.running_mean + factor * mean)
        ops.assign(self.running_var, (1 - factor) * self.running_var + factor * unbiased)

    def extend_repr(self):
        return (f"num_features={self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    _RANKS = (2, 3)


class BatchNorm2d(_BatchNorm):
    _RANKS = (4,)


class BatchNorm3d(_BatchNorm):
    _RANKS = (5,)


class SyncBatchNorm(_BatchNorm):
    """Batch normalization whose training statistics cover every process of process_group
    (needs kiln.communication.init(), as MindSpore's does); one process: BatchNorm's."""

    _RANKS = tuple(range(2, 9))

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, dtype=None):
        from kiln.communication import GlobalComm, get_group_size  # noqa: PLC0415

        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype)
        self.process_group = process_group or GlobalComm.WORLD_COMM_GROUP
        self.world_size = get_group_size(self.process_group)

    def construct(self, input):  # noqa: A002
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        if self.world_size == 1 or not self.training:
            return super().construct(input)
        self._check_input_dim(input)
        return self._synced(input, self._factor())

    def _synced(self, x, factor):
        from kiln.communication.comm_func import all_reduce  # noqa: PLC0415

        axes = (0,) + tuple(range(2, len(x.shape)))
        count = x.size // x.shape[1]
        stats = ops.stack([ops.sum(x, axes), ops.sum(x * x, axes)], 0)
        stats, _ = all_reduce(stats, group=self.process_group)  # (output, handle)
        total = count * self.world_size
        mean = stats[0] / total
        var = stats[1] / total - mean * mean
        shape = (1, -1) + (1,) * (len(x.shape) - 2)
        y = (x - ops.reshape(mean, shape)) / ops.sqrt(ops.reshape(var, shape) + self.eps)
        if self.weight is not None:
            y = y * ops.reshape(self.weight, shape) + ops.reshape(self.bias, shape)
        if self.track_running_stats:
            self._update_running(x, factor, mean, var, total)
        return y


class GroupNorm(Cell):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = (num_groups, num_channels,
                                                                     eps, affine)
        dtype = dtype or mstype.float32
        self.weight = self.bias = None
        if affine:
            self.weight = Parameter(Tensor(np.ones(num_channels), dtype), name="weight")
            self.bias = Parameter(Tensor(np.zeros(num_channels), dtype), name="bias")

    def construct(self, input):  # noqa: A002
        return ops.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)


class Embedding(Cell):
    """A lookup table of num_embeddings rows (N(0, 1) initially; row padding_idx zero)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, dtype=None):
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx must be within num_embeddings, got "
                                 f"{padding_idx}")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        dtype = dtype or mstype.float32
        if _weight is None:
            table = initializer(Normal(1.0), (num_embeddings, embedding_dim), dtype).init_data()
            if padding_idx is not None:
                table[padding_idx] = 0
        else:
            table = _weight
        self.weight = Parameter(table, name="weight", requires_grad=not _freeze)

    def construct(self, input):  # noqa: A002
        return ops.embedding(input, self.weight, self.padding_idx, self.max_norm,
                             self.norm_type, self.scale_grad_by_freq)


class PReLU(Cell):
    def __init__(self, num_parameters=1, init=0.25, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.weight = Parameter(Tensor(np.full(num_parameters, init), dtype or mstype.float32),
                                name="weight")

    def construct(self, input):  # noqa: A002
        return ops.prelu(input, self.weight)
