"""Scatters and segment reductions as functions (new tensors, never in place): one-hot products
and masks over registry ops, so gradients follow in both modes. Memory grows with
(positions x targets); meant for the moderate sizes these ops see in models."""
import math

import numpy as np

from kiln.common import dtype as mstype
from kiln.common._arrays import tensor_of
from kiln.ops._core import call, dtype_attr, int_arg, is_runtime_size, is_tensor, shape_attr
from kiln.ops.function.array import _axis, reshape, runtime_positions, transpose

__all__ = [
    "unsorted_segment_sum", "unsorted_segment_max", "unsorted_segment_min",
    "unsorted_segment_prod", "gather_nd", "tensor_scatter_add", "tensor_scatter_sub",
    "tensor_scatter_update", "scatter_nd", "tensor_scatter_elements", "scatter", "index_fill",
    "select_scatter", "slice_scatter", "embedding", "matrix_band_part", "sequence_mask",
]


def _tensor(op, x, name="input"):
    if not is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def _ints(op, t, name):
    t = t if is_tensor(t) else tensor_of(np.asarray(t, np.int64))
    if t.dtype not in (mstype.int32, mstype.int64):
        raise TypeError(f"{op}: {name} must be an int32 or int64 Tensor, got {t.dtype}")
    return t


def _work_dtype(dtype):
    """The float type the one-hot products run in (int values are exact in float64)."""
    return dtype if dtype.is_floating_point else mstype.float64


def _one_hot(ids, count, dtype):
    """(n,) ids -> (n, count) rows of 0/1 in dtype (an id outside [0, count) gives zeros)."""
    return call("one_hot", (ids,), (count, -1, 1, 0, dtype_attr(dtype), ""))


def _scatter_sum(values, positions, count):
    """out[p] = sum of values[i] with positions[i] == p, p < count: values (n, ...) -> (count,
    ...); positions outside [0, count) add nothing."""
    work = _work_dtype(values.dtype)
    v = values if values.dtype == work else call("cast", (values,), (dtype_attr(work),))
    hot = _one_hot(reshape(positions, (-1,)), count, work)  # (n, count)
    rest = tuple(values.shape[1:])
    flat = reshape(v, (values.shape[0], -1))
    out = reshape(call("matmul", (transpose(hot, (1, 0)), flat)), (count,) + rest)
    return out if out.dtype == values.dtype else call("cast", (out,), (dtype_attr(values.dtype),))


def _segment_args(op, x, segment_ids, num_segments):
    _tensor(op, x, "input_x")
    ids = _ints(op, segment_ids, "segment_ids")
    k = len(ids.shape)
    if tuple(x.shape[:k]) != tuple(ids.shape):
        raise ValueError(f"{op}: segment_ids shape {tuple(ids.shape)} must be a prefix of "
                         f"input_x shape {tuple(x.shape)}")
    num = int_arg(num_segments, op, "num_segments")
    rows = reshape(x, (-1,) + tuple(x.shape[k:])) if k != 1 else x
    return rows, reshape(ids, (-1,)), num


def unsorted_segment_sum(input_x, segment_ids, num_segments):
    """out[s] = sum of input_x[i] with segment_ids[i] == s (ids outside [0, num) dropped)."""
    rows, ids, num = _segment_args("unsorted_segment_sum", input_x, segment_ids, num_segments)
    return _scatter_sum(rows, ids, num)


def _segment_reduce(op, input_x, segment_ids, num_segments, reducer, empty):
    rows, ids, num = _segment_args(op, input_x, segment_ids, num_segments)
    hit = _one_hot(ids, num, mstype.bool_)  # (n, num) bool
    hit = reshape(transpose(hit, (1, 0)), (num, rows.shape[0]) + (1,) * (len(rows.shape) - 1))
    fill = _extreme(rows.dtype, empty)
    picked = call("where", (hit, call("expand_dims", (rows,), (0,)), fill))
    return call(reducer, (picked,), ((1,), False))


