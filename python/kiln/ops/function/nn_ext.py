"""Network helpers composed of registry ops: unique values, rotary embeddings, fused-norm
variants, bilinear dense, mirror padding, local response normalization, Gumbel softmax, max
unpooling, 1-D adaptive max pooling and box IoU."""
import numpy as np

from kiln.common import dtype as mstype
from kiln.common._arrays import tensor_of
from kiln.ops._core import call, dtype_attr, int_arg, is_tensor
from kiln.ops.function.array import _axis, concat, narrow, reshape, transpose

__all__ = ["unique", "unique_consecutive", "rotary_position_embedding", "add_rms_norm",
           "bidense", "mse_loss_ext", "mirror_pad", "lrn", "gumbel_softmax", "max_unpool1d",
           "max_unpool2d", "adaptive_max_pool1d", "iou"]


def _tensor(op, x, name="input"):
    if not is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def _run_starts(flat):
    """For a sorted 1-D tensor: True where a new value starts (bool, same length; NaN != NaN,
    so each NaN starts a run of its own)."""
    n = flat.shape[0]
    if n == 0:
        return tensor_of(np.zeros(0, bool))
    first = tensor_of(np.ones(1, bool))
    new = call("not_equal", (narrow(flat, 0, 1, n - 1), narrow(flat, 0, 0, n - 1)))
    return concat([first, new], 0)


def _positions(marks):
    """The positions of the True marks (int64, (k,))."""
    return reshape(call("nonzero", (marks,)), (-1,))


def _run_ends(marks):
    """One past the last position of each run, from the run-start marks (int64, (k,))."""
    n = marks.shape[0]
    if n == 0:
        return tensor_of(np.zeros(0, np.int64))
    last = concat([narrow(marks, 0, 1, n - 1), tensor_of(np.ones(1, bool))], 0)
    return call("add", (_positions(last), 1))


def _run_ids(marks):
    """Each position's run number (int64): a running count of the run starts."""
    counts = call("cumsum", (call("cast", (marks,), (dtype_attr(mstype.int64),)),), (0, False))
    return call("sub", (counts, 1))


def unique(input):  # noqa: A002
    """(the distinct values in order of first appearance, each element's index into them);
    both of input's dtype family (int32 indices), as MindSpore returns them."""
    x = reshape(_tensor("unique", input), (-1,))
    order = call("argsort", (x,), (0, False))  # stable: a run's first entry is its first seen
    ordered = call("gather", (x, order), (0, 0))
    marks = _run_starts(ordered)
    starts = _positions(marks)
    first_seen = call("gather", (order, starts), (0, 0))
    rank = call("argsort", (first_seen,), (0, False))  # runs in order of first appearance
    values = call("gather", (call("gather", (ordered, starts), (0, 0)), rank), (0, 0))
    group_of_sorted = _run_ids(marks)
    group = call("gather", (group_of_sorted, call("argsort", (order,), (0, False))), (0, 0))
    position = call("argsort", (rank,), (0, False))
    idx = call("gather", (position, group), (0, 0))
    return values, reshape(call("cast", (idx,), (dtype_attr(mstype.int32),)),
                           tuple(input.shape))


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The values with consecutive repeats collapsed (flattened when dim is None); with
    return_inverse each element's run index, with return_counts each run's length (int64)."""
    if dim is not None:
        raise ValueError("unique_consecutive: dim is not supported by kiln yet (use None)")
    x = reshape(_tensor("unique_consecutive", input), (-1,))
    marks = _run_starts(x)
    starts = _positions(marks)
    out = [call("gather", (x, starts), (0, 0))]
    if return_inverse:
        out.append(reshape(_run_ids(marks), tuple(input.shape)))
    if return_counts:
        out.append(call("sub", (_run_ends(marks), starts)))
    return out[0] if len(out) == 1 else tuple(out)


def rotary_position_embedding(x, cos, sin, mode=0):
    """x * cos + rotate(x) * sin; mode 0 rotates halves (-x2, x1), mode 1 adjacent pairs."""
    _tensor("rotary_position_embedding", x, "x")
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"rotary_position_embedding: the last dimension {d} must be even")
    if mode == 0:
        x1, x2 = narrow(x, -1, 0, d // 2), narrow(x, -1, d // 2, d // 2)
        rotated = concat([call("neg", (x2,)), x1], -1)
    elif mode == 1:
        pairs = reshape(x, tuple(x.shape[:-1]) + (d // 2, 2))
        even, odd = narrow(pairs, -1, 0, 1), narrow(pairs, -1, 1, 1)
        rotated = reshape(concat([call("neg", (odd,)), even], -1), tuple(x.shape))
    else:
        raise ValueError(f"rotary_position_embedding: mode must be 0 or 1, got {mode!r}")
    return call("add", (call("mul", (x, cos)), call("mul", (rotated, sin))))


def add_rms_norm(x1, x2, gamma, epsilon=1e-06):
    """(rms_norm(x1 + x2, gamma), its 1/rms, x1 + x2)."""
    from kiln.ops.function.misc_ext import rms_norm  # noqa: PLC0415
    total = call("add", (x1, x2))
    y, rstd = rms_norm(total, gamma, epsilon)
    return y, rstd, total


def bidense(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] (+ bias[o])."""
    a, b = _tensor("bidense", input1, "input1"), _tensor("bidense", input2, "input2")
    out_f, in1, in2 = weight.shape
    left = call("matmul", (reshape(a, (-1, in1)), reshape(transpose(weight, (1, 0, 2)),
                                                               (in1, -1))))
    left = reshape(left, (-1, out_f, in2))
    y = call("reduce_sum", (call("mul", (left, call("expand_dims", (reshape(b, (-1, in2)),),
                                                         (1,)))),), ((-1,), False, None))
    y = reshape(y, tuple(a.shape[:-1]) + (out_f,))
    return y if bias is None else call("add", (y, bias))


