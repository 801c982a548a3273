"""Functional building blocks for kiln.nn layers, losses and optimizers.

Every function here runs through registry ops (kiln.ops / kiln.ops._core), never NumPy on
tensor values, so autodiff (eager and on the graph) differentiates through them. Two pieces are
compositions rather than single ops: BatchNorm, which updates its running statistics itself
with assign (so the update is an explicit, ordered step in compiled graphs too), and average
pooling with asymmetric padding (pad_mode "same"), which the native op does not cover.
"""
import math

import numpy as np

from kiln import _C, ops
from kiln.common.tensor import Tensor
from kiln.ops import _core
from kiln.ops.function import array as _array


def _tensor(x):
    return x if isinstance(x, _C.TensorBase) else Tensor(x)


# ---- reductions and shapes (registry signatures are fixed; call them directly) ----

def rsum(x, axis=None, keepdims=False):
    return _core.call("reduce_sum", (x,), (_core.axes_attr(axis, "reduce_sum"), keepdims, None))


def rmean(x, axis=None, keepdims=False):
    return _core.call("reduce_mean", (x,), (_core.axes_attr(axis, "reduce_mean"), keepdims))


def rmax(x, axis=None, keepdims=False):
    return _core.call("reduce_max", (x,), (_core.axes_attr(axis, "reduce_max"), keepdims))


def argmax(x, axis=-1):
    return _core.call("argmax", (x,), (axis, False))


def reshape(x, shape):
    if any(_core.is_runtime_size(d) for d in shape):
        return _array.reshape(x, shape)  # sizes known when the graph runs
    return _core.call("reshape", (x,), (_core.shape_attr(shape, "reshape"),))


def transpose(x, perm):
    return _core.call("transpose", (x,), (tuple(perm),))


def matmul(a, b, transpose_b=False):
    return _core.call("matmul", (a, b), (False, transpose_b))


def concat(tensors, axis):
    return _core.call("concat", tuple(tensors), (axis,))


def slice_nd(x, begin, end, strides):
    return _core.call("strided_slice", (x,), (tuple(begin), tuple(end), tuple(strides)))


def full(shape, value, dtype):
    return _core.call("fill", (), (_core.shape_attr(shape, "fill"), value, dtype._enum))


def cast(x, dtype):
    return x if x.dtype == dtype else ops.cast(x, dtype)


# ---- dense / activations ----

def dense(x, weight, bias=None):
    """x @ weight.T + bias over the last axis (weight is (out, in), as MindSpore's Dense)."""
    # No reshape around the product for a batched x: the matmul kernel folds the batch into rows
    # itself, and the graph keeps matmul -> bias -> activation adjacent for fuse_epilogue.
    y = matmul(x, weight, transpose_b=True)
    if bias is not None:
        y = y + bias
    return y


def softmax(x, axis=-1):
    return ops.softmax(x, axis)


def log_softmax(x, axis=-1):
    return ops.log_softmax(x, axis)


# ---- normalisation ----

def layer_norm(x, begin_norm_axis, gamma, beta, eps):
    """Normalises over the axes from begin_norm_axis on; gamma/beta cover those axes."""
    ndim = len(x.shape)
    begin = begin_norm_axis % ndim if ndim else 0
    normalized_shape = tuple(x.shape[begin:])
    if tuple(gamma.shape) == normalized_shape:
        out = ops.layer_norm(x, normalized_shape, gamma, beta, eps)
        return out[0] if isinstance(out, tuple) else out
    # gamma/beta that broadcast over the normalized axes without matching them exactly.
    axes = tuple(range(begin, ndim))
    mean = rmean(x, axes, True)
    centered = x - mean
    var = rmean(centered * centered, axes, True)
    return centered * ops.rsqrt(var + eps) * gamma + beta


def batch_norm(x, gamma, beta, moving_mean, moving_var, training, momentum, eps):
    """Batch norm over channel axis 1 of an (N, C, ...) input, as one op and one gradient op.

    In training, normalises with the batch statistics and updates moving_mean/moving_var in
    place: moving = momentum * moving + (1 - momentum) * batch (MindSpore's convention; the
    variance put in the running estimate is unbiased). The op weighs the batch by its momentum
    argument (PyTorch's convention), hence 1 - momentum.
    """
    return ops.batch_norm(x, moving_mean, moving_var, gamma, beta, training, 1.0 - momentum, eps)


def _detach(x):
    """x without gradient history: ops.stop_gradient, or a copy through NumPy before it existed."""
    stop = getattr(ops, "stop_gradient", None)
    if stop is not None:
        return stop(x)
    return _tensor(np.array(x.asnumpy(), copy=True))


# ---- dropout ----

def dropout(x, p):
    """Zeroes each element with probability p and scales the rest by 1 / (1 - p)."""
    if p <= 0:
        return x
    if p >= 1:
        return x * 0
    out = ops.dropout(x, p, True)
    return out[0] if isinstance(out, tuple) else out


# ---- convolution and pooling ----

