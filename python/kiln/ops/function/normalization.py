"""Normalization and loss functional ops: layer_norm, batch_norm, dropout, cross_entropy,
nll_loss, mse_loss and l1_loss (MindSpore 2.x signatures, PyTorch-compatible semantics)."""
import numbers

from kiln.common import dtype as mstype
from kiln.ops._core import call, int_arg, shape_attr
from kiln.ops.function import elementwise as _ew
from kiln.ops.function.array import one_hot, one_hot_checked, reshape
from kiln.ops.function.reduce import _check_tensor
from kiln.ops.function.reduce import mean as _mean
from kiln.ops.function.reduce import sum as _sum

__all__ = [
    "layer_norm", "batch_norm", "dropout", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
]

_REDUCTIONS = ("none", "mean", "sum")


def _optional_tensor(op, name, value):
    if value is not None:
        _check_tensor(op, name, value)
    return value


def _number(op, name, value, low=None, high=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {name} must be a number, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{op}: {name} must be in [{low}, {high}], got {value!r}")
    return float(value)


def _reduction(op, reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of 'none', 'mean' or 'sum', "
                         f"got {reduction!r}")
    return reduction


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """Normalizes over the trailing `normalized_shape` dims: (x - mean) / sqrt(var + eps),
    then scales by weight and shifts by bias when given."""
    _check_tensor("layer_norm", "input", input)
    normalized_shape = shape_attr(normalized_shape, "layer_norm", "normalized_shape")
    if not normalized_shape:
        raise ValueError("layer_norm: normalized_shape must not be empty")
    shape = tuple(input.shape)
    k = len(normalized_shape)
    if k > len(shape) or shape[len(shape) - k:] != normalized_shape:
        raise ValueError(f"layer_norm: normalized_shape {normalized_shape} does not match the "
                         f"trailing dimensions of input shape {shape}")
    _optional_tensor("layer_norm", "weight", weight)
    _optional_tensor("layer_norm", "bias", bias)
    eps = _number("layer_norm", "eps", eps, low=0)
    y, _, _ = call("layer_norm", (input, weight, bias), (len(shape) - len(normalized_shape), eps))
    return y


def batch_norm(input_x, running_mean, running_var, weight, bias, training=False, momentum=0.1,
               eps=1e-05):
    """Batch normalization over axis 1 of (N, C, ...). In training it normalizes with the
    batch statistics and updates running_mean/running_var in place:
    running = (1 - momentum) * running + momentum * batch (unbiased variance)."""
    op = "batch_norm"
    _check_tensor(op, "input_x", input_x)
    for name, value in (("running_mean", running_mean), ("running_var", running_var),
                        ("weight", weight), ("bias", bias)):
        _optional_tensor(op, name, value)
    if not isinstance(training, bool):
        raise TypeError(f"{op}: training must be a bool, got {training!r}")
    momentum = _number(op, "momentum", momentum, 0, 1)
    eps = _number(op, "eps", eps, low=0)
    inputs = (input_x, running_mean, running_var, weight, bias)
    y, _, _ = call(op, inputs, (training, momentum, eps))
    return y


def dropout(input, p=0.5, training=True, seed=None):  # noqa: A002
    """Zeroes each element with probability p and scales the rest by 1 / (1 - p); the input
    itself when not training. set_seed (or `seed`) makes the mask reproducible."""
    _check_tensor("dropout", "input", input)
    p = _number("dropout", "p", p, 0, 1)
    seed = None if seed is None else int_arg(seed, "dropout", "seed")
    if seed is not None and seed < 0:
        raise ValueError(f"dropout: seed must be None or a non-negative int, got {seed!r}")
    if not training:
        return input
    y, _ = call("dropout", (input,), (p, seed))
    return y


def _reduce(loss, reduction):
    if reduction == "sum":
        return _sum(loss)
    if reduction == "mean":
        return _mean(loss)
    return loss


def mse_loss(input, target, reduction="mean"):  # noqa: A002
    """(input - target)^2, broadcast, then reduced."""
    _check_tensor("mse_loss", "input", input)
    _reduction("mse_loss", reduction)
    return _reduce(_ew.square(_ew.sub(input, target)), reduction)


def l1_loss(input, target, reduction="mean"):  # noqa: A002
    """|input - target|, broadcast, then reduced."""
    _check_tensor("l1_loss", "input", input)
    _reduction("l1_loss", reduction)
    return _reduce(_ew.abs(_ew.sub(input, target)), reduction)


def _class_axis(op, input):
    """The class axis: 0 for a (C,) input, else 1 for (N, C) or (N, C, d1, ...)."""
    if input.ndim == 0:
        raise ValueError(f"{op}: input must have a class dimension, got shape {tuple(input.shape)}")
    return 0 if input.ndim == 1 else 1


def _loss_args(op, input, target, weight, reduction, label_smoothing):
    _check_tensor(op, "input", input)
    _check_tensor(op, "target", target)
    _optional_tensor(op, "weight", weight)
    _reduction(op, reduction)
    label_smoothing = _number(op, "label_smoothing", label_smoothing, 0, 1)
    axis = _class_axis(op, input)
    classes = input.shape[axis]
    if weight is not None and tuple(weight.shape) != (classes,):
        raise ValueError(f"{op}: weight must have shape ({classes},) for input shape "
                         f"{tuple(input.shape)}, got {tuple(weight.shape)}")
    return axis, classes, label_smoothing


def _along_classes(weight, ndim, axis):
    """weight (C,) shaped to broadcast along the class axis of an ndim-dimensional input."""
    if ndim - axis == 1:
        return weight
    return reshape(weight, (weight.shape[0],) + (1,) * (ndim - axis - 1))


def nll_loss(inputs, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Negative log-likelihood of class-index targets given log-probabilities `inputs`
    ((C,), (N, C) or (N, C, d1, ...)). Targets equal to ignore_index contribute nothing; the
    mean divides by the summed weights of the counted targets (PyTorch's rule)."""
    op = "nll_loss"
    axis, classes, smoothing = _loss_args(op, inputs, target, weight, reduction, label_smoothing)
    if target.dtype.is_floating_point or target.dtype == mstype.bool_:
        raise TypeError(f"{op}: target must hold integer class indices, got {target.dtype}")
    ignore_index = int_arg(ignore_index, op, "ignore_index")
    expected = tuple(inputs.shape[:axis]) + tuple(inputs.shape[axis + 1:])
    if tuple(target.shape) != expected:
        raise ValueError(f"{op}: target shape {tuple(target.shape)} does not match input shape "
                         f"{tuple(inputs.shape)} (expected {expected})")
    return _nll(op, inputs, target, weight, ignore_index, reduction, smoothing, axis, classes)


def _nll(op, logp, target, weight, ignore_index, reduction, smoothing, axis, classes):
    dtype = logp.dtype
    valid = _ew.not_equal(target, ignore_index)
    safe = _ew.where(valid, target, 0)
    # Select with `where`, not multiply: 0 * -inf (a masked-out class) would give NaN. A class
    # outside [0, classes) would select nothing: the one_hot kernel raises for it in both modes.
    hot_axis = axis if logp.ndim > 1 else -1
    picked_mask = _ew.cast(one_hot_checked(safe, classes, 1, 0, hot_axis,
                                           f"{op}: target class"), mstype.bool_)
    picked = _sum(_ew.where(picked_mask, logp, 0.0), axis)
    counted = _ew.cast(valid, dtype)
    if weight is None:
        w = counted
    else:
        last_mask = _ew.cast(one_hot(safe, classes, 1, 0, -1), mstype.bool_)
        w = _ew.mul(_sum(_ew.where(last_mask, _ew.cast(weight, dtype), 0.0), -1), counted)
    loss = _ew.neg(_ew.mul(picked, w))
    if reduction == "mean":
        total = _sum(w)
        loss = _ew.div(_sum(loss), total)
    elif reduction == "sum":
        loss = _sum(loss)
    if smoothing == 0:
        return loss
    # PyTorch's label smoothing: mix in the (weighted) mean over classes of -log p.
    scaled = logp if weight is None else _ew.mul(logp, _along_classes(_ew.cast(weight, dtype),
                                                                      logp.ndim, axis))
    smooth = _ew.mul(_ew.neg(_sum(scaled, axis)), counted)
    if reduction == "mean":
        smooth = _ew.div(_sum(smooth), total)
    elif reduction == "sum":
        smooth = _sum(smooth)
    return _ew.add(_ew.mul(loss, 1.0 - smoothing), _ew.mul(smooth, smoothing / classes))


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",  # noqa: A002
                  label_smoothing=0.0):
    """Cross entropy of logits `input` ((C,), (N, C) or (N, C, d1, ...)) with either class-index
    targets (integer, the input's shape without the class axis) or class probabilities (float,
    the input's shape). Matches PyTorch's and MindSpore's definitions, label smoothing included."""
    op = "cross_entropy"
    axis, classes, smoothing = _loss_args(op, input, target, weight, reduction, label_smoothing)
    logp = call("log_softmax", (input,), (axis,))
    if not target.dtype.is_floating_point:
        if target.dtype == mstype.bool_:
            raise TypeError(f"{op}: target must hold class indices or probabilities, got bool")
        ignore_index = int_arg(ignore_index, op, "ignore_index")
        expected = tuple(input.shape[:axis]) + tuple(input.shape[axis + 1:])
        if tuple(target.shape) != expected:
            raise ValueError(f"{op}: target shape {tuple(target.shape)} does not match input "
                             f"shape {tuple(input.shape)} (expected {expected} for class indices)")
        return _nll(op, logp, target, weight, ignore_index, reduction, smoothing, axis, classes)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"{op}: probability target shape {tuple(target.shape)} must equal input "
                         f"shape {tuple(input.shape)}")
    dtype = logp.dtype
    target = _ew.cast(target, dtype)
    if smoothing > 0:
        target = _ew.add(_ew.mul(target, 1.0 - smoothing), smoothing / classes)
    terms = _ew.mul(logp, target)
    if weight is not None:
        terms = _ew.mul(terms, _along_classes(_ew.cast(weight, dtype), logp.ndim, axis))
    loss = _ew.neg(_sum(terms, axis))
    return _reduce(loss, reduction)