def mse_loss_ext(input, target, reduction="mean"):  # noqa: A002
    from kiln.ops.function.normalization import mse_loss  # noqa: PLC0415
    return mse_loss(input, target, reduction)


def mirror_pad(input_x, paddings, mode):
    """Pads each dim by mirroring: 'REFLECT' leaves the edge out, 'SYMMETRIC' repeats it;
    paddings holds (before, after) per dimension, first dimension first."""
    x = _tensor("mirror_pad", input_x, "input_x")
    pads = np.asarray(paddings.asnumpy() if is_tensor(paddings) else paddings, np.int64)
    if pads.shape != (len(x.shape), 2) or (pads < 0).any():
        raise ValueError(f"mirror_pad: paddings must be ({len(x.shape)}, 2) non-negative, got "
                         f"{pads.tolist()}")
    if mode not in ("REFLECT", "SYMMETRIC"):
        raise ValueError(f"mirror_pad: mode must be 'REFLECT' or 'SYMMETRIC', got {mode!r}")
    shift = 1 if mode == "REFLECT" else 0
    for axis, (before, after) in enumerate(pads):
        n = x.shape[axis]
        if before + shift > n or after + shift > n:
            raise ValueError(f"mirror_pad: padding {(int(before), int(after))} is too large for "
                             f"dim {axis} of size {n} in mode {mode}")
        if before == after == 0:
            continue
        idx = np.r_[np.arange(before, 0, -1) - 1 + shift, np.arange(n),
                    n - 1 - shift - np.arange(after)]
        x = call("gather", (x, tensor_of(idx.astype(np.int64))), (axis, 0))
    return x


def lrn(x, depth_radius=5, bias=1.0, alpha=1.0, beta=0.5, norm_region="ACROSS_CHANNELS"):
    """x / (bias + alpha * sum of x^2 over channels c - r .. c + r) ** beta (NCHW)."""
    _tensor("lrn", x, "x")
    if norm_region != "ACROSS_CHANNELS":
        raise ValueError(f"lrn: norm_region must be 'ACROSS_CHANNELS', got {norm_region!r}")
    r = int_arg(depth_radius, "lrn", "depth_radius")
    c = x.shape[1]
    sq = call("mul", (x, x))
    total = None
    for off in range(-r, r + 1):  # each shifted channel window term, zero past the edges
        lo, hi = max(0, off), min(c, c + off)
        if hi <= lo:
            continue
        part = narrow(sq, 1, lo, hi - lo)
        pieces = [p for p in (_zeros_like_channels(x, max(0, -off)), part,
                              _zeros_like_channels(x, max(0, off))) if p is not None]
        term = concat(pieces, 1) if len(pieces) > 1 else part
        total = term if total is None else call("add", (total, term))
    den = call("pow", (call("add", (call("mul", (total, float(alpha))), float(bias))),
                       float(beta)))
    return call("div", (x, den))


def _zeros_like_channels(x, k):
    if k == 0:
        return None
    return call("mul", (narrow(x, 1, 0, k), 0.0)) if x.shape[1] >= k else None