def pair(value, who, name):
    return _core.pair_attr(value, who, name)


def same_padding(size, kernel, stride, dilation):
    """(before, after) padding of one spatial axis so that out = ceil(size / stride)."""
    if size < 0 and stride > 1:  # the padding depends on the size there
        raise ValueError(f"pad_mode 'same' with stride {stride} pads by the spatial size, which a "
                         f"graph compiled for dimensions of any size learns only when it runs; "
                         f"declare that size, or use pad_mode 'pad' or 'valid'")
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def pad2d(x, pads, value=0.0):
    """Pads the last two axes by (top, bottom, left, right) with `value` (concat of constants)."""
    top, bottom, left, right = pads
    if not any(pads):
        return x
    n, c, h, w = x.shape
    parts = []
    if top:
        parts.append(full((n, c, top, w), value, x.dtype))
    parts.append(x)
    if bottom:
        parts.append(full((n, c, bottom, w), value, x.dtype))
    x = concat(parts, 2) if len(parts) > 1 else x
    h = h + top + bottom
    parts = []
    if left:
        parts.append(full((n, c, h, left), value, x.dtype))
    parts.append(x)
    if right:
        parts.append(full((n, c, h, right), value, x.dtype))
    return concat(parts, 3) if len(parts) > 1 else x


def _windows(x, kernel, stride, dilation):
    """The kh*kw strided views of a padded (N, C, H, W) input, each (N, C, Ho, Wo)."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    ho = (h - (kh - 1) * dh - 1) // sh + 1
    wo = (w - (kw - 1) * dw - 1) // sw + 1
    if ho <= 0 or wo <= 0:
        raise ValueError(f"the kernel {kernel} (dilation {dilation}) is larger than the padded "
                         f"input of spatial size {(h, w)}")
    views = []
    for i in range(kh):
        for j in range(kw):
            views.append(slice_nd(x, (0, 0, i * dh, j * dw),
                                  (n, c, i * dh + (ho - 1) * sh + 1, j * dw + (wo - 1) * sw + 1),
                                  (1, 1, sh, sw)))
    return views, ho, wo


def conv2d(x, weight, bias, stride, pads, dilation, groups):
    """2-D convolution (cross-correlation) of NCHW x with an (O, C/groups, kh, kw) weight.

    pads is (top, bottom, left, right).
    """
    top, bottom, left, right = pads
    if top == bottom and left == right:
        return ops.conv2d(x, weight, bias, stride, "pad", (top, bottom, left, right), dilation,
                          groups)
    return ops.conv2d(pad2d(x, pads), weight, bias, stride, "valid", 0, dilation, groups)


def max_pool2d(x, kernel, stride, pads, dilation, ceil_mode, return_indices=False):
    """Max pooling with (top, bottom, left, right) padding; with return_indices also each
    maximum's flat index h * W + w in the unpadded input plane."""
    top, bottom, left, right = pads
    if top == bottom and left == right:
        return ops.max_pool2d(x, kernel, stride, (top, left), dilation, return_indices,
                              ceil_mode)
    padded = pad2d(x, pads, -math.inf)
    out = ops.max_pool2d(padded, kernel, stride, 0, dilation, return_indices, ceil_mode)
    if not return_indices:
        return out
    # Indices into the padded plane -> into the input's: shift both coordinates back.
    y, indices = out
    width, padded_width = int(x.shape[-1]), int(padded.shape[-1])
    rows = ops.floor_divide(indices, padded_width) - top
    cols = indices - ops.floor_divide(indices, padded_width) * padded_width - left
    return y, rows * width + cols


def avg_pool2d(x, kernel, stride, pads, ceil_mode, count_include_pad, divisor_override,
               exclude_asymmetric_pad=False):
    """Average pooling; with exclude_asymmetric_pad (pad_mode 'same') padding is not counted."""
    top, bottom, left, right = pads
    if not exclude_asymmetric_pad and top == bottom and left == right:
        return ops.avg_pool2d(x, kernel, stride, (top, left), ceil_mode, count_include_pad,
                              divisor_override)
    if ceil_mode:
        raise ValueError("avg_pool2d: ceil_mode=True is not supported with asymmetric padding "
                         "(pad_mode='same'); use pad_mode='pad' with symmetric padding")
    views, ho, wo = _windows(pad2d(x, pads), kernel, stride, (1, 1))
    total = views[0]
    for v in views[1:]:
        total = total + v
    if divisor_override:
        return total / float(divisor_override)
    if count_include_pad and not exclude_asymmetric_pad or not any(pads):
        return total / float(kernel[0] * kernel[1])
    # Count only real (unpadded) elements in each window: pool a padded map of ones.
    h, w = x.shape[2], x.shape[3]
    ones = full((1, 1, h, w), 1.0, x.dtype)
    cviews, _, _ = _windows(pad2d(ones, pads), kernel, stride, (1, 1))
    count = cviews[0]
    for v in cviews[1:]:
        count = count + v
    return total / count
