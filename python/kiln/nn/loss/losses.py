"""More losses with MindSpore 2.x names, defaults and reductions: BCELoss, BCEWithLogitsLoss,
NLLLoss, SmoothL1Loss, HuberLoss, MAELoss, RMSELoss, KLDivLoss, CosineEmbeddingLoss,
MarginRankingLoss, SoftMarginLoss, FocalLoss, DiceLoss, MultiClassDiceLoss, HingeEmbeddingLoss,
GaussianNLLLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, TripletMarginLoss, PoissonNLLLoss,
CTCLoss."""
import math
import numbers

from kiln import _C, ops
from kiln.common import dtype as mstype
from kiln.common.parameter import Parameter
from kiln.nn import _functional as F
from kiln.nn.cell import Cell
from kiln.nn.layer.activation import get_activation
from kiln.nn.loss.loss import LossBase, check_broadcast
from kiln.ops._core import is_tensor

__all__ = ["BCELoss", "BCEWithLogitsLoss", "NLLLoss", "SmoothL1Loss", "HuberLoss", "MAELoss",
           "RMSELoss", "KLDivLoss", "CosineEmbeddingLoss", "MarginRankingLoss",
           "SoftMarginLoss", "FocalLoss", "DiceLoss", "MultiClassDiceLoss", "HingeEmbeddingLoss",
           "GaussianNLLLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss", "TripletMarginLoss",
           "PoissonNLLLoss", "CTCLoss"]


def _tensor_or_none(value, who, name):
    if value is not None and not isinstance(value, _C.TensorBase):
        raise TypeError(f"{who}: {name} must be a Tensor or None, got {type(value).__name__}")
    return value


