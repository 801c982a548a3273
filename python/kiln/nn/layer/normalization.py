"""BatchNorm1d/2d, LayerNorm, GroupNorm and InstanceNorm1d/2d/3d with MindSpore's parameter names
and defaults."""
import math
import numbers

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.initializer import initializer
from kiln.common.parameter import Parameter, _copy_into
from kiln.nn import _functional as F
from kiln.nn.cell import Cell
from kiln.nn.layer.basic import check_bool, check_int

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "InstanceNorm1d",
           "InstanceNorm2d", "InstanceNorm3d"]


class _BatchNorm(Cell):
    """Shared BatchNorm: gamma/beta are trained, moving_mean/moving_variance are not.

    momentum follows MindSpore: moving = momentum * moving + (1 - momentum) * batch
    (default 0.9). use_batch_statistics=None uses the batch statistics (and updates the moving
    ones) only in training mode; True always does, False never does.
    """

    _NAME = "BatchNorm"
    _RANKS = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init="ones",
                 beta_init="zeros", moving_mean_init="zeros", moving_var_init="ones",
                 use_batch_statistics=None, data_format="NCHW", dtype=mstype.float32):
        super().__init__()
        who = self._NAME
        self.num_features = check_int(num_features, who, "num_features")
        if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or eps <= 0:
            raise ValueError(f"{who}: eps must be a positive float, got {eps!r}")
        if isinstance(momentum, bool) or not isinstance(momentum, numbers.Real) or \
                not 0 <= momentum <= 1:
            raise ValueError(f"{who}: momentum must be a float in [0, 1], got {momentum!r}")
        if use_batch_statistics is not None:
            check_bool(use_batch_statistics, who, "use_batch_statistics")
        if data_format != "NCHW":
            raise ValueError(f"{who}: only data_format='NCHW' is supported, got {data_format!r}")
        self.eps, self.momentum = float(eps), float(momentum)
        self.affine = check_bool(affine, who, "affine")
        self.use_batch_statistics = use_batch_statistics
        n = (self.num_features,)
        self.moving_mean = Parameter(initializer(moving_mean_init, n, dtype), name="moving_mean",
                                     requires_grad=False)
        self.moving_variance = Parameter(initializer(moving_var_init, n, dtype),
                                         name="moving_variance", requires_grad=False)
        self.gamma = Parameter(initializer(gamma_init, n, dtype), name="gamma",
                               requires_grad=self.affine)
        self.beta = Parameter(initializer(beta_init, n, dtype), name="beta",
                              requires_grad=self.affine)

    def construct(self, x):
        shape = tuple(x.shape)
        if len(shape) not in self._RANKS or shape[1] != self.num_features:
            expected = " or ".join(f"{r}-D" for r in self._RANKS)
            raise ValueError(f"{self._NAME}: expected a {expected} input with "
                             f"{self.num_features} channels on axis 1, got shape {shape}")
        use_batch = self.training if self.use_batch_statistics is None \
            else self.use_batch_statistics
        return F.batch_norm(x, self.gamma, self.beta, self.moving_mean, self.moving_variance,
                            use_batch, self.momentum, self.eps)

    def extend_repr(self):
        return (f"num_features={self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"gamma={self.gamma.name}, beta={self.beta.name}, "
                f"moving_mean={self.moving_mean.name}, "
                f"moving_variance={self.moving_variance.name}")


