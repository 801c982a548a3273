"""mint's sorting, selection, counting, random and empty-creation functions over kiln.ops."""
import numpy as np

from kiln import ops
from kiln.common import dtype as mstype
from kiln.ops._core import is_tensor
from kiln.ops.function.nn_ext import _positions, _run_ends, _run_ids, _run_starts

SAME = ["histc"]  # the same function as kiln.ops (mint's arguments and results)


def _int64(t):
    return ops.cast(t, mstype.int64)


def sort(input, *, dim=-1, descending=False, stable=False):  # noqa: A002 - mint's names
    """(values, int64 indices) along dim (mint's sort; ops.sort's indices are int32)."""
    values, indices = ops.sort(input, dim, descending)
    return values, _int64(indices)


def argsort(input, dim=-1, descending=False, stable=False):  # noqa: A002
    return sort(input, dim=dim, descending=descending, stable=stable)[1]


def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    values, indices = ops.topk(input, k, dim, largest, sorted)
    return values, _int64(indices)


def kthvalue(input, k, dim=-1, keepdim=False):  # noqa: A002
    """(values, int64 indices) of the k-th smallest element along dim (k counts from 1)."""
    axis = dim % len(input.shape) if input.shape else 0
    size = input.shape[axis] if input.shape else 1
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue: k {k} is out of range for dimension {dim} of size {size}")
    src = input if input.shape else ops.reshape(input, (1,))
    values, indices = sort(src, dim=axis)
    values, indices = ops.narrow(values, axis, k - 1, 1), ops.narrow(indices, axis, k - 1, 1)
    if not keepdim or not input.shape:
        values, indices = ops.squeeze(values, axis), ops.squeeze(indices, axis)
    return values, indices


