"""Spatial functional ops composed of registry ops (gather, concat, matmul, pooling; their
gradients follow): pad, interpolate, adaptive and 1-D pooling, pixel_shuffle, unfold, dropout2d,
group_norm. MindSpore 2.x names and defaults (ops.interpolate follows PyTorch's index rules, as
MindSpore 2.x does). Index tables are computed from static shapes with NumPy and enter the graph
as constants."""
import math
import numbers

import numpy as np

from kiln.common import dtype as mstype
from kiln.common._arrays import tensor_of
from kiln.ops._core import call, int_arg, is_runtime_size, is_tensor, pair_attr, shape_attr
from kiln.ops.function.array import full, reshape, size_when_run
from kiln.ops.function.nn import avg_pool2d
from kiln.ops.function.reduce import mean as _mean

__all__ = [
    "pad", "interpolate", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "adaptive_max_pool2d",
    "avg_pool1d", "pixel_shuffle", "pixel_unshuffle", "unfold", "dropout1d", "dropout2d",
    "dropout3d", "group_norm", "channel_shuffle", "bias_add",
    "lp_pool1d", "lp_pool2d",
]

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _tensor(op, value, name="input"):
    if not is_tensor(value):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(value).__name__}")
    return value


def _index(values):
    return tensor_of(np.asarray(values, np.int64))


def _fill(shape, value, dtype):
    if any(is_runtime_size(s) for s in shape):
        return full(tuple(shape), value, dtype=dtype)  # sizes known when the graph runs
    return call("fill", (), (tuple(int(s) for s in shape), value, dtype._enum))


_TO_END = 2**63 - 1  # strided_slice's "to the end of the axis", whatever its size


def _slice_axis(x, axis, start, stop):
    shape = tuple(x.shape)
    begin = [0] * len(shape)
    end = [d if d >= 0 else _TO_END for d in shape]
    begin[axis], end[axis] = start, stop
    return call("strided_slice", (x,), (tuple(begin), tuple(end), (1,) * len(shape)))


# ---- pad ----

def pad_constant_axis(x, axis, before, after, value):
    size, cut = x.shape[axis], max(-after, 0)
    if before < 0 or after < 0:  # an unknown size (-1): stop counts from the end
        stop = size - cut if size >= 0 else (-cut if cut else _TO_END)
        x = _slice_axis(x, axis, max(-before, 0), stop)
    parts = []
    for amount in (before, after):
        shape = [size_when_run(x, d) for d in range(len(x.shape))]
        shape[axis] = max(amount, 0)
        parts.append(_fill(shape, value, x.dtype) if amount > 0 else None)
    pieces = [p for p in (parts[0], x, parts[1]) if p is not None]
    return call("concat", tuple(pieces), (axis,)) if len(pieces) > 1 else x


def _pad_source_index(i, size, mode):
    """The input index that padded position i (relative to the input's start) reads."""
    if mode == "replicate":
        return min(max(i, 0), size - 1)
    if mode == "circular":
        return i % size
    if mode == "symmetric":  # the edge element is repeated (nn.Pad's 'SYMMETRIC')
        j = i % (2 * size)
        return j if j < size else 2 * size - 1 - j
    period = 2 * (size - 1)  # reflect: the edge element is not repeated
    j = abs(i) % period if period else 0
    return period - j if j >= size else j


def pad_gather_axis(op, x, axis, before, after, mode):
    size = x.shape[axis]
    if mode == "reflect" and (before >= size or after >= size):
        raise ValueError(f"{op}: reflect padding ({before}, {after}) must be smaller than the "
                         f"padded dimension's size {size}")
    if mode == "circular" and (before > size or after > size):
        raise ValueError(f"{op}: circular padding ({before}, {after}) must not exceed the "
                         f"padded dimension's size {size}")
    index = [_pad_source_index(i, size, mode) for i in range(-before, size + after)]
    return call("gather", (x, _index(index)), (axis, 0))