class BatchNorm1d(_BatchNorm):
    """Batch norm over an (N, C) or (N, C, L) input."""
    _NAME = "BatchNorm1d"
    _RANKS = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over an (N, C, H, W) input, per channel."""
    _NAME = "BatchNorm2d"
    _RANKS = (4,)


class BatchNorm3d(Cell):
    """Batch norm of (N, C, D, H, W) per channel: MindSpore's BatchNorm3d, a BatchNorm2d named
    `bn2d` over the input viewed as (N, C, D * H, W) (so its parameters are bn2d.gamma, ...)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init="ones",
                 beta_init="zeros", moving_mean_init="zeros", moving_var_init="ones",
                 use_batch_statistics=None, dtype=mstype.float32):
        super().__init__()
        self.bn2d = BatchNorm2d(num_features, eps, momentum, affine, gamma_init, beta_init,
                                moving_mean_init, moving_var_init, use_batch_statistics,
                                dtype=dtype)

    def construct(self, x):
        shape = tuple(x.shape)
        if len(shape) != 5:
            raise ValueError(f"BatchNorm3d: expected an (N, C, D, H, W) input, got shape {shape}")
        y = self.bn2d(F.reshape(x, (shape[0], shape[1], shape[2] * shape[3], shape[4])))
        return F.reshape(y, shape)


class LayerNorm(Cell):
    """Normalises over the axes from begin_norm_axis on; gamma and beta have normalized_shape.

    MindSpore's defaults: begin_norm_axis=-1, begin_params_axis=-1, epsilon=1e-7.
    """

    def __init__(self, normalized_shape, begin_norm_axis=-1, begin_params_axis=-1,
                 gamma_init="ones", beta_init="zeros", epsilon=1e-7, dtype=mstype.float32):
        super().__init__()
        if isinstance(normalized_shape, int) and not isinstance(normalized_shape, bool):
            normalized_shape = (normalized_shape,)
        if not isinstance(normalized_shape, (tuple, list)) or not normalized_shape or any(
                isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in normalized_shape):
            raise TypeError(f"LayerNorm: normalized_shape must be a non-empty tuple or list of "
                            f"positive ints, got {normalized_shape!r}")
        self.normalized_shape = tuple(normalized_shape)
        self.begin_norm_axis = check_int(begin_norm_axis, "LayerNorm", "begin_norm_axis",
                                         minimum=-2**31)
        self.begin_params_axis = check_int(begin_params_axis, "LayerNorm",
                                           "begin_params_axis", minimum=-2**31)
        if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or epsilon <= 0:
            raise ValueError(f"LayerNorm: epsilon must be a positive float, got {epsilon!r}")
        self.epsilon = float(epsilon)
        self.gamma = Parameter(initializer(gamma_init, self.normalized_shape, dtype),
                               name="gamma")
        self.beta = Parameter(initializer(beta_init, self.normalized_shape, dtype), name="beta")

    def construct(self, x):
        shape = tuple(x.shape)
        k = len(self.normalized_shape)
        if len(shape) < k or shape[len(shape) - k:] != self.normalized_shape:
            raise ValueError(f"LayerNorm: the input's trailing dimensions must equal "
                             f"normalized_shape {self.normalized_shape}, got shape {shape}")
        if not -len(shape) <= self.begin_norm_axis < len(shape):
            raise ValueError(f"LayerNorm: begin_norm_axis {self.begin_norm_axis} is out of "
                             f"range for an input of shape {shape}")
        return F.layer_norm(x, self.begin_norm_axis, self.gamma, self.beta, self.epsilon)

    def extend_repr(self):
        return (f"normalized_shape={self.normalized_shape}, "
                f"begin_norm_axis={self.begin_norm_axis}, "
                f"begin_params_axis={self.begin_params_axis}, gamma={self.gamma.name}, "
                f"beta={self.beta.name}")


class GroupNorm(Cell):
    """Normalizes (N, C, *) over each of num_groups channel groups and the spatial dims, then
    applies the per-channel gamma/beta (MindSpore's names and defaults, eps=1e-5)."""

    def __init__(self, num_groups, num_channels, eps=1e-05, affine=True, gamma_init="ones",
                 beta_init="zeros", dtype=mstype.float32):
        super().__init__()
        self.num_groups = check_int(num_groups, "GroupNorm", "num_groups")
        self.num_channels = check_int(num_channels, "GroupNorm", "num_channels")
        if self.num_channels % self.num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or eps <= 0:
            raise TypeError(f"GroupNorm: eps must be a positive float, got {eps!r}")
        self.eps = float(eps)
        self.affine = check_bool(affine, "GroupNorm", "affine")
        n = (self.num_channels,)
        self.gamma = Parameter(initializer(gamma_init, n, dtype), name="gamma",
                               requires_grad=self.affine)
        self.beta = Parameter(initializer(beta_init, n, dtype), name="beta",
                              requires_grad=self.affine)

    def construct(self, x):
        shape = tuple(x.shape)
        if len(shape) < 2 or shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm: expected an (N, {self.num_channels}, ...) input, got "
                             f"shape {shape}")
        return ops.group_norm(x, self.num_groups, F.cast(self.gamma, x.dtype),
                              F.cast(self.beta, x.dtype), self.eps)

    def extend_repr(self):
        return f"num_groups={self.num_groups}, num_channels={self.num_channels}"