def _extreme(dtype, which):
    """The value of an empty segment: the dtype's lowest (max) or highest (min) finite value,
    as MindSpore's kernels give (not +-inf)."""
    if dtype.is_floating_point:
        big = 3.3895313892515355e38 if dtype == mstype.bfloat16 else \
            float(np.finfo(mstype.dtype_to_nptype(dtype)).max)
        return {"max": -big, "min": big}[which]
    info = np.iinfo(mstype.dtype_to_nptype(dtype))
    return tensor_of(np.asarray(info.min if which == "max" else info.max,
                                mstype.dtype_to_nptype(dtype)))


def unsorted_segment_max(input_x, segment_ids, num_segments):
    """The maximum per segment; an empty segment gives the dtype's lowest finite value."""
    return _segment_reduce("unsorted_segment_max", input_x, segment_ids, num_segments,
                           "reduce_max", "max")


def unsorted_segment_min(input_x, segment_ids, num_segments):
    """The minimum per segment; an empty segment gives the dtype's highest finite value."""
    return _segment_reduce("unsorted_segment_min", input_x, segment_ids, num_segments,
                           "reduce_min", "min")


def unsorted_segment_prod(input_x, segment_ids, num_segments):
    """The product per segment; an empty segment gives 1."""
    rows, ids, num = _segment_args("unsorted_segment_prod", input_x, segment_ids, num_segments)
    hit = _one_hot(ids, num, mstype.bool_)
    hit = reshape(transpose(hit, (1, 0)), (num, rows.shape[0]) + (1,) * (len(rows.shape) - 1))
    picked = call("where", (hit, call("expand_dims", (rows,), (0,)), 1))
    return call("reduce_prod", (picked,), ((1,), False))


def _flat_positions(op, shape, indices):
    """indices (..., k) into the first k dims of shape -> flat positions (...) and k."""
    idx = _ints(op, indices, "indices")
    k = idx.shape[-1]
    if not 1 <= k <= len(shape):
        raise ValueError(f"{op}: indices' last dimension {k} must be in [1, {len(shape)}]")
    strides = np.cumprod((shape[1:k] + (1,))[::-1])[::-1].astype(np.int64)
    stride_t = call("cast", (tensor_of(strides),), (dtype_attr(idx.dtype),))
    dims = call("cast", (tensor_of(np.asarray(shape[:k], np.int64)),), (dtype_attr(idx.dtype),))
    wrapped = call("where", (call("less", (idx, 0)), call("add", (idx, dims)), idx))
    pos = call("reduce_sum", (call("mul", (wrapped, stride_t)),), ((-1,), False, None))
    return pos, k


def gather_nd(input_x, indices):
    """input_x[indices[..., 0], ..., indices[..., k-1]]: (..., input_x.shape[k:])."""
    x = _tensor("gather_nd", input_x, "input_x")
    shape = tuple(x.shape)
    pos, k = _flat_positions("gather_nd", shape, indices)
    flat = reshape(x, (-1,) + shape[k:])
    return call("gather", (flat, pos), (0, 0))


def _scatter_nd_sum(op, shape, indices, updates):
    pos, k = _flat_positions(op, shape, indices)
    upd = _tensor(op, updates, "updates")
    count = math.prod(shape[:k])
    rows = reshape(upd, (-1,) + tuple(shape[k:]))
    return reshape(_scatter_sum(rows, pos, count), shape), pos, k


def tensor_scatter_add(input_x, indices, updates):
    """input_x with updates added at indices (repeats add up)."""
    x = _tensor("tensor_scatter_add", input_x, "input_x")
    total = _scatter_nd_sum("tensor_scatter_add", tuple(x.shape), indices, updates)[0]
    return call("add", (x, total))


def tensor_scatter_sub(input_x, indices, updates):
    x = _tensor("tensor_scatter_sub", input_x, "input_x")
    total = _scatter_nd_sum("tensor_scatter_sub", tuple(x.shape), indices, updates)[0]
    return call("sub", (x, total))