def pad(input_x, padding, mode="constant", value=None):
    """Pads the last len(padding) // 2 dimensions: padding = (left, right) of the last one, then
    (top, bottom) of the one before, ...; negative amounts crop. mode: 'constant' (value, 0 by
    default), 'reflect', 'replicate' or 'circular'."""
    op = "pad"
    _tensor(op, input_x, "input_x")
    if not isinstance(padding, (tuple, list)) and not is_tensor(padding):
        raise TypeError(f"{op}: padding must be a tuple or list of ints, got "
                        f"{type(padding).__name__}")
    if is_tensor(padding):
        padding = tuple(int(v) for v in np.asarray(padding.asnumpy()).reshape(-1))
    amounts = shape_attr(padding, op, "padding")
    ndim = len(input_x.shape)
    if len(amounts) % 2 or len(amounts) // 2 > ndim:
        raise ValueError(f"{op}: padding must hold an even number of ints, at most 2 per "
                         f"dimension of the {ndim}-D input, got {len(amounts)}")
    if mode not in _PAD_MODES:
        raise ValueError(f"{op}: mode must be one of {_PAD_MODES}, got {mode!r}")
    if mode != "constant" and value is not None:
        raise ValueError(f"{op}: value is only used with mode 'constant', got mode {mode!r}")
    out = input_x
    for k in range(len(amounts) // 2):
        axis = ndim - 1 - k
        before, after = amounts[2 * k], amounts[2 * k + 1]
        if mode == "constant":
            out = pad_constant_axis(out, axis, before, after, 0 if value is None else value)
        elif before or after:
            if min(before, after) < 0:
                raise ValueError(f"{op}: negative padding needs mode 'constant', got {padding}")
            out = pad_gather_axis(op, out, axis, before, after, mode)
    return out


# ---- interpolate ----

def _axis_scale(in_size, out_size, scale, recompute):
    """in/out as PyTorch uses it: 1 / scale_factor when that was given (and not recomputed)."""
    if scale is not None and not recompute:
        return 1.0 / scale
    return in_size / out_size


def _nearest_index(in_size, out_size, scale):
    return [min(int(math.floor(i * scale)), in_size - 1) for i in range(out_size)]


def _linear_weights(in_size, out_size, scale, align_corners):
    src = np.arange(out_size, dtype=np.float64)
    if align_corners:
        src = src * ((in_size - 1) / (out_size - 1)) if out_size > 1 else src * 0
    else:
        src = np.maximum((src + 0.5) * scale - 0.5, 0.0)
    lo = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    hi = np.minimum(lo + 1, in_size - 1)
    return lo, hi, src - lo


def _output_sizes(op, x, size, scale_factor):
    spatial = tuple(x.shape[2:])
    if spatial and min(spatial) < 0:  # its sampling positions are computed from those sizes
        raise ValueError(f"{op}: the spatial dimensions of shape {tuple(x.shape)} have sizes "
                         f"known only when the graph runs (declared None), which {op} does not "
                         f"support; declare them or run {op} in PyNative mode")
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: exactly one of size and scale_factor must be given")
    if size is not None:
        sizes = shape_attr(size, op, "size")
        if len(sizes) == 1:
            sizes = sizes * len(spatial)
        if len(sizes) != len(spatial) or min(sizes) < 1:
            raise ValueError(f"{op}: size must give {len(spatial)} positive sizes for input "
                             f"shape {tuple(x.shape)}, got {size!r}")
        return sizes, (None,) * len(spatial)
    scales = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else \
        (scale_factor,) * len(spatial)
    if len(scales) != len(spatial) or any(isinstance(s, bool) or not isinstance(
            s, numbers.Real) or s <= 0 for s in scales):
        raise ValueError(f"{op}: scale_factor must be {len(spatial)} positive numbers for input "
                         f"shape {tuple(x.shape)}, got {scale_factor!r}")
    return tuple(int(math.floor(n * s)) for n, s in zip(spatial, scales)), scales


_LINEAR_MODES = {"linear": 3, "bilinear": 4, "trilinear": 5}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,  # noqa: A002,C901
                recompute_scale_factor=None):
    """Resizes the spatial dims of (N, C, ...): mode 'nearest' (3-5-D), 'linear' (3-D),
    'bilinear' (4-D), 'trilinear' (5-D) or 'area' (adaptive average pooling, 3-4-D)."""
    op = "interpolate"
    _tensor(op, input)
    ndim = len(input.shape)
    if ndim < 3:
        raise ValueError(f"{op}: input must be (N, C, ...) with at least one spatial dim, got "
                         f"shape {tuple(input.shape)}")
    if mode in _LINEAR_MODES and _LINEAR_MODES[mode] != ndim:
        raise ValueError(f"{op}: mode '{mode}' needs a {_LINEAR_MODES[mode]}-D input, got "
                         f"shape {tuple(input.shape)}")
    if mode not in ("nearest", "area") and mode not in _LINEAR_MODES:
        raise ValueError(f"{op}: mode must be 'nearest', 'linear', 'bilinear', 'trilinear' or "
                         f"'area' in kiln, got {mode!r}")
    if align_corners and mode not in _LINEAR_MODES:
        raise ValueError(f"{op}: align_corners is only valid with the linear modes, got mode "
                         f"{mode!r}")
    sizes, scales = _output_sizes(op, input, size, scale_factor)
    if mode == "area":
        if ndim == 3:
            return adaptive_avg_pool1d(input, sizes[0])
        if ndim == 4:
            return adaptive_avg_pool2d(input, sizes)
        raise ValueError(f"{op}: mode 'area' supports 3-D and 4-D inputs, got {ndim}-D")
    out = input
    for k, (out_size, scale) in enumerate(zip(sizes, scales)):
        axis = 2 + k
        in_size = input.shape[axis]
        s = _axis_scale(in_size, out_size, scale, recompute_scale_factor)
        if mode == "nearest":
            out = call("gather", (out, _index(_nearest_index(in_size, out_size, s))), (axis, 0))
            continue
        lo, hi, lam = _linear_weights(in_size, out_size, s, bool(align_corners))
        weight = call("cast", (tensor_of(np.asarray(lam, np.float64)),), (input.dtype._enum,))
        out = call("lerp_gather", (out, _index(lo), _index(hi), weight), (axis,))
    return out