def _float(value, who, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{who}: {name} must be a float, got {value!r}")
    return float(value)


def _check_tensors(who, **tensors):
    for name, value in tensors.items():
        if not is_tensor(value):
            raise TypeError(f"{who}: {name} must be a Tensor, got {type(value).__name__}")


class BCELoss(LossBase):
    """Binary cross entropy of probabilities: -w * (y log x + (1 - y) log(1 - x)) (MindSpore's
    kernel adds 1e-12 inside the logs); weight has the logits' shape."""

    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.weight = _tensor_or_none(weight, "BCELoss", "weight")

    def construct(self, logits, labels):
        return ops.binary_cross_entropy(logits, labels, self.weight, self.reduction)


class BCEWithLogitsLoss(LossBase):
    """Binary cross entropy of sigmoid(logits), stable for large |logits|; weight and
    pos_weight broadcast to the logits' shape (neither may be a Parameter)."""

    def __init__(self, reduction="mean", weight=None, pos_weight=None):
        super().__init__(reduction)
        for name, value in (("weight", weight), ("pos_weight", pos_weight)):
            if isinstance(value, Parameter):
                raise TypeError(f"BCEWithLogitsLoss: {name} can not be a Parameter")
            _tensor_or_none(value, "BCEWithLogitsLoss", name)
        self.weight = weight
        self.pos_weight = pos_weight

    def construct(self, logits, labels):
        return ops.binary_cross_entropy_with_logits(logits, labels, self.weight,
                                                    self.pos_weight, self.reduction)


class NLLLoss(LossBase):
    """Negative log-likelihood of log-probabilities (N, C) / (N, C, d...) at class indices
    (N,) / (N, d...); ignore_index targets count for nothing; 'mean' divides by the summed
    weights of the counted targets."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
            raise TypeError(f"NLLLoss: ignore_index must be an int, got {ignore_index!r}")
        self.weight = _tensor_or_none(weight, "NLLLoss", "weight")
        if weight is not None and weight.dtype not in (mstype.float16, mstype.float32,
                                                       mstype.float64):
            raise TypeError(f"NLLLoss: weight must be a float Tensor, got {weight.dtype}")
        self.ignore_index = ignore_index

    def construct(self, logits, labels):
        _check_tensors("NLLLoss", logits=logits, labels=labels)
        if len(logits.shape) < 2:
            raise ValueError(f"NLLLoss: logits must be (N, C, d...), got shape "
                             f"{tuple(logits.shape)}")
        return ops.nll_loss(logits, labels, self.weight, self.ignore_index, self.reduction)


class SmoothL1Loss(LossBase):
    """0.5 * d^2 / beta where |d| < beta, else |d| - 0.5 * beta; reduction 'none' by default,
    as in MindSpore; logits and labels share a shape."""

    def __init__(self, beta=1.0, reduction="none"):
        super().__init__(reduction)
        self.beta = _float(beta, "SmoothL1Loss", "beta")
        if self.beta <= 0:
            raise ValueError(f"SmoothL1Loss: beta must be > 0, got {beta}")

    def construct(self, logits, labels):
        return ops.smooth_l1_loss(logits, labels, self.beta, self.reduction)


class HuberLoss(LossBase):
    """0.5 * d^2 where |d| < delta, else delta * (|d| - 0.5 * delta); broadcasts."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction)
        self.delta = _float(delta, "HuberLoss", "delta")
        if self.delta <= 0:
            raise ValueError(f"HuberLoss: delta must be > 0, got {delta}")

    def construct(self, logits, labels):
        return ops.huber_loss(logits, labels, self.reduction, self.delta)


class MAELoss(LossBase):
    """|logits - labels| (broadcast), weighted and reduced by get_loss."""

    def construct(self, logits, label):
        _check_tensors("MAELoss", logits=logits, labels=label)
        check_broadcast(logits, label, "MAELoss")
        return self.get_loss(ops.abs(logits - label))


class RMSELoss(LossBase):
    """sqrt(mean((logits - labels)^2)), broadcasting."""

    def __init__(self):
        super().__init__("mean")

    def construct(self, logits, label):
        _check_tensors("RMSELoss", logits=logits, labels=label)
        check_broadcast(logits, label, "RMSELoss")
        if logits.dtype in mstype.uint_type or label.dtype in mstype.uint_type:
            raise TypeError(f"RMSELoss: unsigned dtypes are not supported, got {logits.dtype} "
                            f"and {label.dtype}")
        diff = logits - label
        return ops.sqrt(self.get_loss(diff * diff))


class KLDivLoss(LossBase):
    """labels * (log(labels) - logits) (0 where labels is 0); reductions 'none', 'mean',
    'sum' and 'batchmean'."""

    def __init__(self, reduction="mean"):
        if reduction == "batchmean":
            super().__init__("none")
            self.reduction = "batchmean"
        else:
            super().__init__(reduction)

    def construct(self, logits, labels):
        return ops.kl_div(logits, labels, self.reduction)


class CosineEmbeddingLoss(LossBase):
    """Along axis 1: 1 - cos(x1, x2) where labels is 1, max(0, cos - margin) where -1."""

    def __init__(self, margin=0.0, reduction="mean"):
        super().__init__(reduction)
        self.margin = _float(margin, "CosineEmbeddingLoss", "margin")
        if not -1.0 <= self.margin <= 1.0:
            raise ValueError(f"CosineEmbeddingLoss: margin must be in [-1.0, 1.0], got {margin}")

    def construct(self, logits_x1, logits_x2, labels):
        unreduced = ops.cosine_embedding_loss(logits_x1, logits_x2, labels, self.margin, "none")
        return self.get_loss(unreduced)


class MarginRankingLoss(LossBase):
    """max(0, -target * (input1 - input2) + margin)."""

    def __init__(self, margin=0.0, reduction="mean"):
        super().__init__(reduction)
        self.margin = _float(margin, "MarginRankingLoss", "margin")

    def construct(self, input1, input2, target):
        return ops.margin_ranking_loss(input1, input2, target, self.margin, self.reduction)


class SoftMarginLoss(LossBase):
    """log(1 + exp(-labels * logits))."""

    def construct(self, logits, labels):
        return ops.soft_margin_loss(logits, labels, self.reduction)


class FocalLoss(LossBase):
    """-(1 - p_t)^gamma * log(p_t) over log_softmax along axis 1 of (N, C) / (N, C, H) /
    (N, C, H, W) logits, as MindSpore computes it: labels (N, 1, ...) hold class indices,
    labels (N, C, ...) weights per class; weight (C,) rescales classes (applied to log p_t);
    the per-sample loss is the mean over the remaining axes before the reduction."""

    def __init__(self, weight=None, gamma=2.0, reduction="mean"):
        super().__init__(reduction)
        self.gamma = _float(gamma, "FocalLoss", "gamma")
        self.weight = _tensor_or_none(weight, "FocalLoss", "weight")
        if weight is not None and len(weight.shape) != 1:
            raise ValueError(f"FocalLoss: weight must be 1-D, got shape {tuple(weight.shape)}")

    def _flatten(self, logits, labels):
        who = "FocalLoss"
        if len(labels.shape) != len(logits.shape):
            raise ValueError(f"FocalLoss: labels must have the logits' rank, got shapes "
                             f"{tuple(logits.shape)} and {tuple(labels.shape)}")
        if labels.shape[1] != 1 and tuple(labels.shape) != tuple(logits.shape):
            raise ValueError(f"{who}: labels of shape {tuple(labels.shape)} must have 1 channel "
                             f"or the logits' shape {tuple(logits.shape)}")
        if len(logits.shape) > 2:
            n = logits.shape[0]
            return (F.reshape(logits, (n, logits.shape[1], -1)),
                    F.reshape(labels, (n, labels.shape[1], -1)))
        return ops.expand_dims(logits, 2), ops.expand_dims(labels, 2)

    def construct(self, logits, labels):
        _check_tensors("FocalLoss", logits=logits, labels=labels)
        if labels.dtype not in (mstype.int32, mstype.int64, mstype.float16, mstype.float32):
            raise TypeError(f"FocalLoss: labels must be int32, int64, float16 or float32, got "
                            f"{labels.dtype}")
        logits3, labels3 = self._flatten(logits, labels)
        classes = logits3.shape[1]
        log_p = F.log_softmax(logits3, 1)
        sparse = labels.shape[1] == 1
        if sparse:
            # Class c of (N, 1, L) labels picked along axis 1 (negative indices wrap).
            index = (F.cast(labels3, mstype.int32) + classes) % classes
            picked = F.cast(ops.one_hot(F.reshape(index, (index.shape[0], -1)), classes, 1, 0,
                                        1), mstype.bool_)
            log_p = F.rsum(ops.where(picked, log_p, 0.0), 1)
        probability = ops.exp(log_p)
        if self.weight is not None:
            w = F.cast(self.weight, log_p.dtype)
            if sparse:
                w = F.rsum(ops.where(picked, F.reshape(w, (1, classes, 1)), 0.0), 1)
            else:
                w = F.reshape(w, (1, classes, 1))
            log_p = log_p * w
        modulation = ops.pow(1.0 - probability, self.gamma)
        if sparse:
            loss = F.rmean(-modulation * log_p, 1)
        else:
            loss = F.rmean(-modulation * F.cast(labels3, log_p.dtype) * log_p, -1)
        return self.get_loss(loss)


class DiceLoss(LossBase):
    """1 - 2 * sum(x * y) / (sum(x^2) + sum(y^2) + smooth), over all elements."""

    def __init__(self, smooth=1e-5):
        super().__init__()
        self.smooth = _float(smooth, "DiceLoss", "smooth")
        if self.smooth <= 0:
            raise ValueError(f"DiceLoss: smooth must be > 0, got {smooth}")

    def construct(self, logits, label):
        _check_tensors("DiceLoss", logits=logits, labels=label)
        if logits.dtype == mstype.uint8 or label.dtype == mstype.uint8:
            raise TypeError("DiceLoss: the dtype of logits and labels can not be uint8")
        if len(logits.shape) != len(label.shape):
            raise ValueError(f"DiceLoss: logits and labels must have the same rank, got shapes "
                             f"{tuple(logits.shape)} and {tuple(label.shape)}")
        x, y = F.reshape(logits, (-1,)), F.reshape(label, (-1,))
        intersection = F.rsum(x * y)
        union = F.rsum(x * x) + F.rsum(y * y)
        return 1 - (2 * intersection) / (union + self.smooth)


class MultiClassDiceLoss(LossBase):
    """The mean over classes (axis 1) of DiceLoss, after `activation` (softmax by default);
    weights (num_classes, dim) scale each class's loss; ignore_indiex skips one class."""

    _ACTIVATIONS = ("softmax", "logsoftmax", "relu", "relu6", "tanh", "sigmoid")

    def __init__(self, weights=None, ignore_indiex=None, activation="softmax"):
        super().__init__()
        self.binarydiceloss = DiceLoss(smooth=1e-5)
        self.weights = _tensor_or_none(weights, "MultiClassDiceLoss", "weights")
        if weights is not None and len(weights.shape) != 2:
            raise ValueError(f"MultiClassDiceLoss: weights must be 2-D, got shape "
                             f"{tuple(weights.shape)}")
        if ignore_indiex is not None and (isinstance(ignore_indiex, bool) or
                                          not isinstance(ignore_indiex, int)):
            raise TypeError(f"MultiClassDiceLoss: ignore_indiex must be an int or None, got "
                            f"{ignore_indiex!r}")
        self.ignore_indiex = ignore_indiex
        if isinstance(activation, str):
            if activation.lower() not in self._ACTIVATIONS:
                raise ValueError(f"MultiClassDiceLoss: activation must be one of "
                                 f"{self._ACTIVATIONS}, got {activation!r}")
            activation = get_activation(activation)
        if activation is not None and not isinstance(activation, Cell):
            raise TypeError(f"MultiClassDiceLoss: activation must be a str or a Cell, got "
                            f"{type(activation).__name__}")
        self.activation = activation

    def construct(self, logits, label):
        _check_tensors("MultiClassDiceLoss", logits=logits, labels=label)
        if tuple(logits.shape) != tuple(label.shape) or len(label.shape) < 2:
            raise ValueError(f"MultiClassDiceLoss: logits and labels must share a shape of "
                             f"rank >= 2, got {tuple(logits.shape)} and {tuple(label.shape)}")
        if self.activation is not None:
            logits = self.activation(logits)
        total = 0
        for i in range(label.shape[1]):
            if i == self.ignore_indiex:
                continue
            loss = self.binarydiceloss(logits[:, i], label[:, i])
            if self.weights is not None:
                loss = loss * self.weights[i]
            total = total + loss
        return total / label.shape[1]


def _reduction_arg(reduction, who):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{who}: reduction must be one of ('mean', 'sum', 'none'), got "
                         f"{reduction!r}")
    return reduction