def tensor_scatter_update(input_x, indices, updates):
    """input_x with the slices at indices replaced by updates (indices should not repeat)."""
    x = _tensor("tensor_scatter_update", input_x, "input_x")
    shape = tuple(x.shape)
    total, pos, k = _scatter_nd_sum("tensor_scatter_update", shape, indices, updates)
    ones = call("cast", (call("add", (call("mul", (pos, 0)), 1)),), (dtype_attr(x.dtype),))
    hit = reshape(_scatter_sum(reshape(ones, (-1,)), pos, math.prod(shape[:k])), shape[:k])
    hit = reshape(call("greater", (hit, 0)), shape[:k] + (1,) * (len(shape) - k))
    return call("where", (hit, total, x))


def scatter_nd(indices, updates, shape):
    """A zero tensor of shape with updates added at indices."""
    shape = shape_attr(shape, "scatter_nd")
    return _scatter_nd_sum("scatter_nd", shape, indices, updates)[0]


def _element_positions(op, x, indices, axis):
    """Flat positions in x of each element of indices along axis (scatter/gather_elements)."""
    idx = _ints(op, indices, "indices")
    n = len(x.shape)
    if len(idx.shape) != n:
        raise ValueError(f"{op}: indices must have input's rank {n}, got shape "
                         f"{tuple(idx.shape)}")
    a = _axis(axis, n, op)
    strides = np.cumprod((tuple(x.shape[1:]) + (1,))[::-1])[::-1]
    size = x.shape[a]
    idx = call("where", (call("less", (idx, 0)), call("add", (idx, size)), idx))
    pos = call("mul", (call("cast", (idx,), (dtype_attr(mstype.int64),)), int(strides[a])))
    for d in range(n):
        if d != a:
            shape = [1] * n
            shape[d] = idx.shape[d]
            coord = np.arange(idx.shape[d], dtype=np.int64).reshape(shape) * int(strides[d])
            pos = call("add", (pos, tensor_of(coord)))
    return pos


def tensor_scatter_elements(input_x, indices, updates, axis=0, reduction="none"):
    """input_x with updates written ('none') or added ('add') at indices along axis."""
    op = "tensor_scatter_elements"
    x = _tensor(op, input_x, "input_x")
    if reduction not in ("none", "add"):
        raise ValueError(f"{op}: reduction must be 'none' or 'add', got {reduction!r}")
    pos = reshape(_element_positions(op, x, indices, axis), (-1,))
    upd = reshape(_tensor(op, updates, "updates"), (-1,))
    total = reshape(_scatter_sum(upd, pos, x.size), tuple(x.shape))
    if reduction == "add":
        return call("add", (x, total))
    ones = call("cast", (call("add", (call("mul", (pos, 0)), 1)),), (dtype_attr(x.dtype),))
    hit = call("greater", (reshape(_scatter_sum(ones, pos, x.size), tuple(x.shape)), 0))
    return call("where", (hit, total, x))


def scatter(input, axis, index, src):  # noqa: A002
    """input with src written at index along axis (tensor_scatter_elements, 'none')."""
    axis = int_arg(axis, "scatter", "axis")
    if not is_tensor(src):
        src = call("add", (call("mul", (call("cast", (index,), (dtype_attr(input.dtype),)), 0)),
                           src))
    return tensor_scatter_elements(input, index, src, axis)


def index_fill(x, axis, index, value):
    """x with value at the positions index along axis."""
    _tensor("index_fill", x, "x")
    a = _axis(axis, len(x.shape), "index_fill")
    idx = reshape(_ints("index_fill", index, "index"), (-1,))
    hit = call("reduce_max", (_one_hot(idx, x.shape[a], mstype.bool_),),
               ((0,), False))
    shape = [1] * len(x.shape)
    shape[a] = x.shape[a]
    if is_tensor(value):
        value = call("cast", (value,), (dtype_attr(x.dtype),))
    return call("where", (reshape(hit, tuple(shape)), value, x))


def _along_mask(x, axis, keep):
    shape = [1] * len(x.shape)
    shape[axis] = x.shape[axis]
    return tensor_of(np.asarray(keep, bool).reshape(shape))


