"""kiln.mint.nn.functional -- mindspore.mint.nn.functional over kiln's ops, with mint's
(PyTorch-style) argument names and orders; `inplace=True` writes the result into the input."""
from kiln import ops
from kiln.common._missing import missing_attribute as _missing_attribute
from kiln.mint.nn._conv_pool import (  # noqa: F401 - mint.nn.functional's names
    adaptive_max_pool1d,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose2d,
    fold,
    max_pool2d,
)
from kiln.mint.nn._extra import grid_sample, kl_div, normalize  # noqa: F401
from kiln.mint.nn._extra import norm as norm_ext  # noqa: F401

# the same signature and results as kiln.ops
sigmoid, tanh, hardsigmoid, hardswish = ops.sigmoid, ops.tanh, ops.hardsigmoid, ops.hardswish
softshrink, hardshrink, softplus = ops.softshrink, ops.hardshrink, ops.softplus
mse_loss, l1_loss = ops.mse_loss, ops.l1_loss
layer_norm, group_norm, prelu = ops.layer_norm, ops.group_norm, ops.prelu
interpolate, unfold, pixel_shuffle = ops.interpolate, ops.unfold, ops.pixel_shuffle
cross_entropy = ops.cross_entropy
adaptive_avg_pool1d, adaptive_avg_pool2d = ops.adaptive_avg_pool1d, ops.adaptive_avg_pool2d
adaptive_avg_pool3d = adaptive_avg_pool3d_ext = ops.adaptive_avg_pool3d
adaptive_max_pool2d, max_unpool2d = ops.adaptive_max_pool2d, ops.max_unpool2d
broadcast_to, clamp = ops.broadcast_to, ops.clamp
batch_norm, embedding = ops.batch_norm, ops.embedding
cosine_embedding_loss, soft_margin_loss = ops.cosine_embedding_loss, ops.soft_margin_loss
silu_func, elu_ext = ops.silu, ops.elu


def _result(input, out, inplace):  # noqa: A002 - mint's argument names
    return input.copy_(out) if inplace else out


def relu(input, inplace=False):  # noqa: A002
    return _result(input, ops.relu(input), inplace)


def relu6(input, inplace=False):  # noqa: A002
    return _result(input, ops.relu6(input), inplace)


def silu(input, inplace=False):  # noqa: A002
    return _result(input, ops.silu(input), inplace)


def relu_(input):  # noqa: A002
    return input.copy_(ops.relu(input))


def inplace_silu(input):  # noqa: A002
    return input.copy_(ops.silu(input))


def sigmoid_(input):  # noqa: A002
    return input.copy_(ops.sigmoid(input))


def elu_(input, alpha=1.0):  # noqa: A002
    return input.copy_(ops.elu(input, alpha))


inplace_elu = elu_


def hardtanh_(input, min_val=-1, max_val=1):  # noqa: A002
    return input.copy_(ops.hardtanh(input, min_val, max_val))


def hardtanh_op(input, min_val=-1, max_val=1):  # noqa: A002
    return ops.hardtanh(input, min_val, max_val)


def threshold_(input, threshold, value):  # noqa: A002
    return input.copy_(ops.threshold(input, threshold, value))


def threshold_op(input, threshold, value):  # noqa: A002
    return ops.threshold(input, threshold, value)


def flatten(input, start_dim=0, end_dim=-1):  # noqa: A002
    return ops.flatten(input, start_dim=start_dim, end_dim=end_dim)


def dropout2d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    return _result(input, ops.dropout2d(input, p, training), inplace)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):  # noqa: A002
    return ops.interpolate(input, size, scale_factor, mode, align_corners)


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