class HingeEmbeddingLoss(LossBase):
    """x where labels is 1, max(0, margin - x) where it is -1."""

    def __init__(self, margin=1.0, reduction="mean"):
        super().__init__(_reduction_arg(reduction, "HingeEmbeddingLoss"))
        self.margin = _float(margin, "HingeEmbeddingLoss", "margin")

    def construct(self, logits, labels):
        return ops.hinge_embedding_loss(logits, labels, self.margin, self.reduction)


class GaussianNLLLoss(LossBase):
    """0.5 * (log(max(var, eps)) + (logits - labels)^2 / max(var, eps)) (+ const with full)."""

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(_reduction_arg(reduction, "GaussianNLLLoss"))
        self.eps = _float(eps, "GaussianNLLLoss", "eps")
        if self.eps <= 0:
            raise ValueError(f"GaussianNLLLoss: eps must be > 0, got {eps}")
        if not isinstance(full, bool):
            raise TypeError(f"GaussianNLLLoss: full must be a bool, got {full!r}")
        self.full = full

    def construct(self, logits, labels, var):
        return ops.gaussian_nll_loss(logits, labels, var, self.full, self.eps, self.reduction)


class MultiLabelSoftMarginLoss(LossBase):
    """Per sample, the class mean of the logistic losses of (N, C) scores and 0/1 targets."""

    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.weight = weight

    def construct(self, x, target):
        return ops.multilabel_soft_margin_loss(x, target, self.weight, self.reduction)