def select_scatter(input, src, axis, index):  # noqa: A002
    """input with its slice at index along axis replaced by src."""
    x = _tensor("select_scatter", input)
    a = _axis(axis, len(x.shape), "select_scatter")
    i = int_arg(index, "select_scatter", "index")
    if not -x.shape[a] <= i < x.shape[a]:
        raise IndexError(f"select_scatter: index {i} is out of range for axis {a} of size "
                         f"{x.shape[a]}")
    keep = np.arange(x.shape[a]) == i % x.shape[a]
    return call("where", (_along_mask(x, a, keep), call("expand_dims", (src,), (a,)), x))


def slice_scatter(input, src, axis=0, start=None, end=None, step=1):  # noqa: A002
    """input with input[start:end:step] along axis replaced by src."""
    x = _tensor("slice_scatter", input)
    a = _axis(axis, len(x.shape), "slice_scatter")
    start, end, step = (None if v is None else int_arg(v, "slice_scatter", n)
                        for v, n in ((start, "start"), (end, "end"), (step, "step")))
    picked = np.arange(x.shape[a])[slice(start, end, step)]
    if src.shape[a] != len(picked):
        raise ValueError(f"slice_scatter: src has {src.shape[a]} slices along axis {a}, the "
                         f"slice selects {len(picked)}")
    source = np.zeros(x.shape[a], np.int64)  # which src slice lands where (0 where unused)
    source[picked] = np.arange(len(picked))
    spread = call("gather", (src, tensor_of(source)), (a, 0)) if len(picked) else x
    keep = np.zeros(x.shape[a], bool)
    keep[picked] = True
    return call("where", (_along_mask(x, a, keep), spread, x))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,  # noqa: A002
              scale_grad_by_freq=False):
    """The rows of weight at the indices in input; max_norm rescales the looked-up rows."""
    idx = _ints("embedding", input, "input")
    if scale_grad_by_freq:
        raise ValueError("embedding: scale_grad_by_freq is not supported by kiln yet")
    rows = call("gather", (weight, idx), (0, 0))
    if max_norm is not None:
        from kiln.ops.function.reduce_ext import vector_norm  # noqa: PLC0415
        norms = vector_norm(rows, norm_type, -1, True)
        scale = call("minimum", (1.0, call("div", (float(max_norm),
                                                    call("add", (norms, 1e-7))))))
        rows = call("mul", (rows, scale))
    if padding_idx is not None:  # the padding row gets no gradient
        pad = call("equal", (call("expand_dims", (idx,), (len(idx.shape),)), padding_idx))
        rows = call("where", (pad, call("stop_gradient", (rows,)), rows))
    return rows


def matrix_band_part(x, lower, upper):
    """x with everything outside the band (lower below, upper above the diagonal; negative:
    keep all) set to zero, on the last two axes."""
    _tensor("matrix_band_part", x, "x")
    rows, cols = x.shape[-2], x.shape[-1]
    i, j = np.arange(rows)[:, None], np.arange(cols)[None, :]
    low, up = int_arg(lower, "matrix_band_part", "lower"), int_arg(upper, "matrix_band_part",
                                                                   "upper")
    keep = ((low < 0) | (i - j <= low)) & ((up < 0) | (j - i <= up))
    return call("where", (tensor_of(keep), x, 0))


def sequence_mask(lengths, maxlen=None):
    """mask[..., j] = j < lengths[...]; maxlen None reads max(lengths) (PyNative only)."""
    lens = _tensor("sequence_mask", lengths, "lengths")
    if maxlen is None:
        maxlen = int(lens.asnumpy().max()) if lens.size else 0
    if is_runtime_size(maxlen):  # a size known when the graph runs
        steps = call("cast", (runtime_positions(maxlen),), (dtype_attr(lens.dtype),))
        return call("less", (steps, call("expand_dims", (lens,), (len(lens.shape),))))
    n = int_arg(maxlen, "sequence_mask", "maxlen")
    steps = call("cast", (tensor_of(np.arange(n, dtype=np.int64)),), (dtype_attr(lens.dtype),))
    return call("less", (steps, call("expand_dims", (lens,), (len(lens.shape),))))
