"""Loss functional ops composed of registry ops (their gradients follow): binary_cross_entropy
(with logits), smooth_l1_loss, huber_loss, kl_div, margin_ranking_loss, cosine_embedding_loss,
soft_margin_loss, hinge_embedding_loss, gaussian_nll_loss, multilabel_soft_margin_loss,
multi_margin_loss, triplet_margin_loss. MindSpore 2.x names, argument order and defaults; inputs
broadcast where MindSpore's do."""
import math
import numbers

from kiln.ops._core import call, dtype_attr, is_tensor
from kiln.ops.function.activation import _softplus_raw
from kiln.ops.function.array import one_hot_checked
from kiln.ops.function.reduce import mean as _mean
from kiln.ops.function.reduce import sum as _sum

__all__ = [
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "smooth_l1_loss", "huber_loss",
    "kl_div", "margin_ranking_loss", "cosine_embedding_loss", "soft_margin_loss",
    "hinge_embedding_loss", "gaussian_nll_loss", "multilabel_soft_margin_loss",
    "multi_margin_loss", "triplet_margin_loss",
]

_REDUCTIONS = ("none", "mean", "sum")
# MindSpore's BinaryCrossEntropy kernels add this inside both logarithms.
_BCE_EPS = 1e-12


def check_reduction(op, reduction, allowed=_REDUCTIONS):
    if not isinstance(reduction, str) or reduction not in allowed:
        raise ValueError(f"{op}: reduction must be one of {', '.join(map(repr, allowed))}, got "
                         f"{reduction!r}")
    return reduction


def reduce_loss(loss, reduction):
    if reduction == "mean":
        return _mean(loss)
    if reduction == "sum":
        return _sum(loss)
    return loss


def float_tensor(op, name, value):
    if not is_tensor(value):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(value).__name__}")
    if not value.dtype.is_floating_point:
        raise TypeError(f"{op}: {name} must be a floating-point Tensor, got {value.dtype}")
    return value


def _optional_float(op, name, value):
    return None if value is None else float_tensor(op, name, value)


def _same_shape(op, a, b, names):
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{op}: {names[0]} and {names[1]} must have the same shape, got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")


