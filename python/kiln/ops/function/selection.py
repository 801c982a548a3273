"""Selection by index or mask: gather_elements/gather_d, index_select, take, masked_fill,
argwhere, searchsorted and bucketize (composed of advanced_index, where and comparisons)."""
import numpy as np

from kiln.common import dtype as mstype
from kiln.common._arrays import tensor_of
from kiln.ops import _indexing
from kiln.ops._core import call, dtype_attr, int_arg, is_tensor

__all__ = ["gather_elements", "gather_d", "index_select", "take", "masked_fill", "argwhere",
           "searchsorted", "bucketize"]


def _tensor(op, x, name="input"):
    if not is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def _index(op, index, name="index"):
    if not is_tensor(index):
        index = tensor_of(np.asarray(index, np.int64))
    if index.dtype not in (mstype.int32, mstype.int64):
        raise TypeError(f"{op}: {name} must be an int32 or int64 Tensor, got {index.dtype}")
    return index


def _arange_along(x, axis):
    """int64 positions 0..n-1 along `axis`, shaped to broadcast against x."""
    return _indexing.positions_along(x, axis)


def gather_elements(input, dim, index):  # noqa: A002
    """out[i][j] = input[index[i][j]][j] for dim 0 (np.take_along_axis); index has input's
    rank and may be smaller than input along any axis."""
    x = _tensor("gather_elements", input)
    index = _index("gather_elements", index)
    n = len(x.shape)
    if len(index.shape) != n:
        raise ValueError(f"gather_elements: index must have input's rank {n}, got shape "
                         f"{tuple(index.shape)}")
    d = int_arg(dim, "gather_elements", "dim")
    if not -n <= d < n:
        raise ValueError(f"gather_elements: dim {d} is out of range for rank {n}")
    d %= n
    for a in range(n):
        if a != d and index.shape[a] > x.shape[a]:
            raise ValueError(f"gather_elements: index shape {tuple(index.shape)} exceeds input "
                             f"shape {tuple(x.shape)} at axis {a}")
    size = x.shape[d]
    if size < 0:  # a graph's dimension of any size: its size as the graph runs
        size = call("cast", (call("tensor_shape", (x,)),), (dtype_attr(index.dtype),))[d]
    idx = call("where", (call("less", (index, 0)), call("add", (index, size)), index))
    coords = [idx if a == d else _arange_along(index, a) for a in range(n)]
    return call("advanced_index", (x,) + tuple(coords), (tuple(range(n)),))


def gather_d(x, dim, index):
    return gather_elements(x, int_arg(dim, "gather_d", "dim"), index)


def index_select(input, axis, index):  # noqa: A002
    """The slices of input at the 1-D `index` along axis."""
    x = _tensor("index_select", input)
    index = _index("index_select", index)
    if len(index.shape) != 1:
        raise ValueError(f"index_select: index must be 1-D, got shape {tuple(index.shape)}")
    return call("gather", (x, index), (int_arg(axis, "index_select", "axis"), 0))


def take(input, index):  # noqa: A002
    """input flattened, taken at index (the result has index's shape)."""
    x = _tensor("take", input)
    flat = call("reshape", (x,), ((-1,),))
    return call("gather", (flat, _index("take", index)), (0, 0))


def masked_fill(input_x, mask, value):
    """input_x with value where mask holds (mask broadcasts; value a number or a 0-d tensor)."""
    x = _tensor("masked_fill", input_x, "input_x")
    if not is_tensor(mask) or mask.dtype != mstype.bool_:
        raise TypeError("masked_fill: mask must be a bool Tensor")
    if is_tensor(value):
        value = call("cast", (value,), (dtype_attr(x.dtype),))
    else:
        value = tensor_of(np.asarray(value, dtype=_np_dtype(x.dtype)))
    return call("where", (mask, value, x))


def _np_dtype(dtype):
    return np.float32 if dtype == mstype.bfloat16 else mstype.dtype_to_nptype(dtype)


def argwhere(input):  # noqa: A002
    """int64 coordinates (n, ndim) of the nonzero elements."""
    return call("nonzero", (_tensor("argwhere", input),))


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """Where values would be inserted into the last axis of sorted_sequence to keep it sorted
    (left: the first such place, right: the last)."""
    seq = _tensor("searchsorted", sorted_sequence, "sorted_sequence")
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted: side='left' contradicts right=True")
        right = side == "right"
    if sorter is not None:
        seq = gather_elements(seq, len(seq.shape) - 1, _index("searchsorted", sorter, "sorter"))
    vals = values if is_tensor(values) else tensor_of(np.asarray(values, _np_dtype(seq.dtype)))
    if len(seq.shape) > 1 and tuple(seq.shape[:-1]) != tuple(vals.shape[:-1]):
        raise ValueError(f"searchsorted: sorted_sequence {tuple(seq.shape)} and values "
                         f"{tuple(vals.shape)} must match in all but the last dimension")
    v = call("expand_dims", (vals,), (len(vals.shape),))
    s = seq if len(seq.shape) == 1 else call("expand_dims", (seq,), (len(seq.shape) - 1,))
    before = call("less_equal" if right else "less", (s, v))
    dtype = mstype.int32 if out_int32 else mstype.int64
    return call("reduce_sum", (before,), ((-1,), False, dtype_attr(dtype)))


def bucketize(input, boundaries, *, right=False):  # noqa: A002
    """The index of the bucket of each element among the sorted `boundaries` (a list); int32."""
    x = _tensor("bucketize", input)
    if not isinstance(boundaries, (list, tuple)):
        raise TypeError(f"bucketize: boundaries must be a list of numbers, got "
                        f"{type(boundaries).__name__}")
    b = tensor_of(np.asarray(boundaries, _np_dtype(x.dtype) if x.dtype.is_floating_point
                             else np.float32))
    v = call("expand_dims", (x,), (len(x.shape),))
    before = call("less_equal" if right else "less", (b, v))
    return call("reduce_sum", (before,), ((-1,), False, dtype_attr(mstype.int32)))