# ---- adaptive and 1-D pooling ----

def _adaptive_bounds(in_size, out_size):
    """PyTorch's windows: [floor(i * in / out), ceil((i + 1) * in / out))."""
    return [(i * in_size // out_size, -(-(i + 1) * in_size // out_size))
            for i in range(out_size)]


def _averaging_matrix(in_size, out_size, dtype):
    """(in_size, out_size): column i averages window i, so x @ A pools the last axis."""
    a = np.zeros((in_size, out_size))
    for i, (lo, hi) in enumerate(_adaptive_bounds(in_size, out_size)):
        a[lo:hi, i] = 1.0 / (hi - lo)
    return call("cast", (tensor_of(a),), (dtype._enum,))


def _output_size(op, value, spatial):
    sizes = value if isinstance(value, (tuple, list)) else (value,) * len(spatial)
    if len(sizes) != len(spatial):
        raise ValueError(f"{op}: output_size must be an int or a tuple of {len(spatial)} ints "
                         f"(None keeps that input size), got {value!r}")
    out = tuple(n if s is None else int_arg(s, op, "output_size") for s, n in zip(sizes,
                                                                                spatial))
    if min(out) < 1:
        raise ValueError(f"{op}: output_size must be positive, got {value!r}")
    return out


def _float_spatial(op, x, ranks):
    _tensor(op, x)
    if len(x.shape) not in ranks:
        raise ValueError(f"{op}: input must be {' or '.join(f'{r}-D' for r in ranks)}, got "
                         f"shape {tuple(x.shape)}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: input must be a floating-point Tensor, got {x.dtype}")
    return x


def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    """Averages (N, C, L) / (C, L) over output_size windows of PyTorch's adaptive bounds."""
    op = "adaptive_avg_pool1d"
    x = _float_spatial(op, input, (2, 3))
    (out,) = _output_size(op, output_size, x.shape[-1:])
    return call("matmul", (x, _averaging_matrix(x.shape[-1], out, x.dtype)))


def _global_over_any_size(op, h, w, oh, ow):
    """True for a 1 x 1 output from a plane whose size a graph learns only when it runs (a
    reduction over the plane does it); a ValueError for another output from such a plane, whose
    windows need the size."""
    if h >= 0 and w >= 0:
        return False
    if (oh, ow) == (1, 1):
        return True
    raise ValueError(f"{op}: the windows of a ({oh}, {ow}) output need the input's spatial size, "
                     f"which a graph compiled for dimensions of any size learns only when it "
                     f"runs; declare that size (a (1, 1) output works for any size)")


def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """Averages (N, C, H, W) / (C, H, W) over output_size windows of any size: a product with an
    averaging matrix on each side (exact window means, differentiable)."""
    op = "adaptive_avg_pool2d"
    x = _float_spatial(op, input, (3, 4))
    h, w = x.shape[-2], x.shape[-1]
    oh, ow = _output_size(op, output_size, (h, w))
    if _global_over_any_size(op, h, w, oh, ow):
        return call("reduce_mean", (x,), ((-2, -1), True))
    rows = call("transpose", (_averaging_matrix(h, oh, x.dtype),), ((1, 0),))
    return call("matmul", (rows, call("matmul", (x, _averaging_matrix(w, ow, x.dtype)))))


def adaptive_avg_pool3d(input, output_size):  # noqa: A002
    """Averages (N, C, D, H, W) / (C, D, H, W) over output_size windows of any size: one
    averaging-matrix product per spatial axis."""
    op = "adaptive_avg_pool3d"
    x = _float_spatial(op, input, (4, 5))
    d, h, w = x.shape[-3:]
    od, oh, ow = _output_size(op, output_size, (d, h, w))
    rank = len(x.shape)
    y = call("matmul", (x, _averaging_matrix(w, ow, x.dtype)))           # pools W
    rows = call("transpose", (_averaging_matrix(h, oh, x.dtype),), ((1, 0),))
    y = call("matmul", (rows, y))                                         # pools H
    lead = tuple(range(rank - 3))
    moved = call("transpose", (y,), (lead + (rank - 2, rank - 1, rank - 3),))  # D last
    moved = call("matmul", (moved, _averaging_matrix(d, od, x.dtype)))   # pools D
    return call("transpose", (moved,), (lead + (rank - 1, rank - 3, rank - 2),))


def adaptive_max_pool2d(input, output_size, return_indices=False):  # noqa: A002
    """Maximum of (N, C, H, W) / (C, H, W) over output_size windows of PyTorch's bounds; with
    return_indices also each maximum's flat index h * W + w in its plane (int64)."""
    op = "adaptive_max_pool2d"
    x = _float_spatial(op, input, (3, 4))
    if not isinstance(return_indices, bool):
        raise TypeError(f"{op}: return_indices must be a bool, got {return_indices!r}")
    h, w = x.shape[-2], x.shape[-1]
    oh, ow = _output_size(op, output_size, (h, w))
    if not return_indices and _global_over_any_size(op, h, w, oh, ow):
        return call("reduce_max", (x,), ((-2, -1), True))
    rank = len(x.shape)
    lead = tuple(x.shape[:-2])
    rows, index_rows = [], []
    for top, bottom in _adaptive_bounds(h, oh):
        band = _slice_axis(x, rank - 2, top, bottom)
        cells, indices = [], []
        for left, right in _adaptive_bounds(w, ow):
            window = call("reshape", (_slice_axis(band, rank - 1, left, right),),
                          (lead + (-1,),))
            cells.append(call("reduce_max", (window,), ((rank - 2,), True)))
            if return_indices:
                local = call("argmax", (window,), (rank - 2, True))
                width = right - left
                row = call("add", (call("floor_div", (local, width)), top))
                col = call("add", (call("mod", (local, width)), left))
                indices.append(call("add", (call("mul", (row, w)), col)))
        rows.append(call("concat", tuple(cells), (rank - 2,)))
        if return_indices:
            index_rows.append(call("concat", tuple(indices), (rank - 2,)))
    out = call("reshape", (call("concat", tuple(rows), (rank - 2,)),), (lead + (oh, ow),))
    if not return_indices:
        return out
    flat = call("reshape", (call("concat", tuple(index_rows), (rank - 2,)),), (lead + (oh, ow),))
    return out, call("cast", (flat,), (mstype.int64._enum,))


def avg_pool1d(input_x, kernel_size=1, stride=1, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-D average pooling of (N, C, L) (or (C, L)): avg_pool2d over a height-1 plane."""
    op = "avg_pool1d"
    x = _float_spatial(op, input_x, (2, 3))
    k, s, p = (int_arg(v, op, name) for v, name in ((kernel_size, "kernel_size"),
                                                    (stride, "stride"), (padding, "padding")))
    y = avg_pool2d(call("expand_dims", (x,), (-2,)), (1, k), (1, s), (0, p), ceil_mode,
                   count_include_pad)
    return call("squeeze", (y,), ((-2 % len(y.shape),),))


def _lp_norm_type(op, norm_type):
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)):
        raise TypeError(f"For {op}, the type of 'norm_type' must be float or int, but got "
                        f"{type(norm_type)}")
    if norm_type == 0:
        raise ValueError(f"For {op}, the value of 'norm_type' can not be 0.")
    return float(norm_type)


def _lp_finish(out, p, window):
    """(window * mean(x^p)) ^ (1 / p), as MindSpore computes it."""
    return call("pow", (call("mul", (out, float(window))), 1.0 / p))


def lp_pool1d(x, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p) ^ (1 / p) for (N, C, L) or (C, L); stride defaults to
    kernel_size."""
    op = "lp_pool1d"
    p = _lp_norm_type(op, norm_type)
    k = int_arg(kernel_size, op, "kernel_size")
    s = k if stride is None else int_arg(stride, op, "stride")
    out = avg_pool1d(call("pow", (x, p)), k, s, 0, ceil_mode)
    return _lp_finish(out, p, k)


def lp_pool2d(x, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each kernel_size window of x^p) ^ (1 / p) for (N, C, H, W); stride defaults to
    kernel_size."""
    op = "lp_pool2d"
    p = _lp_norm_type(op, norm_type)
    k = pair_attr(kernel_size, op, "kernel_size")
    s = k if stride is None else pair_attr(stride, op, "stride")
    out = avg_pool2d(call("pow", (x, p)), k, s, 0, ceil_mode)
    return _lp_finish(out, p, k[0] * k[1])


# ---- rearrangements ----

def pixel_shuffle(input, upscale_factor):  # noqa: A002
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r)."""
    op = "pixel_shuffle"
    _tensor(op, input)
    r = int_arg(upscale_factor, op, "upscale_factor")
    shape = tuple(input.shape)
    if len(shape) < 3 or r < 1 or shape[-3] % (r * r):
        raise ValueError(f"{op}: input must be (*, C * r^2, H, W) with r = {r}, got shape "
                         f"{shape}")
    lead, (c, h, w) = shape[:-3], shape[-3:]
    n = len(lead)
    sizes = [size_when_run(input, i) for i in range(len(shape))]  # as the graph runs, if unknown
    lead, h, w = tuple(sizes[:-3]), sizes[-2], sizes[-1]
    x = reshape(input, lead + (c // (r * r), r, r, h, w))
    perm = tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2)
    x = call("transpose", (x,), (perm,))
    if min(shape) >= 0:
        return call("reshape", (x,), (lead + (c // (r * r), h * r, w * r),))
    # Sizes known when the graph runs: merge (w, r), then (h, r) beside the merged width.
    x = reshape(x, lead + (c // (r * r), h, r, -1))
    return reshape(x, lead + (c // (r * r), -1, size_when_run(x, -1)))


def pixel_unshuffle(input, downscale_factor):  # noqa: A002
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W), the inverse of pixel_shuffle."""
    op = "pixel_unshuffle"
    _tensor(op, input)
    r = int_arg(downscale_factor, op, "downscale_factor")
    shape = tuple(input.shape)
    if len(shape) < 3 or r < 1 or shape[-2] % r or shape[-1] % r:
        raise ValueError(f"{op}: input must be (*, C, H * r, W * r) with r = {r}, got shape "
                         f"{shape}")
    lead, (c, h, w) = shape[:-3], shape[-3:]
    n = len(lead)
    x = call("reshape", (input,), (lead + (c, h // r, r, w // r, r),))
    perm = tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3)
    x = call("transpose", (x,), (perm,))
    return call("reshape", (x,), (lead + (c * r * r, h // r, w // r),))


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """Sliding kh x kw patches of (N, C, H, W) -> (N, C * kh * kw, L), channel-major as
    PyTorch's (and MindSpore's ops.unfold) order: index c * kh * kw + i * kw + j."""
    op = "unfold"
    x = _float_spatial(op, input, (4,))
    (kh, kw), (dh, dw) = pair_attr(kernel_size, op, "kernel_size"), pair_attr(dilation, op,
                                                                             "dilation")
    (ph, pw), (sh, sw) = pair_attr(padding, op, "padding"), pair_attr(stride, op, "stride")
    if min(kh, kw, dh, dw, sh, sw) < 1 or min(ph, pw) < 0:
        raise ValueError(f"{op}: kernel_size, dilation and stride must be positive and padding "
                         f"non-negative")
    patches, oh, ow = image_patches(x, (kh, kw), (sh, sw), (dh, dw), (ph, ph, pw, pw))
    n, c = x.shape[0], x.shape[1]
    stacked = call("concat", tuple(call("expand_dims", (p,), (2,)) for p in patches), (2,))
    return call("reshape", (stacked,), ((n, c * kh * kw, oh * ow),))


def image_patches(x, kernel, stride, dilation, pads):
    """The kh * kw strided views (N, C, oh, ow) of x padded by (top, bottom, left, right) with
    zeros, in row-major kernel order, and oh, ow."""
    top, bottom, left, right = pads
    x = pad_constant_axis(x, 2, top, bottom, 0)
    x = pad_constant_axis(x, 3, left, right, 0)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    oh, ow = (h - (kh - 1) * dh - 1) // sh + 1, (w - (kw - 1) * dw - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"unfold: the kernel {kernel} (dilation {dilation}) does not fit the "
                         f"padded input of size {(h, w)}")
    views = [call("strided_slice", (x,), ((0, 0, i * dh, j * dw),
                                          (n, c, i * dh + (oh - 1) * sh + 1,
                                           j * dw + (ow - 1) * sw + 1), (1, 1, sh, sw)))
             for i in range(kh) for j in range(kw)]
    return views, oh, ow


# ---- dropout2d and group_norm ----

def _channel_dropout(op, input, p, training, ranks):  # noqa: A002
    """Zeroes whole channels (axis 1; axis 0 of an unbatched input, one rank lower) with
    probability p and scales the rest by 1 / (1 - p)."""
    _tensor(op, input)
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 <= p <= 1:
        raise ValueError(f"{op}: p must be a float in [0, 1], got {p!r}")
    if len(input.shape) not in ranks:
        raise ValueError(f"{op}: input must be {' or '.join(f'{r}-D' for r in ranks)}, got "
                         f"shape {tuple(input.shape)}")
    if not training or p == 0:
        return input
    if p == 1:
        return call("mul", (input, 0.0))
    shape = tuple(input.shape)
    batched = len(shape) == max(ranks)
    lead = shape[:2] if batched else shape[:1]
    mask_shape = lead + (1,) * (len(shape) - len(lead))
    mask, _ = call("dropout", (_fill(mask_shape, 1.0, input.dtype),), (float(p), None))
    return call("mul", (input, mask))


def dropout1d(input, p=0.5, training=True):  # noqa: A002
    """Channel dropout of (N, C, L) or (C, L)."""
    return _channel_dropout("dropout1d", input, p, training, (2, 3))


def dropout2d(input, p=0.5, training=True):  # noqa: A002
    """Channel dropout of (N, C, H, W): whole channels are zeroed with probability p, the rest
    scaled by 1 / (1 - p); the input itself when not training."""
    return _channel_dropout("dropout2d", input, p, training, (4,))


def dropout3d(input, p=0.5, training=True):  # noqa: A002
    """Channel dropout of (N, C, D, H, W)."""
    return _channel_dropout("dropout3d", input, p, training, (5,))


def channel_shuffle(x, groups):
    """(N, C, ...) with its channels regrouped: (groups, C / groups) -> (C / groups, groups)."""
    op = "channel_shuffle"
    _tensor(op, x, "x")
    groups = int_arg(groups, op, "groups")
    shape = tuple(x.shape)
    if groups < 1 or len(shape) < 3 or shape[1] % groups:
        raise ValueError(f"{op}: groups must be positive and divide the channels of an "
                         f"(N, C, ...) input, got groups={groups} for shape {shape}")
    y = call("reshape", (x,), ((shape[0], groups, shape[1] // groups, -1),))
    y = call("transpose", (y,), ((0, 2, 1, 3),))
    return call("reshape", (y,), (shape,))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """Normalizes (N, C, *) over each group of C / num_groups channels and the spatial dims
    (biased variance), then scales by weight and shifts by bias (both (C,))."""
    op = "group_norm"
    x = _tensor(op, input)
    groups = int_arg(num_groups, op, "num_groups")
    shape = tuple(x.shape)
    if len(shape) < 2 or groups < 1 or shape[1] % groups:
        raise ValueError(f"{op}: the channel count of input shape {shape} must be divisible "
                         f"by num_groups={groups}")
    c = shape[1]
    sizes = [size_when_run(x, i) for i in range(len(shape))]  # as the graph runs, if unknown
    grouped = reshape(x, (sizes[0], groups, -1))
    mean = _mean(grouped, 2, True)
    centered = call("sub", (grouped, mean))
    var = _mean(call("square", (centered,)), 2, True)
    y = reshape(call("mul", (centered, call("rsqrt", (call("add", (var, eps)),)))), tuple(sizes))
    affine = (c,) + (1,) * (len(shape) - 2)
    if weight is not None:
        y = call("mul", (y, call("reshape", (weight,), (affine,))))
    if bias is not None:
        y = call("add", (y, call("reshape", (bias,), (affine,))))
    return y



def bias_add(input_x, bias):
    """input_x + bias along axis 1 (MindSpore's BiasAdd, NCHW): input_x of rank 2 to 5, bias of
    shape (C,) and the same dtype."""
    _tensor("bias_add", input_x, "input_x")
    _tensor("bias_add", bias, "bias")
    rank = len(input_x.shape)
    if not 2 <= rank <= 5:
        raise ValueError(f"For primitive[BiasAdd], the rank of input_x must be in [2,5], but got "
                         f"{rank}.")
    if input_x.dtype != bias.dtype:
        raise TypeError(f"For primitive[BiasAdd], the input type must be same: bias "
                        f"{bias.dtype}, input_x {input_x.dtype}.")
    if len(bias.shape) != 1 or bias.shape[0] != input_x.shape[1]:
        raise ValueError(f"For 'BiasAdd', bias shape {tuple(bias.shape)} must be (C,) with C = "
                         f"input_x.shape[1] = {input_x.shape[1]}.")
    column = call("reshape", (bias,), ((-1,) + (1,) * (rank - 2),))
    return call("add", (input_x, column))
