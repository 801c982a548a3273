"""kiln.mint.nn.functional -- mindspore.mint.nn.functional over kiln's ops, with mint's
(PyTorch-style) argument names and orders; `inplace=True` writes the result into the input."""
from kiln import ops
from kiln.common._missing import missing_attribute as _missing_attribute

# the same signature and results as kiln.ops
sigmoid, tanh, hardsigmoid, hardswish = ops.sigmoid, ops.tanh, ops.hardsigmoid, ops.hardswish
softshrink, hardshrink, softplus = ops.softshrink, ops.hardshrink, ops.softplus
mse_loss, l1_loss = ops.mse_loss, ops.l1_loss
layer_norm, group_norm, prelu = ops.layer_norm, ops.group_norm, ops.prelu
interpolate, unfold, pixel_shuffle = ops.interpolate, ops.unfold, ops.pixel_shuffle
cross_entropy = ops.cross_entropy


def _result(input, out, inplace):  # noqa: A002 - mint's argument names
    return input.copy_(out) if inplace else out


def relu(input, inplace=False):  # noqa: A002
    return _result(input, ops.relu(input), inplace)


def relu6(input, inplace=False):  # noqa: A002
    return _result(input, ops.relu6(input), inplace)


def silu(input, inplace=False):  # noqa: A002
    return _result(input, ops.silu(input), inplace)


def gelu(input, approximate="none"):  # noqa: A002
    return ops.gelu(input, approximate)


def elu(input, alpha=1.0, inplace=False):  # noqa: A002
    return _result(input, ops.elu(input, alpha), inplace)


def selu(input):  # noqa: A002
    return ops.selu(input)


def mish(input):  # noqa: A002
    return ops.mish(input)


def logsigmoid(input):  # noqa: A002
    return ops.logsigmoid(input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):  # noqa: A002
    return _result(input, ops.hardtanh(input, min_val, max_val), inplace)


def leaky_relu(input, negative_slope=0.01):  # noqa: A002
    return ops.leaky_relu(input, negative_slope)


def threshold(input, threshold, value, inplace=False):  # noqa: A002
    return _result(input, ops.threshold(input, threshold, value), inplace)


def softmax(input, dim=None, dtype=None):  # noqa: A002
    return ops.softmax(input, -1 if dim is None else dim, dtype=dtype)


def log_softmax(input, dim=None, *, dtype=None):  # noqa: A002
    src = input if dtype is None else ops.cast(input, dtype)
    return ops.log_softmax(src, -1 if dim is None else dim)


def glu(input, dim=-1):  # noqa: A002
    return ops.glu(input, dim)


def dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002
    return _result(input, ops.dropout(input, p, training), inplace)


def linear(input, weight, bias=None):  # noqa: A002
    return ops.dense(input, weight, bias)


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):  # noqa: A002
    return ops.smooth_l1_loss(input, target, beta, reduction)


def binary_cross_entropy(input, target, weight=None, reduction="mean"):  # noqa: A002
    return ops.binary_cross_entropy(input, target, weight, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean",  # noqa: A002
                                     pos_weight=None):
    return ops.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):  # noqa: A002
    return ops.nll_loss(input, target, weight, ignore_index, reduction)


def one_hot(tensor, num_classes=-1):
    """int64 one-hot rows of `tensor`'s classes; num_classes -1: one more than the largest."""
    from kiln.common import dtype as mstype  # noqa: PLC0415

    if num_classes == -1:
        num_classes = int(ops.amax(tensor).item()) + 1
    return ops.cast(ops.one_hot(tensor, num_classes, 1, 0), mstype.int64)


def pad(input, pad, mode="constant", value=None):  # noqa: A002
    return ops.pad(input, pad, mode, value)


__getattr__ = _missing_attribute("kiln.mint.nn.functional", "mindspore.mint.nn.functional")
