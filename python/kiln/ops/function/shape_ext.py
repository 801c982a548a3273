"""Shape manipulation beyond reshape/transpose: flips and rotations, moving axes, splitting and
stacking families, repeats, diagonals, meshgrids and tensor facts (numel, rank, ...)."""
import builtins
import math

import numpy as np

from kiln.common import dtype as mstype
from kiln.common._arrays import tensor_of
from kiln.ops import _indexing
from kiln.ops._core import call, dtype_attr, int_arg, is_runtime_size, shape_attr
from kiln.ops._core import is_tensor as _is_tensor
from kiln.ops.function.array import (
    _axis,
    _broadcast_like,
    broadcast_to,
    concat,
    narrow,
    reshape,
    size_when_run,
    stack,
    swapaxes,
    transpose,
)

__all__ = [
    "flip", "fliplr", "flipud", "reverse", "rot90", "movedim", "moveaxis", "swapdims",
    "unbind", "unstack", "tensor_split", "hsplit", "vsplit", "dsplit", "hstack", "vstack",
    "dstack", "column_stack", "row_stack", "atleast_1d", "atleast_2d", "atleast_3d", "ravel",
    "t", "expand", "expand_as", "view_as", "type_as", "numel", "size", "rank", "is_tensor",
    "is_floating_point", "is_complex", "slice", "strided_slice", "repeat_interleave",
    "repeat_elements", "meshgrid", "cartesian_prod", "diagonal", "diag", "diagflat",
    "diag_embed", "block_diag", "tril_indices", "triu_indices",
]


def _tensor(op, x, name="input"):
    if not _is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def flip(input, dims):  # noqa: A002
    """input reversed along each axis in dims (a copy)."""
    x = _tensor("flip", input)
    axes = (dims,) if isinstance(dims, int) else tuple(dims)
    seen = set()
    for d in axes:
        a = _axis(d, len(x.shape), "flip", "dims")
        if a in seen:
            raise ValueError(f"flip: dims {tuple(axes)} repeats axis {a}")
        seen.add(a)
        x = _indexing._reverse(x, a)
    return x if seen and x is not input else call("identity", (x,))


def fliplr(input):  # noqa: A002
    if len(_tensor("fliplr", input).shape) < 2:
        raise ValueError(f"fliplr: input must be at least 2-D, got shape {tuple(input.shape)}")
    return flip(input, (1,))


def flipud(input):  # noqa: A002
    if len(_tensor("flipud", input).shape) < 1:
        raise ValueError("flipud: input must be at least 1-D")
    return flip(input, (0,))


def reverse(x, axis):
    axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    return flip(x, tuple(int_arg(a, "reverse", "axis") for a in axes))


def rot90(input, k, dims):  # noqa: A002
    """input rotated by k * 90 degrees in the plane of dims, from dims[0] toward dims[1]."""
    x = _tensor("rot90", input)
    if len(dims) != 2:
        raise ValueError(f"rot90: dims must hold 2 axes, got {dims!r}")
    d0, d1 = (_axis(d, len(x.shape), "rot90", "dims") for d in dims)
    if d0 == d1:
        raise ValueError(f"rot90: dims must be two different axes, got {dims!r}")
    k = int_arg(k, "rot90", "k") % 4
    if k == 0:
        return call("identity", (x,))
    if k == 2:
        return flip(x, (d0, d1))
    if k == 1:
        return swapaxes(flip(x, (d1,)), d0, d1)
    return flip(swapaxes(x, d0, d1), (d1,))


def movedim(x, source, destination):
    """x with the axes in source moved to the places in destination, the others in order."""
    _tensor("movedim", x, "x")
    n = len(x.shape)
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise ValueError(f"movedim: source {src} and destination {dst} differ in length")
    src = tuple(_axis(a, n, "movedim", "source") for a in src)
    dst = tuple(_axis(a, n, "movedim", "destination") for a in dst)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"movedim: repeated axes in source {src} or destination {dst}")
    rest = iter(a for a in range(n) if a not in src)
    placed = dict(zip(dst, src))
    perm = tuple(placed[i] if i in placed else next(rest) for i in range(n))
    return transpose(x, perm)


moveaxis = movedim


def swapdims(input, dim0, dim1):  # noqa: A002
    return swapaxes(input, dim0, dim1)