def median(input, dim=None, keepdim=False):  # noqa: A002
    """dim None: the lower median of all elements (one tensor); else (values, int64 indices)."""
    if dim is None:
        flat = ops.sort(ops.reshape(input, (-1,)))[0]
        return flat[(flat.shape[0] - 1) // 2]
    values, indices = ops.median(input, dim, keepdim)
    return values, _int64(indices)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct elements, ascending (PyTorch sorts them whatever sorted says); with
    return_inverse the int64 index of each input element in them, with return_counts how
    often each occurs. dim picks distinct slices along one dimension."""
    if dim is not None:
        return _unique_dim(input, dim, return_inverse, return_counts)
    flat = ops.reshape(input, (-1,))
    ordered, order = ops.sort(flat)  # stable: equal elements keep their input order
    marks = _run_starts(ordered)
    starts = _positions(marks)
    out = [ops.gather(ordered, starts, 0)]
    if return_inverse:  # each sorted element's run, put back at the element's input position
        run = _run_ids(marks)
        out.append(ops.reshape(ops.gather(run, ops.argsort(order), 0), tuple(input.shape)))
    if return_counts:
        out.append(ops.sub(_run_ends(marks), starts))
    return out[0] if len(out) == 1 else tuple(out)


def _unique_dim(input, dim, return_inverse, return_counts):  # noqa: A002
    """Distinct slices along dim, in lexicographic order: sort the slices by their elements
    (least significant key first, stable), then drop consecutive repeats."""
    axis = dim % len(input.shape)
    moved = ops.moveaxis(input, axis, 0)
    rows = ops.reshape(moved, (moved.shape[0], -1))
    order = ops.arange(rows.shape[0], dtype=mstype.int64)
    for col in range(rows.shape[1] - 1, -1, -1):
        key = ops.gather(rows[:, col], order, 0)
        order = ops.gather(order, _stable_argsort(key), 0)
    ranked = ops.gather(rows, order, 0)
    values, inverse_sorted, counts = _unique_rows(ranked)
    out_rows = values.shape[0]
    values = ops.moveaxis(ops.reshape(values, (out_rows,) + tuple(moved.shape[1:])), 0, axis)
    out = [values]
    if return_inverse:
        out.append(ops.tensor_scatter_elements(ops.zeros_like(order), order, inverse_sorted, 0))
    if return_counts:
        out.append(counts)
    return out[0] if len(out) == 1 else tuple(out)


def _unique_rows(ranked):
    """(distinct rows, each row's group, group sizes) of rows sorted so repeats are adjacent."""
    n = ranked.shape[0]
    changed = ops.amax(ops.cast(ops.not_equal(ranked[1:], ranked[:-1]), mstype.int32), 1)
    first = ops.concat((ops.ones((1,), mstype.int32), changed))
    group = ops.sub(ops.cumsum(ops.cast(first, mstype.int64), 0), 1)
    starts = ops.reshape(ops.nonzero(first), (-1,))
    ends = ops.concat((starts[1:], ops.full((1,), n, dtype=mstype.int64)))
    return ops.gather(ranked, starts, 0), group, ops.sub(ends, starts)


def _stable_argsort(key):
    """Ascending order of key; equal keys keep their positions (the argsort op breaks ties by
    index)."""
    return ops.argsort(key, 0, False)


def bincount(input, weights=None, minlength=0):  # noqa: A002
    """How often each value 0..max(input) occurs (int64), or the sum of its weights."""
    if len(input.shape) != 1 or not _is_int(input):
        raise ValueError(f"bincount: input must be a 1-D integer tensor, got {input.dtype} of "
                         f"shape {tuple(input.shape)}")
    if input.shape[0] and int(ops.amin(input)) < 0:
        raise ValueError("bincount: input must not hold negative values")
    length = _builtin_max(int(ops.amax(input)) + 1 if input.shape[0] else 0, minlength)
    if weights is None:
        weights, dtype = ops.ones(input.shape, mstype.int64), mstype.int64
    else:
        dtype = weights.dtype if weights.dtype in mstype.float_type else mstype.float32
        weights = ops.cast(weights, dtype)
    return ops.tensor_scatter_elements(ops.zeros((length,), dtype), _int64(input), weights, 0,
                                       "add")


_builtin_max = max


def _is_int(t):
    return t.dtype in mstype.int_type + mstype.uint_type


# ---- random ----
def bernoulli(input, *, generator=None):  # noqa: A002
    """1 with probability input (elementwise), else 0, in input's dtype."""
    return ops.bernoulli(input, input)


def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002
    return _int64(ops.multinomial(input, num_samples, replacement))


def normal(mean=0.0, std=1.0, size=None, generator=None):
    """Samples of N(mean, std^2); mean/std may be tensors (broadcast), else size gives the shape."""
    if size is None:
        shapes = [tuple(t.shape) for t in (mean, std) if is_tensor(t)]
        if not shapes:
            raise TypeError("normal: give size when mean and std are both numbers")
        size = np.broadcast_shapes(*shapes)
    size = (size,) if isinstance(size, int) else tuple(size)
    return ops.add(ops.mul(ops.standard_normal(size), std), mean)


def randint(*args, generator=None, dtype=None, device=None):
    """randint(high, size) or randint(low, high, size): int64 (or dtype) in [low, high)."""
    if len(args) not in (2, 3):
        raise TypeError(f"randint: takes (high, size) or (low, high, size), got {len(args)} args")
    low, high, shape = (0,) + args if len(args) == 2 else args
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    out = ops.randint(low, high, shape, dtype=mstype.int64)
    return out if dtype is None else ops.cast(out, dtype)


def randint_like(*args, dtype=None, device=None):
    """randint_like(input, high) or (input, low, high): input's shape and (default) dtype."""
    if len(args) not in (2, 3):
        raise TypeError(f"randint_like: takes (input, high) or (input, low, high), got "
                        f"{len(args)} args")
    input, low, high = (args[0], 0, args[1]) if len(args) == 2 else args  # noqa: A001
    out = ops.randint(low, high, tuple(input.shape), dtype=mstype.int64)
    return ops.cast(out, input.dtype if dtype is None else dtype)


def rand_like(input, *, dtype=None, device=None):  # noqa: A002
    return ops.rand_like(input, dtype=dtype)


def randn_like(input, *, dtype=None, device=None):  # noqa: A002
    return ops.randn_like(input, dtype=dtype)


def randperm(n, *, generator=None, dtype=mstype.int64):
    return ops.randperm(n, dtype=dtype)


# ---- creation: kiln has no uninitialised memory to hand out, so the data is zeros ----
def empty(*size, dtype=None, device=None, pin_memory=False):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return ops.zeros(tuple(size), mstype.float32 if dtype is None else dtype)


def empty_like(input, *, dtype=None, device=None, pin_memory=False):  # noqa: A002
    return ops.zeros(tuple(input.shape), input.dtype if dtype is None else dtype)


# what `from kiln.mint.order import *` hands to kiln.mint: the functions defined here
__all__ = [n for n, v in list(globals().items())
           if callable(v) and not n.startswith("_") and getattr(v, "__module__", "") == __name__]
