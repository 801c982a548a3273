"""Losses: MSELoss, L1Loss, CrossEntropyLoss, SoftmaxCrossEntropyWithLogits (as MindSpore)."""
import numbers

import numpy as np

from kiln import _C, ops
from kiln.common import dtype as mstype
from kiln.nn import _functional as F
from kiln.nn.cell import Cell
from kiln.ops._core import is_tensor as _is_tensor
from kiln.ops.function.array import one_hot_checked

__all__ = ["LossBase", "MSELoss", "L1Loss", "CrossEntropyLoss", "SoftmaxCrossEntropyWithLogits"]

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(reduction, who):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{who}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    return reduction


def _check_same_shape(a, b, who):
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{who}: logits and labels must have the same shape, got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")


def check_broadcast(a, b, who, names=("logits", "labels")):
    """a and b broadcast together (MindSpore's MSELoss/L1Loss/MAELoss accept that), else a
    ValueError naming both shapes."""
    try:  # a graph's dimension of any size (-1) is checked when the graph runs
        np.broadcast_shapes(*(tuple(1 if d < 0 else d for d in t.shape) for t in (a, b)))
    except ValueError:
        raise ValueError(f"{who}: {names[0]} and {names[1]} must have broadcastable shapes, got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}") from None


class LossBase(Cell):
    """Base of losses: `get_loss(x, weights=1.0)` multiplies x by weights (broadcasting) and
    applies the reduction over all axes. As in MindSpore, 16-bit inputs are weighted and
    reduced in float32 and the result is cast back to the input's dtype (float32 and float64
    stay in their own precision)."""

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = _check_reduction(reduction, type(self).__name__)
        self.average = reduction != "sum"
        self.reduce = reduction != "none"

    def get_axis(self, x):
        """All axes of x, as a tuple (what get_loss reduces over)."""
        return tuple(range(len(x.shape)))

    def get_loss(self, x, weights=1.0):
        dtype = x.dtype
        widen = dtype in (mstype.float16, mstype.bfloat16)
        if widen:
            x = F.cast(x, mstype.float32)
        if _is_tensor(weights):
            x = x * F.cast(weights, x.dtype)
        elif not (isinstance(weights, numbers.Number) and weights == 1.0):
            x = x * weights
        if self.reduction == "mean":
            x = F.rmean(x)
        elif self.reduction == "sum":
            x = F.rsum(x)
        return F.cast(x, dtype) if widen else x

    def construct(self, logits, labels):
        raise NotImplementedError(f"{type(self).__name__}: a loss must define construct")

    def extend_repr(self):
        return f"reduction={self.reduction}"


class MSELoss(LossBase):
    """(logits - labels)^2, reduced."""

    def construct(self, logits, labels):
        check_broadcast(logits, labels, "MSELoss")
        diff = logits - labels
        return self.get_loss(diff * diff)


class L1Loss(LossBase):
    """|logits - labels|, reduced."""

    def construct(self, logits, labels):
        check_broadcast(logits, labels, "L1Loss")
        return self.get_loss(ops.abs(logits - labels))


def _is_int_tensor(t):
    return t.dtype in mstype.int_type + mstype.uint_type


def _class_last(logits, who):
    """(M, C) logits with the class axis last, and the shape of the per-sample losses."""
    shape = tuple(logits.shape)
    if len(shape) == 1:
        return F.reshape(logits, (1, shape[0])), ()
    if len(shape) == 2:
        return logits, (shape[0],)
    if len(shape) < 1:
        raise ValueError(f"{who}: logits must have a class axis, got shape {shape}")
    perm = (0,) + tuple(range(2, len(shape))) + (1,)
    moved = F.transpose(logits, perm)
    return F.reshape(moved, (-1, shape[1])), (shape[0],) + shape[2:]