class MultiMarginLoss(LossBase):
    """Multi-class hinge loss of (N, C) scores against (N,) class indices."""

    def __init__(self, p=1, margin=1.0, reduction="mean", weight=None):
        super().__init__(_reduction_arg(reduction, "MultiMarginLoss"))
        if isinstance(p, bool) or p not in (1, 2):
            raise ValueError(f"MultiMarginLoss: p must be 1 or 2, got {p!r}")
        self.p, self.margin = p, _float(margin, "MultiMarginLoss", "margin")
        self.weight = _tensor_or_none(weight, "MultiMarginLoss", "weight")

    def construct(self, x, target, weight=None):
        weight = self.weight if self.weight is not None else weight
        return ops.multi_margin_loss(x, target, self.p, self.margin, weight, self.reduction)


class TripletMarginLoss(LossBase):
    """max(d(x, positive) - d(x, negative) + margin, 0) with p-norm distances."""

    def __init__(self, p=2, swap=False, eps=1e-06, reduction="mean", margin=1.0):
        super().__init__(_reduction_arg(reduction, "TripletMarginLoss"))
        self.p, self.swap, self.eps = p, swap, eps
        self.margin = _float(margin, "TripletMarginLoss", "margin")

    def construct(self, x, positive, negative, margin=1.0):
        # As MindSpore: the constructor's margin wins unless it is the default 1.0.
        if self.margin != 1.0:
            margin = self.margin
        if is_tensor(margin):
            margin = float(margin.item())
        return ops.triplet_margin_loss(x, positive, negative, margin, self.p, self.eps,
                                       self.swap, self.reduction)


