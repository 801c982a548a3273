"""kiln.mint.nn -- mindspore.mint.nn: PyTorch-style Cells and the functional API.

A Cell is kiln.nn's own where MindSpore 2.10 gives both the same signature and results
(`Linear`, `ReLU`, `MSELoss`, ...); the others are small Cells over kiln.mint.nn.functional
with mint's arguments (`Softmax(dim)`, `Dropout(p)`, `LayerNorm(normalized_shape, eps,
elementwise_affine, bias)`, ...).
"""
from kiln import nn as _nn
from kiln import ops as _ops
from kiln.common import dtype as _mstype
from kiln.common._missing import missing_attribute as _missing_attribute
from kiln.common.initializer import initializer as _initializer
from kiln.common.parameter import Parameter as _Parameter
from kiln.mint.nn import functional  # noqa: F401 - mint.nn.functional
from kiln.mint.nn import functional as F
from kiln.mint.nn._param_layers import (  # noqa: F401 - mint.nn's Cells
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose2d,
    Embedding,
    GroupNorm,
    PReLU,
    SyncBatchNorm,
)
from kiln.mint.nn._simple_layers import *  # noqa: F403 - mint.nn's parameter-free Cells

Cell = _nn.Cell
Linear, ReLU, Sigmoid, Tanh, Mish, Flatten = (
    _nn.Linear, _nn.ReLU, _nn.Sigmoid, _nn.Tanh, _nn.Mish, _nn.Flatten)
Hardswish = _nn.HSwish
MSELoss, L1Loss, CrossEntropyLoss, NLLLoss = (
    _nn.MSELoss, _nn.L1Loss, _nn.CrossEntropyLoss, _nn.NLLLoss)


class Identity(Cell):
    """Returns its input; any constructor arguments are ignored (as PyTorch's)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def construct(self, input):  # noqa: A002 - mint's argument name
        return input


class GELU(Cell):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def construct(self, input):  # noqa: A002
        return F.gelu(input, self.approximate)


class SiLU(Cell):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def construct(self, input):  # noqa: A002
        return F.silu(input, self.inplace)


class ELU(Cell):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def construct(self, input):  # noqa: A002
        return F.elu(input, self.alpha, self.inplace)


class Softmax(Cell):
    """Softmax along dim (None: the last axis)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def construct(self, input):  # noqa: A002
        return F.softmax(input, self.dim)


class LogSoftmax(Cell):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def construct(self, input):  # noqa: A002
        return F.log_softmax(input, self.dim)


class Dropout(Cell):
    """Zeroes elements with probability p in training (scaling the rest by 1 / (1 - p));
    the identity in evaluation mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p, self.inplace = p, inplace

    def construct(self, input):  # noqa: A002
        if not self.training or self.p == 0:
            return input
        return F.dropout(input, self.p, True, self.inplace)


class SmoothL1Loss(Cell):
    def __init__(self, reduction="mean", beta=1.0):
        super().__init__()
        self.reduction, self.beta = reduction, beta

    def construct(self, input, target):  # noqa: A002
        return F.smooth_l1_loss(input, target, self.reduction, self.beta)


class BCEWithLogitsLoss(Cell):
    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__()
        self.weight, self.reduction, self.pos_weight = weight, reduction, pos_weight

    def construct(self, input, target):  # noqa: A002
        return F.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction,
                                                  self.pos_weight)


class LayerNorm(Cell):
    """Normalizes over the trailing `normalized_shape` dimensions; with elementwise_affine,
    Parameters `weight` (ones) and `bias` (zeros, unless bias=False) scale and shift."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(
            normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        dtype = dtype or _mstype.float32
        self.weight = self.bias = None
        if elementwise_affine:
            self.weight = _Parameter(_initializer("ones", shape, dtype), name="weight")
            if bias:
                self.bias = _Parameter(_initializer("zeros", shape, dtype), name="bias")

    def construct(self, input):  # noqa: A002
        return _ops.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


__getattr__ = _missing_attribute("kiln.mint.nn", "mindspore.mint.nn")