class _InstanceNorm(Cell):
    """Instance statistics in training and evaluation alike (biased variance). moving_mean
    ('mean') and moving_variance ('variance') are kept as MindSpore keeps them: updated in
    training with running = (1 - momentum) * running + momentum * batch (the batch's mean of
    instance means and of unbiased instance variances), never used for the output."""

    _RANK = 4

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, gamma_init="ones",
                 beta_init="zeros", dtype=mstype.float32):
        super().__init__()
        who = type(self).__name__
        self.num_features = check_int(num_features, who, "num_features")
        for name, value in (("eps", eps), ("momentum", momentum)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{who}: {name} must be a float, got {value!r}")
        if not 0 <= momentum <= 1:
            raise ValueError(f"{who}: momentum must be in [0, 1], got {momentum}")
        self.eps, self.momentum = float(eps), float(momentum)
        self.affine = check_bool(affine, who, "affine")
        n = (self.num_features,)
        self.moving_mean = Parameter(initializer("zeros", n, dtype), name="mean",
                                     requires_grad=False)
        self.moving_variance = Parameter(initializer("ones", n, dtype), name="variance",
                                         requires_grad=False)
        self.gamma = Parameter(initializer(gamma_init, n, dtype), name="gamma",
                               requires_grad=self.affine)
        self.beta = Parameter(initializer(beta_init, n, dtype), name="beta",
                              requires_grad=self.affine)

    def construct(self, x):
        shape = tuple(x.shape)
        who = type(self).__name__
        if len(shape) != self._RANK or shape[1] != self.num_features:
            raise ValueError(f"{who}: expected a {self._RANK}-D input with {self.num_features} "
                             f"channels on axis 1, got shape {shape}")
        axes = tuple(range(2, len(shape)))
        mean = F.rmean(x, axes, True)
        centered = x - mean
        var = F.rmean(centered * centered, axes, True)
        if self.training:
            count = math.prod(shape[2:])
            batch_mean = F.rmean(F.reshape(mean, shape[:2]), 0)
            unbiased = F.reshape(var, shape[:2]) * (count / max(count - 1, 1))
            keep, take = 1.0 - self.momentum, self.momentum
            _copy_into(self.moving_mean, self.moving_mean * keep +
                       F.cast(F._detach(batch_mean), self.moving_mean.dtype) * take)
            _copy_into(self.moving_variance, self.moving_variance * keep +
                       F.cast(F._detach(F.rmean(unbiased, 0)), self.moving_variance.dtype)
                       * take)
        affine = (1, shape[1]) + (1,) * (len(shape) - 2)
        y = centered * ops.rsqrt(var + self.eps)
        return y * F.reshape(F.cast(self.gamma, x.dtype), affine) + \
            F.reshape(F.cast(self.beta, x.dtype), affine)

    def extend_repr(self):
        return f"num_features={self.num_features}, eps={self.eps}, momentum={self.momentum}"


class InstanceNorm1d(_InstanceNorm):
    """Instance norm of (N, C, L)."""
    _RANK = 3


class InstanceNorm2d(_InstanceNorm):
    """Instance norm of (N, C, H, W)."""
    _RANK = 4


class InstanceNorm3d(_InstanceNorm):
    """Instance norm of (N, C, D, H, W)."""
    _RANK = 5
