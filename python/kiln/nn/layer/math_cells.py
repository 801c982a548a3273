"""Small math and utility Cells with MindSpore's names and arguments: OneHot, Tril, Triu, Roll,
Moments, MatMul, Norm, ClipByNorm, ReduceLogSumExp, L1Regularizer, ImageGradients."""
import math
import numbers

from kiln import ops
from kiln.common import dtype as mstype
from kiln.nn import _functional as F
from kiln.nn.cell import Cell

__all__ = ["OneHot", "Tril", "Triu", "Roll", "Moments", "MatMul", "Norm", "ClipByNorm",
           "ReduceLogSumExp", "L1Regularizer", "ImageGradients"]


class OneHot(Cell):
    """one_hot(indices, depth, on_value, off_value, axis) in `dtype`."""

    def __init__(self, axis=-1, depth=1, on_value=1.0, off_value=0.0, dtype=mstype.float32):
        super().__init__()
        self.axis, self.depth = axis, depth
        self.on_value, self.off_value, self.dtype = on_value, off_value, dtype

    def construct(self, indices):
        return ops.cast(ops.one_hot(indices, self.depth, self.on_value, self.off_value,
                                    self.axis), self.dtype)


class Tril(Cell):
    """The lower triangle of x's last two axes below diagonal k (others 0)."""

    def construct(self, x, k=0):
        return ops.tril(x, k)


class Triu(Cell):
    """The upper triangle of x's last two axes above diagonal k (others 0)."""

    def construct(self, x, k=0):
        return ops.triu(x, k)


class Roll(Cell):
    """x with its elements shifted by shift along axis (ints or equal-length tuples)."""

    def __init__(self, shift, axis):
        super().__init__()
        for name, value in (("shift", shift), ("axis", axis)):
            if not isinstance(value, (int, tuple, list)) or isinstance(value, bool):
                raise TypeError(f"Roll: {name} must be an int, tuple or list, got {value!r}")
        self.shift = tuple(shift) if isinstance(shift, (tuple, list)) else (shift,)
        self.axis = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        if len(self.shift) != len(self.axis):
            raise ValueError(f"Roll: shift and axis must have the same length, got {shift!r} "
                             f"and {axis!r}")

    def construct(self, input_x):
        return ops.roll(input_x, self.shift, self.axis)


class Moments(Cell):
    """(mean, variance) over axis (biased; the variance's mean is not differentiated, as
    MindSpore's stop_gradient); float16 computed in float32."""

    def __init__(self, axis=None, keep_dims=None):
        super().__init__()
        self.axis = () if axis is None else axis
        self.keep_dims = bool(keep_dims)

    def construct(self, x):
        half = x.dtype == mstype.float16
        if half:
            x = ops.cast(x, mstype.float32)
        axis = self.axis if self.axis != () else None
        mean = F.rmean(x, axis, True)
        var = F.rmean(ops.square(x - ops.stop_gradient(mean)), axis, True)
        if not self.keep_dims:
            mean, var = F.rmean(mean, axis), F.rmean(var, axis)
        if half:
            mean, var = ops.cast(mean, mstype.float16), ops.cast(var, mstype.float16)
        return mean, var


class MatMul(Cell):
    """x1 @ x2 with optional transposes of the last two axes; batch axes broadcast and 1-D
    operands act as vectors."""

    def __init__(self, transpose_x1=False, transpose_x2=False):
        super().__init__()
        self.transpose_x1, self.transpose_x2 = transpose_x1, transpose_x2

    def construct(self, x1, x2):
        if self.transpose_x1 and len(x1.shape) > 1:
            x1 = ops.swapaxes(x1, -1, -2)
        if self.transpose_x2 and len(x2.shape) > 1:
            x2 = ops.swapaxes(x2, -1, -2)
        return ops.matmul(x1, x2)


class Norm(Cell):
    """sqrt(sum(x^2)) over axis (all axes when ())."""

    def __init__(self, axis=(), keep_dims=False):
        super().__init__()
        if not isinstance(keep_dims, bool):
            raise TypeError(f"Norm: keep_dims must be a bool, got {keep_dims!r}")
        self.axis, self.keep_dims = axis, keep_dims

    def construct(self, x):
        axis = None if self.axis == () else self.axis
        return ops.sqrt(F.rsum(ops.square(x), axis, self.keep_dims))


class ClipByNorm(Cell):
    """x scaled so that its L2 norm over `axis` (every axis when None) is at most clip_norm:
    x * clip_norm / max(norm, clip_norm), in x's dtype. Where the norm is 0, x comes back as it
    is, and the gradient stays finite (the square root is never taken of 0)."""

    def __init__(self, axis=None):
        super().__init__()
        ok = axis is None or isinstance(axis, int) and not isinstance(axis, bool) or (
            isinstance(axis, (tuple, list)) and all(isinstance(a, int) for a in axis))
        if not ok:
            raise TypeError(f"ClipByNorm: axis must be None, an int or a tuple of ints, got "
                            f"{axis!r}")
        self.axis = tuple(axis) if isinstance(axis, list) else axis

    def construct(self, x, clip_norm):
        if not ops.is_tensor(x) or not x.dtype.is_floating_point:
            raise TypeError("ClipByNorm: x must be a floating-point Tensor")
        squares = F.rsum(ops.square(x), self.axis, True)
        positive = squares > 0
        norm = ops.where(positive, ops.sqrt(ops.where(positive, squares, 1.0)), squares)
        clip = ops.cast(clip_norm, x.dtype) if ops.is_tensor(clip_norm) else clip_norm
        return x * clip / ops.maximum(norm, clip)


class ReduceLogSumExp(Cell):
    """log(sum(exp(x - max(x)), axis)) + max(x), max over all of x (MindSpore's form)."""

    def __init__(self, axis, keep_dims=False):
        super().__init__()
        self.axis, self.keep_dims = axis, keep_dims

    def construct(self, x):
        peak = F.rmax(x)
        return ops.log(F.rsum(ops.exp(x - peak), self.axis, self.keep_dims)) + peak


class L1Regularizer(Cell):
    """scale * sum(|weights|)."""

    def __init__(self, scale):
        super().__init__()
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
            raise TypeError(f"L1Regularizer: scale must be a number, got {scale!r}")
        if scale <= 0 or math.isinf(scale) or math.isnan(scale):
            raise ValueError(f"L1Regularizer: scale must be a finite number > 0, got {scale}")
        self.scale = float(scale)

    def construct(self, weights):
        return F.rsum(ops.abs(weights)) * self.scale


class ImageGradients(Cell):
    """(dy, dx): forward differences of (N, C, H, W) images along H and W, 0 in the last
    row / column."""

    def construct(self, images):
        if len(images.shape) != 4:
            raise ValueError(f"ImageGradients: images must be (N, C, H, W), got shape "
                             f"{tuple(images.shape)}")
        zero = ops.zeros_like(images)
        dy = ops.pad(images[:, :, 1:, :] - images[:, :, :-1, :], (0, 0, 0, 1)) \
            if images.shape[2] > 1 else zero
        dx = ops.pad(images[:, :, :, 1:] - images[:, :, :, :-1], (0, 1)) \
            if images.shape[3] > 1 else zero
        return dy, dx