def gumbel_softmax(logits, tau=1.0, hard=False, dim=-1):
    """softmax((logits + Gumbel noise) / tau); hard gives one-hot samples whose gradient is the
    soft one's (straight-through)."""
    x = _tensor("gumbel_softmax", logits, "logits")
    u = call("uniform_real", (x,), (tuple(x.shape), dtype_attr(x.dtype), 1e-10, 1.0, None))
    g = call("neg", (call("log", (call("neg", (call("log", (u,)),)),)),))
    d = _axis(dim, len(x.shape), "gumbel_softmax", "dim")
    soft = call("softmax", (call("div", (call("add", (x, g)), float(tau))),), (d,))
    if not hard:
        return soft
    idx = call("argmax", (soft,), (d, True))
    hot = call("one_hot", (call("squeeze", (idx,), ((d,),)),),
               (x.shape[d], d, 1, 0, dtype_attr(x.dtype), ""))
    return call("add", (call("sub", (hot, call("stop_gradient", (soft,)))), soft))


def _unpool(op, x, indices, kernel, stride, padding, output_size, dims):
    _tensor(op, x, "x")

    def ints(value, name):
        values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims
        return tuple(int_arg(v, op, name) for v in values)

    k = ints(kernel, "kernel_size")
    s = k if stride is None else ints(stride, "stride")
    p = ints(padding, "padding")
    spatial = tuple(x.shape[-dims:])
    if output_size is None:
        out = tuple((spatial[i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(dims))
    else:
        out = tuple(int_arg(v, op, "output_size") for v in tuple(output_size)[-dims:])
    lead = tuple(x.shape[:-dims])
    planes = int(np.prod(lead)) if lead else 1
    size = int(np.prod(out))
    flat_idx = reshape(call("cast", (indices,), (dtype_attr(mstype.int64),)), (planes, -1))
    offsets = tensor_of((np.arange(planes, dtype=np.int64) * size).reshape(planes, 1))
    from kiln.ops.function.scatter_ops import _scatter_sum  # noqa: PLC0415
    total = _scatter_sum(reshape(x, (-1,)), reshape(call("add", (flat_idx, offsets)), (-1,)),
                         planes * size)
    return reshape(total, lead + out)


def max_unpool1d(x, indices, kernel_size, stride=None, padding=0, output_size=None):
    """x placed at indices (flat within each length) of a zero (N, C, L_out) tensor."""
    return _unpool("max_unpool1d", x, indices, kernel_size, stride, padding, output_size, 1)


def max_unpool2d(x, indices, kernel_size, stride=None, padding=0, output_size=None):
    """x placed at indices (h * W + w within each plane) of a zero (N, C, H, W) tensor."""
    return _unpool("max_unpool2d", x, indices, kernel_size, stride, padding, output_size, 2)


def adaptive_max_pool1d(input, output_size):  # noqa: A002
    """Maximum of (N, C, L) over output_size windows (PyTorch's bounds)."""
    from kiln.ops.function.spatial import adaptive_max_pool2d  # noqa: PLC0415
    x = _tensor("adaptive_max_pool1d", input)
    out = adaptive_max_pool2d(call("expand_dims", (x,), (len(x.shape) - 1,)),
                              (1, int_arg(output_size, "adaptive_max_pool1d", "output_size")))
    return call("squeeze", (out,), ((len(x.shape) - 1,),))


def iou(anchor_boxes, gt_boxes, mode="iou"):
    """(N_gt, N_anchor) overlaps of (x1, y1, x2, y2) boxes with MindSpore's +1 pixel areas;
    mode 'iof' divides by the ground-truth box's area."""
    a, g = _tensor("iou", anchor_boxes, "anchor_boxes"), _tensor("iou", gt_boxes, "gt_boxes")
    if mode not in ("iou", "iof"):
        raise ValueError(f"iou: mode must be 'iou' or 'iof', got {mode!r}")
    ga = call("expand_dims", (g,), (1,))  # (G, 1, 4)

    def coord(t, i):
        return reshape(narrow(t, -1, i, 1), tuple(t.shape[:-1]))

    w = call("maximum", (call("add", (call("sub", (call("minimum", (coord(ga, 2), coord(a, 2))),
                                                   call("maximum", (coord(ga, 0), coord(a, 0))))),
                                      1.0)), 0.0))
    h = call("maximum", (call("add", (call("sub", (call("minimum", (coord(ga, 3), coord(a, 3))),
                                                   call("maximum", (coord(ga, 1), coord(a, 1))))),
                                      1.0)), 0.0))
    inter = call("mul", (w, h))

    def area(t):
        return call("mul", (call("add", (call("sub", (coord(t, 2), coord(t, 0))), 1.0)),
                            call("add", (call("sub", (coord(t, 3), coord(t, 1))), 1.0))))

    if mode == "iof":
        return call("div", (inter, area(ga)))
    return call("div", (inter, call("sub", (call("add", (area(ga), area(a))), inter))))