def _real(op, name, value, positive=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {name} must be a float, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{op}: {name} must be > 0, got {value}")
    return float(value)


def binary_cross_entropy(logits, labels, weight=None, reduction="mean"):
    """-weight * (y * log(x + 1e-12) + (1 - y) * log(1 - x + 1e-12)) for probabilities x
    (MindSpore's kernel adds 1e-12 inside the logs); logits and labels share a shape and weight
    broadcasts to it (MindSpore's shape check accepts that; its CPU kernel then reads the weight
    unbroadcast)."""
    op = "binary_cross_entropy"
    float_tensor(op, "logits", logits)
    float_tensor(op, "labels", labels)
    _optional_float(op, "weight", weight)
    check_reduction(op, reduction)
    _same_shape(op, logits, labels, ("logits", "labels"))
    pos = call("mul", (labels, call("log", (call("add", (logits, _BCE_EPS)),))))
    one_minus = call("sub", (1.0, logits))
    neg = call("mul", (call("sub", (1.0, labels)), call("log", (call("add", (one_minus,
                                                                               _BCE_EPS)),))))
    loss = call("neg", (call("add", (pos, neg)),))
    if weight is not None:
        loss = call("mul", (loss, weight))
        if tuple(loss.shape) != tuple(logits.shape):
            raise ValueError(f"{op}: weight of shape {tuple(weight.shape)} does not broadcast to "
                             f"the logits' shape {tuple(logits.shape)}")
    return reduce_loss(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,  # noqa: A002
                                     reduction="mean"):
    """-weight * (pos_weight * y * log(sigmoid(x)) + (1 - y) * log(1 - sigmoid(x))), computed
    as softplus terms so large |x| neither overflows nor loses the log. weight and pos_weight
    broadcast to the input's shape."""
    op = "binary_cross_entropy_with_logits"
    float_tensor(op, "input", input)
    float_tensor(op, "target", target)
    _optional_float(op, "weight", weight)
    _optional_float(op, "pos_weight", pos_weight)
    check_reduction(op, reduction)
    _same_shape(op, input, target, ("input", "target"))
    log_sig = call("neg", (_softplus_raw(call("neg", (input,))),))    # log(sigmoid(x))
    log_one_minus = call("neg", (_softplus_raw(input),))              # log(1 - sigmoid(x))
    pos = call("mul", (target, log_sig))
    if pos_weight is not None:
        pos = call("mul", (pos, pos_weight))
    loss = call("neg", (call("add", (pos, call("mul", (call("sub", (1.0, target)),
                                                        log_one_minus)))),))
    if weight is not None:
        loss = call("mul", (loss, weight))
    if tuple(loss.shape) != tuple(input.shape):
        raise ValueError(f"{op}: weight and pos_weight must broadcast to the input's shape "
                         f"{tuple(input.shape)}, got a result of shape {tuple(loss.shape)}")
    return reduce_loss(loss, reduction)


def _piecewise_quadratic(op, input, target, threshold):  # noqa: A002
    """|d| and whether |d| < threshold, for d = input - target (broadcast)."""
    float_tensor(op, "input", input)
    float_tensor(op, "target", target)
    diff = call("abs", (call("sub", (input, target)),))
    return diff, call("less", (diff, threshold))


def smooth_l1_loss(input, target, beta=1.0, reduction="none"):  # noqa: A002
    """0.5 * d^2 / beta where |d| < beta, else |d| - 0.5 * beta (d = input - target; input and
    target share a shape, as MindSpore's SmoothL1Loss requires)."""
    op = "smooth_l1_loss"
    beta = _real(op, "beta", beta, positive=True)
    check_reduction(op, reduction)
    float_tensor(op, "input", input)
    float_tensor(op, "target", target)
    _same_shape(op, input, target, ("input", "target"))
    diff, small = _piecewise_quadratic(op, input, target, beta)
    quad = call("div", (call("mul", (call("square", (diff,)), 0.5)), beta))
    return reduce_loss(call("where", (small, quad, call("sub", (diff, 0.5 * beta)))), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):  # noqa: A002
    """0.5 * d^2 where |d| < delta, else delta * (|d| - 0.5 * delta); input and target
    broadcast."""
    op = "huber_loss"
    delta = _real(op, "delta", delta, positive=True)
    check_reduction(op, reduction)
    diff, small = _piecewise_quadratic(op, input, target, delta)
    quad = call("mul", (call("square", (diff,)), 0.5))
    lin = call("mul", (call("sub", (diff, 0.5 * delta)), delta))
    return reduce_loss(call("where", (small, quad, lin)), reduction)


def kl_div(logits, labels, reduction="mean"):
    """labels * (log(labels) - logits), 0 where labels is 0; 'batchmean' divides the sum by the
    batch size (logits are log-probabilities, labels probabilities)."""
    op = "kl_div"
    float_tensor(op, "logits", logits)
    float_tensor(op, "labels", labels)
    check_reduction(op, reduction, _REDUCTIONS + ("batchmean",))
    positive = call("greater", (labels, 0.0))
    # log of a masked-out label is taken at 1 so that neither branch holds -inf or NaN.
    safe = call("where", (positive, labels, 1.0))
    xlogx = call("where", (positive, call("mul", (labels, call("log", (safe,)))), 0.0))
    loss = call("sub", (xlogx, call("mul", (labels, logits))))
    if reduction == "batchmean":
        batch = loss.shape[0] if len(loss.shape) else 1
        if batch < 0:  # a graph's dimension of any size: the batch it runs with
            batch = call("cast", (call("tensor_shape", (loss,))[0],), (dtype_attr(loss.dtype),))
        return call("div", (_sum(loss), batch if is_tensor(batch) else float(batch)))
    return reduce_loss(loss, reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin); all three share a shape and dtype."""
    op = "margin_ranking_loss"
    margin = _real(op, "margin", margin)
    check_reduction(op, reduction)
    for name, value in (("input1", input1), ("input2", input2), ("target", target)):
        float_tensor(op, name, value)
    _same_shape(op, input1, input2, ("input1", "input2"))
    _same_shape(op, input1, target, ("input1", "target"))
    if input1.dtype != input2.dtype or input1.dtype != target.dtype:
        raise TypeError(f"{op}: input1, input2 and target must share a dtype, got "
                        f"{input1.dtype}, {input2.dtype} and {target.dtype}")
    diff = call("sub", (input1, input2))
    loss = call("relu", (call("add", (call("neg", (call("mul", (target, diff)),)), margin)),))
    return reduce_loss(loss, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction="mean"):
    """Along axis 1: 1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it
    is -1, 0 elsewhere."""
    op = "cosine_embedding_loss"
    margin = _real(op, "margin", margin)
    if not -1.0 <= margin <= 1.0:
        raise ValueError(f"{op}: margin must be in [-1.0, 1.0], got {margin}")
    check_reduction(op, reduction)
    float_tensor(op, "input1", input1)
    float_tensor(op, "input2", input2)
    if not is_tensor(target):
        raise TypeError(f"{op}: target must be a Tensor, got {type(target).__name__}")
    _same_shape(op, input1, input2, ("input1", "input2"))
    if len(input1.shape) < 2:
        raise ValueError(f"{op}: inputs must have at least 2 dimensions (N, D, ...), got shape "
                         f"{tuple(input1.shape)}")
    expected = (input1.shape[0],) + tuple(input1.shape[2:])
    if tuple(target.shape) != expected:
        raise ValueError(f"{op}: target must have shape {expected} for inputs of shape "
                         f"{tuple(input1.shape)}, got {tuple(target.shape)}")
    prod = _sum(call("mul", (input1, input2)), 1)
    norms = call("mul", (call("sqrt", (_sum(call("square", (input1,)), 1),)),
                         call("sqrt", (_sum(call("square", (input2,)), 1),))))
    cosine = call("div", (prod, norms))
    pos = call("where", (call("equal", (target, 1)), call("sub", (1.0, cosine)), 0.0))
    neg_value = call("relu", (call("sub", (cosine, margin)),))
    neg = call("where", (call("equal", (target, -1)), neg_value, 0.0))
    return reduce_loss(call("add", (pos, neg)), reduction)


def soft_margin_loss(input, target, reduction="mean"):  # noqa: A002
    """log(1 + exp(-target * input)), without overflow; input and target share a shape."""
    op = "soft_margin_loss"
    float_tensor(op, "input", input)
    float_tensor(op, "target", target)
    check_reduction(op, reduction)
    _same_shape(op, input, target, ("input", "target"))
    return reduce_loss(_softplus_raw(call("neg", (call("mul", (target, input)),))), reduction)


def hinge_embedding_loss(inputs, targets, margin=1.0, reduction="mean"):
    """x where the target is 1, max(0, margin - x) where it is -1 (broadcast)."""
    op = "hinge_embedding_loss"
    float_tensor(op, "inputs", inputs)
    if not is_tensor(targets):
        raise TypeError(f"{op}: targets must be a Tensor, got {type(targets).__name__}")
    margin = _real(op, "margin", margin)
    check_reduction(op, reduction)
    neg = call("relu", (call("sub", (margin, inputs)),))
    loss = call("add", (call("where", (call("equal", (targets, 1)), inputs, 0.0)),
                        call("where", (call("equal", (targets, -1)), neg, 0.0))))
    return reduce_loss(loss, reduction)


def gaussian_nll_loss(x, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(max(var, eps)) + (x - target)^2 / max(var, eps)) (+ 0.5 * log(2 pi) with
    full); var may have one dimension fewer than x (or 1 there) and broadcasts."""
    op = "gaussian_nll_loss"
    for name, value in (("x", x), ("target", target), ("var", var)):
        float_tensor(op, name, value)
    if not isinstance(full, bool):
        raise TypeError(f"{op}: full must be a bool, got {full!r}")
    eps = _real(op, "eps", eps, positive=True)
    check_reduction(op, reduction)
    if len(var.shape) == len(x.shape) - 1:
        var = call("expand_dims", (var,), (-1,))
    clamped = call("maximum", (var, eps))
    sq = call("square", (call("sub", (x, target)),))
    loss = call("mul", (call("add", (call("log", (clamped,)), call("div", (sq, clamped)))), 0.5))
    if full:
        loss = call("add", (loss, 0.5 * math.log(2 * math.pi)))
    return reduce_loss(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, reduction="mean"):  # noqa: A002
    """Per sample, the mean over classes of -(y log sigmoid(x) + (1 - y) log sigmoid(-x)),
    each class scaled by weight; input and target (N, C)."""
    op = "multilabel_soft_margin_loss"
    float_tensor(op, "input", input)
    float_tensor(op, "target", target)
    check_reduction(op, reduction)
    if len(input.shape) != 2 or tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"{op}: input and target must share a 2-D shape (N, C), got "
                         f"{tuple(input.shape)} and {tuple(target.shape)}")
    log_sig = call("neg", (_softplus_raw(call("neg", (input,))),))
    log_one_minus = call("neg", (_softplus_raw(input),))
    terms = call("add", (call("mul", (target, log_sig)),
                         call("mul", (call("sub", (1.0, target)), log_one_minus))))
    if weight is not None:
        terms = call("mul", (terms, weight))
    loss = call("neg", (_mean(terms, 1),))
    return reduce_loss(loss, reduction)