class PoissonNLLLoss(LossBase):
    """exp(x) - target * x with log_input (else x - target * log(x + eps)); with full, the
    Stirling term target * log(target) - target + 0.5 * log(2 pi target) for targets > 1."""

    def __init__(self, log_input=True, full=False, eps=1e-08, reduction="mean"):
        super().__init__(reduction)
        self.log_input = check_flag(log_input, "PoissonNLLLoss", "log_input")
        self.full = check_flag(full, "PoissonNLLLoss", "full")
        self.eps = _float(eps, "PoissonNLLLoss", "eps")

    def construct(self, x, target):
        _check_tensors("PoissonNLLLoss", x=x, target=target)
        if len(x.shape) == 0 or len(target.shape) == 0:
            raise ValueError(f"PoissonNLLLoss: the inputs must be non-scalar, got shapes "
                             f"{tuple(x.shape)} and {tuple(target.shape)}")
        target = F.cast(target, x.dtype)
        if self.log_input:
            loss = ops.exp(x) - target * x
        else:
            loss = x - target * ops.log(x + self.eps)
        if self.full:
            t = ops.maximum(target, self.eps)
            stirling = t * ops.log(t) - t + 0.5 * ops.log(2 * math.pi * t)
            loss = loss + ops.where(target > 1, stirling, 0.0)
        return self.get_loss(loss)


def check_flag(value, who, name):
    if not isinstance(value, bool):
        raise TypeError(f"{who}: {name} must be a bool, got {value!r}")
    return value


class CTCLoss(LossBase):
    """Connectionist temporal classification loss of (T, N, C) (or unbatched (T, C))
    log-probabilities against (N, S) targets (ops.ctc_loss; only the loss is returned)."""

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(_reduction_arg(reduction, "CTCLoss"))
        if isinstance(blank, bool) or not isinstance(blank, int):
            raise TypeError(f"CTCLoss: blank must be an int, got {blank!r}")
        self.blank = blank
        self.zero_infinity = check_flag(zero_infinity, "CTCLoss", "zero_infinity")

    def construct(self, log_probs, targets, input_lengths, target_lengths):
        _check_tensors("CTCLoss", log_probs=log_probs, targets=targets)
        if len(log_probs.shape) == 2:
            if len(targets.shape) not in (1, 2) or (len(targets.shape) == 2 and
                                                    targets.shape[0] != 1):
                raise ValueError(f"CTCLoss: unbatched targets must be (S,) or (1, S), got shape "
                                 f"{tuple(targets.shape)}")
            if len(targets.shape) == 1:
                targets = ops.expand_dims(targets, 0)
            loss, _ = ops.ctc_loss(ops.expand_dims(log_probs, -2), targets, input_lengths,
                                   target_lengths, self.blank, self.reduction,
                                   self.zero_infinity)
            return ops.squeeze(loss, 0) if len(loss.shape) else loss
        loss, _ = ops.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                               self.reduction, self.zero_infinity)
        return loss