def unbind(input, dim=0):  # noqa: A002
    """The slices of input along dim, each without that axis."""
    x = _tensor("unbind", input)
    a = _axis(dim, len(x.shape), "unbind", "dim")
    if x.shape[a] < 0:  # a tuple's length is fixed when the graph is compiled
        raise ValueError(f"unbind: dim {a} of shape {tuple(x.shape)} has a size known only when "
                         f"the graph runs (declared None), so the number of slices is unknown")
    return tuple(call("squeeze", (narrow(x, a, i, 1),), ((a,),)) for i in range(x.shape[a]))


def unstack(input_x, axis=0):
    return unbind(input_x, int_arg(axis, "unstack", "axis"))


def tensor_split(input, indices_or_sections, axis=0):  # noqa: A002
    """Splits like np.array_split: an int gives that many near-equal parts (the first ones one
    longer), a sequence gives the split points."""
    x = _tensor("tensor_split", input)
    a = _axis(axis, len(x.shape), "tensor_split")
    n = x.shape[a]
    if isinstance(indices_or_sections, int) and not isinstance(indices_or_sections, bool):
        s = indices_or_sections
        if s <= 0:
            raise ValueError(f"tensor_split: sections must be positive, got {s}")
        sizes = [n // s + 1] * (n % s) + [n // s] * (s - n % s)
        points = list(np.cumsum(sizes)[:-1])
    elif isinstance(indices_or_sections, (list, tuple)):
        points = [int_arg(p, "tensor_split", "indices") for p in indices_or_sections]
    else:
        raise TypeError(f"tensor_split: indices_or_sections must be an int or a sequence of "
                        f"ints, got {type(indices_or_sections).__name__}")
    bounds = [0] + [builtins.min(builtins.max(p + n if p < 0 else p, 0), n) for p in points] + [n]
    return tuple(narrow(x, a, lo, builtins.max(hi, lo) - lo) for lo, hi in zip(bounds, bounds[1:]))


def _split_family(op, input, indices_or_sections, axis, min_rank):  # noqa: A002
    x = _tensor(op, input)
    if len(x.shape) < min_rank:
        raise ValueError(f"{op}: input must be at least {min_rank}-D, got shape "
                         f"{tuple(x.shape)}")
    if isinstance(indices_or_sections, int) and x.shape[axis] % indices_or_sections:
        raise ValueError(f"{op}: axis {axis} of size {x.shape[axis]} does not split into "
                         f"{indices_or_sections} equal parts")
    return tensor_split(x, indices_or_sections, axis)


def hsplit(input, indices_or_sections):  # noqa: A002
    axis = 0 if len(input.shape) == 1 else 1
    return _split_family("hsplit", input, indices_or_sections, axis, 1)


def vsplit(input, indices_or_sections):  # noqa: A002
    return _split_family("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):  # noqa: A002
    return _split_family("dsplit", input, indices_or_sections, 2, 3)


def _atleast(op, inputs, rank):
    def one(x):
        x = x if _is_tensor(x) else tensor_of(np.asarray(x))
        shape = tuple(x.shape)
        if len(shape) >= rank:
            return x
        if rank == 3 and len(shape) == 2:
            return reshape(x, shape + (1,))
        if rank == 3 and len(shape) == 1:
            return reshape(x, (1,) + shape + (1,))
        return reshape(x, (1,) * (rank - len(shape)) + shape)

    if isinstance(inputs, (list, tuple)):
        return tuple(one(x) for x in inputs)
    return one(inputs)


def atleast_1d(inputs):
    return _atleast("atleast_1d", inputs, 1)


def atleast_2d(inputs):
    return _atleast("atleast_2d", inputs, 2)


def atleast_3d(inputs):
    """Views of rank 3 at least: (n,) -> (1, n, 1), (m, n) -> (m, n, 1)."""
    return _atleast("atleast_3d", inputs, 3)


def _seq(op, tensors):
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise TypeError(f"{op}: expected a non-empty list or tuple of Tensors")
    return list(tensors)


def hstack(tensors):
    ts = _seq("hstack", tensors)
    return concat(ts, 0 if len(ts[0].shape) == 1 else 1)


def vstack(inputs):
    return concat(list(atleast_2d(_seq("vstack", inputs))), 0)


row_stack = vstack


def dstack(tensors):
    return concat(list(atleast_3d(_seq("dstack", tensors))), 2)


def column_stack(tensors):
    ts = _seq("column_stack", tensors)
    cols = [reshape(x, (x.shape[0], 1)) if len(x.shape) == 1 else
            reshape(x, (1, 1)) if len(x.shape) == 0 else x for x in ts]
    return concat(cols, 1)


def ravel(input):  # noqa: A002
    return reshape(_tensor("ravel", input), (-1,))


def t(input):  # noqa: A002
    """The transpose of a 2-D tensor; 0-D and 1-D tensors come back as they are."""
    x = _tensor("t", input)
    if len(x.shape) > 2:
        raise ValueError(f"t: input must be at most 2-D, got shape {tuple(x.shape)}")
    return transpose(x, (1, 0)) if len(x.shape) == 2 else x


def expand(input_x, size):
    """input_x broadcast to size (-1 keeps a dimension)."""
    x = _tensor("expand", input_x, "input_x")
    if _is_tensor(size):
        size = tuple(int(v) for v in size.asnumpy().reshape(-1))
    if any(is_runtime_size(d) for d in size):
        return broadcast_to(x, tuple(size))  # sizes known when the graph runs
    size = shape_attr(size, "expand", "size")
    lead = len(size) - len(x.shape)
    shape = tuple(x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(size))
    return broadcast_to(x, shape)


def expand_as(input, other):  # noqa: A002
    x = _tensor("expand_as", input)
    if builtins.min(tuple(other.shape), default=0) < 0:  # a graph's dimension of any size
        return _broadcast_like(x, other)
    return broadcast_to(x, tuple(other.shape))


def view_as(input, other):  # noqa: A002
    return reshape(_tensor("view_as", input), tuple(other.shape))


def type_as(input, other):  # noqa: A002
    return call("cast", (_tensor("type_as", input),), (dtype_attr(other.dtype),))


def numel(input):  # noqa: A002
    """The number of elements (an int; in a graph compiled for dimensions of any size, the
    count it runs with, a 0-d int64 tensor)."""
    shape = tuple(_tensor("numel", input).shape)
    if builtins.min(shape, default=0) < 0:
        return call("reduce_prod", (call("tensor_shape", (input,)),), (None, False))
    return math.prod(shape)


def size(input_x):
    return numel(input_x)


def rank(input_x):
    """The number of dimensions (an int)."""
    return len(_tensor("rank", input_x, "input_x").shape)


def is_tensor(obj):
    """True for kiln Tensors (and graph values while compiling)."""
    return _is_tensor(obj)


def is_floating_point(input):  # noqa: A002
    return _tensor("is_floating_point", input).dtype.is_floating_point


def is_complex(input):  # noqa: A002
    """False: kiln has no complex dtypes."""
    _tensor("is_complex", input)
    return False


def slice(input_x, begin, size):  # noqa: A001 - MindSpore's name
    """The block of `size` (-1: to the end) starting at `begin`."""
    x = _tensor("slice", input_x, "input_x")
    begin, size_ = shape_attr(begin, "slice", "begin"), shape_attr(size, "slice", "size")
    if len(begin) != len(x.shape) or len(size_) != len(x.shape):
        raise ValueError(f"slice: begin {begin} and size {size_} must have input's rank "
                         f"{len(x.shape)}")
    end = tuple(d if s == -1 else b + s for b, s, d in zip(begin, size_, x.shape))
    for b, e, d in zip(begin, end, x.shape):
        if not 0 <= b <= e <= d:
            raise ValueError(f"slice: begin {begin} and size {size_} do not fit shape "
                             f"{tuple(x.shape)}")
    return _indexing.getitem(x, tuple(builtins.slice(b, e) for b, e in zip(begin, end)))


def strided_slice(input_x, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0):
    """input_x[begin:end:strides] with MindSpore's bit masks: begin_mask/end_mask bit i
    ignores begin[i]/end[i], ellipsis_mask marks `...`, new_axis_mask a new axis and
    shrink_axis_mask takes begin[i] as a single index."""
    x = _tensor("strided_slice", input_x, "input_x")
    begin, end = tuple(begin), tuple(end)
    strides = tuple(strides)
    if not len(begin) == len(end) == len(strides):
        raise ValueError(f"strided_slice: begin {begin}, end {end} and strides {strides} "
                         f"must have one length")
    index = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if ellipsis_mask & bit:
            index.append(Ellipsis)
        elif new_axis_mask & bit:
            index.append(None)
        elif shrink_axis_mask & bit:
            index.append(b)
        else:
            index.append(builtins.slice(None if begin_mask & bit else b,
                                        None if end_mask & bit else e, s))
    return _indexing.getitem(x, tuple(index))


def _repeat_counts(op, repeats, n):
    if _is_tensor(repeats):
        repeats = repeats.asnumpy().reshape(-1).tolist()
    if isinstance(repeats, (list, tuple)):
        counts = [int_arg(r, op, "repeats") for r in repeats]
        if len(counts) == 1:
            counts = counts * n
    else:
        counts = [int_arg(repeats, op, "repeats")] * n
    if len(counts) != n or builtins.any(c < 0 for c in counts):
        raise ValueError(f"{op}: repeats must be non-negative and give one count per element "
                         f"({n}), got {repeats!r}")
    return counts


def repeat_interleave(input, repeats, axis=None):  # noqa: A002
    """Each element repeated `repeats` times along axis (None: the flattened input)."""
    x = _tensor("repeat_interleave", input)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    a = _axis(axis, len(x.shape), "repeat_interleave")
    counts = _repeat_counts("repeat_interleave", repeats, x.shape[a])
    idx = tensor_of(np.repeat(np.arange(x.shape[a], dtype=np.int64), counts))
    return call("gather", (x, idx), (a, 0))


def repeat_elements(x, rep, axis=0):
    return repeat_interleave(x, int_arg(rep, "repeat_elements", "rep"),
                             int_arg(axis, "repeat_elements", "axis"))


def meshgrid(*inputs, indexing="xy"):
    """Coordinate grids of 1-D tensors; 'xy' swaps the first two output axes (np.meshgrid)."""
    if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
        inputs = tuple(inputs[0])
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    for v in inputs:
        if not _is_tensor(v) or len(v.shape) != 1:
            raise ValueError("meshgrid: every input must be a 1-D Tensor")
    sizes = [size_when_run(v, 0) for v in inputs]  # a graph's any size: as it runs
    if indexing == "xy" and len(inputs) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, v in enumerate(inputs):
        pos = {0: 1, 1: 0}.get(i, i) if indexing == "xy" and len(inputs) >= 2 else i
        shape = [1] * len(inputs)
        shape[pos] = v.shape[0]
        out.append(broadcast_to(reshape(v, tuple(shape)), tuple(sizes)))
    return tuple(out)


def cartesian_prod(*inputs):
    """Every combination of the 1-D inputs' elements, one per row."""
    grids = meshgrid(*inputs, indexing="ij")
    if len(grids) == 1:
        return grids[0]
    return stack([reshape(g, (-1,)) for g in grids], 1)


def diagonal(input, offset=0, dim1=0, dim2=1):  # noqa: A002
    """The diagonal of the (dim1, dim2) planes as the last axis (offset > 0: above it)."""
    x = _tensor("diagonal", input)
    n = len(x.shape)
    d1, d2 = _axis(dim1, n, "diagonal", "dim1"), _axis(dim2, n, "diagonal", "dim2")
    if d1 == d2:
        raise ValueError(f"diagonal: dim1 and dim2 must differ, got {dim1} and {dim2}")
    rest = [a for a in range(n) if a not in (d1, d2)]
    y = transpose(x, tuple(rest) + (d1, d2))
    rows, cols = y.shape[-2], y.shape[-1]
    k = int_arg(offset, "diagonal", "offset")
    if rows < 0 or cols < 0:
        # Sizes known when the graph runs: the elements where column - row == k, in order.
        on = call("equal", (call("sub", (_indexing.positions_along(y, n - 1),
                                         _indexing.positions_along(y, n - 2))), k))
        if n > 2:
            on = call("squeeze", (on,), (tuple(range(n - 2)),))
        return _indexing.getitem(y, (Ellipsis, on))
    start_r, start_c = (0, k) if k >= 0 else (-k, 0)
    length = builtins.max(0, builtins.min(rows - start_r, cols - start_c))
    r = tensor_of(np.arange(start_r, start_r + length, dtype=np.int64))
    c = tensor_of(np.arange(start_c, start_c + length, dtype=np.int64))
    return call("advanced_index", (y, r, c), ((n - 2, n - 1),))


def _diag_matrix(v, k):
    """(..., n) -> (..., m, m) with v on diagonal k (m = n + |k|), by one matmul with a 0/1
    placement matrix, so the gradient follows."""
    n = v.shape[-1]
    m = n + abs(k)
    place = np.zeros((n, m * m), dtype=np.float32)
    for i in range(n):
        r, c = (i, i + k) if k >= 0 else (i - k, i)
        place[i, r * m + c] = 1
    dtype = v.dtype
    vf = v if dtype.is_floating_point else call("cast", (v,), (dtype_attr(mstype.float64),))
    p = call("cast", (tensor_of(place),), (dtype_attr(vf.dtype),))
    out = call("matmul", (vf, p))
    out = out if out.dtype == dtype else call("cast", (out,), (dtype_attr(dtype),))
    return reshape(out, tuple(v.shape[:-1]) + (m, m))


def diag(input):  # noqa: A002
    """A tensor of rank 2k with input (rank k) on its diagonal: out[i, j, i, j] = in[i, j]."""
    x = _tensor("diag", input)
    shape = tuple(x.shape)
    if not shape:
        raise ValueError("diag: input must have at least 1 dimension")
    flat = _diag_matrix(reshape(x, (-1,)), 0)
    return reshape(flat, shape + shape)


def diagflat(input, offset=0):  # noqa: A002
    """The flattened input on diagonal `offset` of a square matrix."""
    x = _tensor("diagflat", input)
    return _diag_matrix(reshape(x, (-1,)), int_arg(offset, "diagflat", "offset"))


def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002
    """The last axis of input placed on diagonal `offset` of the (dim1, dim2) planes."""
    x = _tensor("diag_embed", input)
    out = _diag_matrix(x, int_arg(offset, "diag_embed", "offset"))
    n = len(out.shape)
    d1, d2 = _axis(dim1, n, "diag_embed", "dim1"), _axis(dim2, n, "diag_embed", "dim2")
    if d1 == d2:
        raise ValueError(f"diag_embed: dim1 and dim2 must differ, got {dim1} and {dim2}")
    return movedim(out, (n - 2, n - 1), (d1, d2))


def block_diag(*inputs):
    """The matrices (0-D, 1-D taken as rows) placed along the diagonal of one matrix."""
    mats = []
    for v in inputs:
        _tensor("block_diag", v)
        mats.append(reshape(v, (1, -1) if len(v.shape) <= 1 else tuple(v.shape))
                    if len(v.shape) <= 2 else None)
        if mats[-1] is None:
            raise ValueError(f"block_diag: inputs must be at most 2-D, got shape "
                             f"{tuple(v.shape)}")
    if not mats:
        raise ValueError("block_diag: expected at least one Tensor")
    dtype = mats[0].dtype
    for mat in mats[1:]:
        dtype = call("add", (_zeros((1,), dtype), _zeros((1,), mat.dtype))).dtype
    width = builtins.sum(mat.shape[1] for mat in mats)
    rows, left = [], 0
    for mat in mats:
        mat = mat if mat.dtype == dtype else call("cast", (mat,), (dtype_attr(dtype),))
        r, c = mat.shape
        parts = [p for p in (_zeros((r, left), dtype), mat, _zeros((r, width - left - c), dtype))
                 if p is not None]
        rows.append(concat(parts, 1) if len(parts) > 1 else parts[0])
        left += c
    return concat(rows, 0)


def _zeros(shape, dtype):
    if 0 in shape:
        return None
    nptype = np.float32 if dtype == mstype.bfloat16 else mstype.dtype_to_nptype(dtype)
    z = tensor_of(np.zeros(shape, nptype))
    return z if z.dtype == dtype else call("cast", (z,), (dtype_attr(dtype),))


def _triangle_indices(op, row, col, offset, dtype, lower):
    row, col = int_arg(row, op, "row"), int_arg(col, op, "col")
    offset = int_arg(offset, op, "offset")
    if dtype not in (mstype.int32, mstype.int64):
        raise TypeError(f"{op}: dtype must be int32 or int64, got {dtype}")
    fn = np.tril_indices if lower else np.triu_indices
    idx = np.stack(fn(row, offset, col)) if row and col else np.zeros((2, 0), np.int64)
    return tensor_of(idx.astype(mstype.dtype_to_nptype(dtype)))


def tril_indices(row, col, offset=0, *, dtype=mstype.int64):
    """The (2, N) coordinates of the lower triangle of a row x col matrix."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, True)


def triu_indices(row, col, offset=0, *, dtype=mstype.int64):
    return _triangle_indices("triu_indices", row, col, offset, dtype, False)


def _shift(x, step, axis):
    """x moved `step` places forward along axis; the first `step` places hold x's start (the
    callers mask them)."""
    n = x.shape[axis]
    return concat([narrow(x, axis, 0, step), narrow(x, axis, 0, n - step)], axis)