class CrossEntropyLoss(LossBase):
    """Cross entropy of logits (N, C) / (N, C, d...) / (C,) against class indices (N, d...)
    or class probabilities (same shape as logits).

    weight rescales each class; ignore_index targets contribute nothing; label_smoothing mixes
    the target with the uniform distribution. 'mean' divides by the summed target weights.
    """

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        if weight is not None and not isinstance(weight, _C.TensorBase):
            raise TypeError(f"CrossEntropyLoss: weight must be a Tensor or None, got "
                            f"{type(weight).__name__}")
        if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
            raise TypeError(f"CrossEntropyLoss: ignore_index must be an int, got "
                            f"{ignore_index!r}")
        if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, numbers.Real) \
                or not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got "
                             f"{label_smoothing!r}")
        self.weight = weight
        self.ignore_index = ignore_index
        self.label_smoothing = float(label_smoothing)

    def construct(self, logits, labels):
        who = "CrossEntropyLoss"
        shape = tuple(logits.shape)
        classes = shape[0] if len(shape) == 1 else shape[1] if len(shape) >= 2 else 0
        flat, sample_shape = _class_last(logits, who)
        if self.weight is not None and tuple(self.weight.shape) != (classes,):
            raise ValueError(f"{who}: weight must have shape ({classes},), got "
                             f"{tuple(self.weight.shape)}")
        logp = F.log_softmax(flat, -1)
        if _is_int_tensor(labels):
            if tuple(labels.shape) != sample_shape:
                raise ValueError(f"{who}: class-index labels must have shape {sample_shape} "
                                 f"for logits of shape {shape}, got {tuple(labels.shape)}")
            idx = F.reshape(labels, (-1,))
            valid = F.cast(ops.not_equal(idx, self.ignore_index), logp.dtype)
            safe = idx * F.cast(ops.not_equal(idx, self.ignore_index), idx.dtype)
            target = F.cast(one_hot_checked(safe, classes, 1.0, 0.0, -1, f"{who}: label"),
                            logp.dtype)
            wsample = valid if self.weight is None else \
                F.rsum(target * F.cast(self.weight, logp.dtype), -1) * valid
            if self.label_smoothing:
                target = target * (1.0 - self.label_smoothing) + self.label_smoothing / classes
            wlogp = logp if self.weight is None else logp * F.cast(self.weight, logp.dtype)
            loss = -F.rsum(target * wlogp, -1) * valid
            denom = F.rsum(wsample)
        else:
            if tuple(labels.shape) != shape:
                raise ValueError(f"{who}: probability labels must have the logits' shape "
                                 f"{shape}, got {tuple(labels.shape)}")
            target, _ = _class_last(F.cast(labels, logp.dtype), who)
            if self.label_smoothing:
                target = target * (1.0 - self.label_smoothing) + self.label_smoothing / classes
            wlogp = logp if self.weight is None else logp * F.cast(self.weight, logp.dtype)
            loss = -F.rsum(target * wlogp, -1)
            denom = float(loss.shape[0])
        if self.reduction == "none":
            return F.reshape(loss, sample_shape)
        total = F.rsum(loss)
        return total if self.reduction == "sum" else total / denom


class SoftmaxCrossEntropyWithLogits(LossBase):
    """-sum(labels * log_softmax(logits)) per sample: labels one-hot/probabilities (N, C), or
    class indices (N,) with sparse=True. reduction defaults to 'none', as in MindSpore."""

    def __init__(self, sparse=False, reduction="none"):
        super().__init__(reduction)
        if not isinstance(sparse, bool):
            raise TypeError(f"SoftmaxCrossEntropyWithLogits: sparse must be a bool, got "
                            f"{sparse!r}")
        self.sparse = sparse

    def construct(self, logits, labels):
        who = "SoftmaxCrossEntropyWithLogits"
        shape = tuple(logits.shape)
        if len(shape) != 2:
            raise ValueError(f"{who}: logits must be 2-D (N, C), got shape {shape}")
        logp = F.log_softmax(logits, -1)
        if self.sparse:
            if tuple(labels.shape) != shape[:1] or not _is_int_tensor(labels):
                raise ValueError(f"{who}: with sparse=True labels must be integer class ids of "
                                 f"shape ({shape[0]},), got {labels.dtype} "
                                 f"{tuple(labels.shape)}")
            labels = F.cast(one_hot_checked(labels, shape[1], 1.0, 0.0, -1, f"{who}: label"),
                            logp.dtype)
        else:
            _check_same_shape(logits, labels, who)
            labels = F.cast(labels, logp.dtype)
        return self.get_loss(-F.rsum(labels * logp, -1))

    def extend_repr(self):
        return f"sparse={self.sparse}, reduction={self.reduction}"
