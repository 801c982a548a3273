"""Loss functional ops composed of registry ops (their gradients follow): binary_cross_entropy
(with logits), smooth_l1_loss, huber_loss, kl_div, margin_ranking_loss, cosine_embedding_loss,
soft_margin_loss. MindSpore 2.x names, argument order and defaults; inputs broadcast where
MindSpore's do."""
import numbers

from kiln.ops._core import call, is_tensor
from kiln.ops.function.activation import _softplus_raw
from kiln.ops.function.reduce import mean as _mean
from kiln.ops.function.reduce import sum as _sum

__all__ = [
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "smooth_l1_loss", "huber_loss",
    "kl_div", "margin_ranking_loss", "cosine_embedding_loss", "soft_margin_loss",
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
    (MindSpore's kernel adds 1e-12 inside the logs); logits, labels and weight share a shape."""
    op = "binary_cross_entropy"
    float_tensor(op, "logits", logits)
    float_tensor(op, "labels", labels)
    _optional_float(op, "weight", weight)
    check_reduction(op, reduction)
    _same_shape(op, logits, labels, ("logits", "labels"))
    if weight is not None:
        _same_shape(op, logits, weight, ("logits", "weight"))
    pos = call("mul", (labels, call("log", (call("add", (logits, _BCE_EPS)),))))
    one_minus = call("sub", (1.0, logits))
    neg = call("mul", (call("sub", (1.0, labels)), call("log", (call("add", (one_minus,
                                                                               _BCE_EPS)),))))
    loss = call("neg", (call("add", (pos, neg)),))
    if weight is not None:
        loss = call("mul", (loss, weight))
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
        return call("div", (_sum(loss), float(batch)))
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