def multi_margin_loss(input, target, p=1, margin=1, weight=None, reduction="mean"):  # noqa: A002
    """Per sample: the sum over classes i != y of max(0, margin - x[y] + x[i])^p * w[y],
    divided by C (target (N,) class indices, input (N, C))."""
    op = "multi_margin_loss"
    float_tensor(op, "input", input)
    if not is_tensor(target) or target.dtype.is_floating_point:
        raise TypeError(f"{op}: target must be an integer Tensor")
    if isinstance(p, bool) or p not in (1, 2):
        raise ValueError(f"{op}: p must be 1 or 2, got {p!r}")
    margin = _real(op, "margin", margin)
    check_reduction(op, reduction)
    if len(input.shape) != 2 or tuple(target.shape) != (input.shape[0],):
        raise ValueError(f"{op}: input must be (N, C) and target (N,), got "
                         f"{tuple(input.shape)} and {tuple(target.shape)}")
    classes = input.shape[1]
    hot = call("cast", (one_hot_checked(target, classes, 1, 0, -1, f"{op}: target class"),),
               (input.dtype._enum,))
    picked = _sum(call("mul", (input, hot)), 1, True)
    hinge = call("relu", (call("add", (call("sub", (margin, picked)), input)),))
    if p == 2:
        hinge = call("square", (hinge,))
    if weight is not None:
        hinge = call("mul", (hinge, _sum(call("mul", (hot, weight)), 1, True)))
    hinge = call("mul", (hinge, call("sub", (1.0, hot))))     # i == y contributes nothing
    return reduce_loss(call("div", (_sum(hinge, 1), float(classes))), reduction)


def _pairwise_distance(a, b, p, eps):
    diff = call("add", (call("sub", (a, b)), eps))
    if p == 1:
        return _sum(call("abs", (diff,)), -1)
    if p == 2:
        return call("sqrt", (_sum(call("square", (diff,)), -1),))
    return call("pow", (_sum(call("pow", (call("abs", (diff,)), float(p))), -1), 1.0 / p))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False,
                        reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) with d the p-norm of (x - y + eps) over the last
    axis; swap uses min(d(a, n), d(p, n))."""
    op = "triplet_margin_loss"
    for name, value in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        float_tensor(op, name, value)
    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        raise TypeError(f"{op}: p must be a positive int, got {p!r}")
    eps = _real(op, "eps", eps)
    if not isinstance(swap, bool):
        raise TypeError(f"{op}: swap must be a bool, got {swap!r}")
    check_reduction(op, reduction)
    d_pos = _pairwise_distance(anchor, positive, p, eps)
    d_neg = _pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = call("minimum", (d_neg, _pairwise_distance(positive, negative, p, eps)))
    loss = call("relu", (call("add", (call("sub", (d_pos, d_neg)), margin)),))
    return reduce_loss(loss, reduction)
