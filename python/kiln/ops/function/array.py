"""Array functional ops: shapes and views, joining and splitting, gathering, creation, random."""
import builtins
import math
import numbers

import numpy as np

from kiln import _C
from kiln.common import dtype as mstype
from kiln.common._arrays import tensor_of
from kiln.ops import _indexing
from kiln.ops._core import (
    axes_attr,
    call,
    dtype_attr,
    int_arg,
    is_runtime_size,
    is_tensor,
    require_known_sizes,
    shape_attr,
)

__all__ = [
    "assign",
    "reshape", "transpose", "permute", "swapaxes", "broadcast_to", "squeeze", "expand_dims",
    "unsqueeze", "flatten", "concat", "cat", "stack", "split", "chunk", "gather", "one_hot",
    "zeros", "ones", "zeros_like", "ones_like", "full", "full_like", "arange", "depend",
    "nonzero", "masked_select", "narrow", "tile", "rand", "randn", "uniform", "standard_normal",
]

_INT64_MAX = 2**63 - 1


def _ndim(x):
    return len(x.shape)


def _axis(axis, ndim, op, name="axis"):
    """A possibly negative axis wrapped into [0, ndim); IndexError naming `op` otherwise."""
    axis = int_arg(axis, op, name)
    if not -ndim <= axis < ndim:
        raise IndexError(f"{op}: axis {axis} is out of range for a tensor of rank {ndim}")
    return axis + ndim if axis < 0 else axis


# ---- shapes and views ----

def reshape(input, shape):  # noqa: A002 - MindSpore's argument names
    """A view when the layout allows, else a contiguous copy; one dimension may be -1."""
    items = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    computed = [i for i, d in enumerate(items) if _is_size_computed_when_run(d)]
    if computed:
        # A size the graph computes as it runs (x.shape[0] * x.shape[1] there): as the one
        # unknown it is what the other sizes leave, which is what the elements make it.
        if len(computed) > 1 or -1 in [d for d in items if not is_tensor(d)] or \
                any(is_runtime_size(d) for d in items):
            raise ValueError(f"reshape: the target holds {len(computed)} size(s) computed as "
                             f"the graph runs; it may hold one, with no -1 and no size read off "
                             f"a dimension of any size beside it")
        shape = tuple(-1 if i in computed else d for i, d in enumerate(items))
    target = _reshape_target(input, shape)
    items = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    runtime = [is_runtime_size(d) for d in items]
    if any(runtime) and target.count(-1) > 1:
        # Sizes known only when the graph runs (x.shape[0] beside another unknown size): a
        # tensor built from them gives them then (reshape's -2), the -1 is what they leave.
        like = _shaped_as(tuple(d if r else 1 for d, r in zip(items, runtime)), "reshape",
                          "shape")
        sizes = tuple(-2 if r else int(d) for d, r in zip(items, runtime))
        return call("reshape", (input, like), (sizes,))
    return call("reshape", (input,), (target,))


def _is_size_computed_when_run(value):
    """A 0-d integer tensor of a graph: a size it computes as it runs, not a number now."""
    return is_tensor(value) and tuple(value.shape) == () and value.dtype in mstype.int_type \
        and not isinstance(value, _C.TensorBase)


def _reshape_target(input, shape):  # noqa: A002
    """shape as reshape's attribute. In a graph compiled for a dimension of any size, a size the
    user read from input.shape there (`x.view(x.shape[0], -1)`) stands for that dimension: it
    becomes the one -1, and a -1 of the user's becomes the size the other known dimensions
    leave, so that the graph reshapes as PyNative would for every size."""
    items = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    read = [i for i, d in enumerate(items) if is_runtime_size(d)]
    # Otherwise a size read off a dimension of any size is reshape's -1: whatever is left.
    as_minus_one = tuple(-1 if i in read else d for i, d in enumerate(items))
    if len(read) != 1 or items[read[0]].tensor is not input:
        return shape_attr(as_minus_one if read else shape, "reshape")
    axis = items[read[0]].axis
    dims = tuple(input.shape)
    if any(d < 0 for i, d in enumerate(dims) if i != axis):
        return shape_attr(as_minus_one, "reshape")  # more than one unknown: reshape's own rules
    known = math.prod(d for i, d in enumerate(dims) if i != axis)
    rest = [int(d) for i, d in enumerate(items) if i != read[0]]
    if rest.count(-1) == 1:
        fixed = math.prod(d for d in rest if d != -1)
        if fixed == 0 or known % fixed:
            raise ValueError(f"reshape: cannot reshape {_shown(dims)} to {_shown(items)}")
        rest[rest.index(-1)] = known // fixed
    elif math.prod(rest) != known:
        raise ValueError(f"reshape: cannot reshape {_shown(dims)} to {_shown(items)}")
    rest.insert(read[0], -1)
    return tuple(rest)


def _shown(dims):
    return "(" + ", ".join("?" if d < 0 else str(int(d)) for d in dims) + ")"


def transpose(input, input_perm):  # noqa: A002
    return call("transpose", (input,), (shape_attr(input_perm, "transpose", "input_perm"),))


def permute(input, axis):  # noqa: A002
    return call("transpose", (input,), (shape_attr(axis, "permute", "axis"),))


def swapaxes(input, axis0, axis1):  # noqa: A002
    n = _ndim(input)
    perm = list(range(n))
    a, b = _axis(axis0, n, "swapaxes", "axis0"), _axis(axis1, n, "swapaxes", "axis1")
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(input, tuple(perm))


def broadcast_to(input, shape):  # noqa: A002
    """A read-only-in-spirit view with zero strides; -1 keeps the input's dimension."""
    items = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if any(is_runtime_size(d) for d in items):
        # Sizes read off tensors along dimensions of any size (x.shape in a graph compiled for
        # them): known when the graph runs, where broadcast_to's -1 would keep input's size.
        like = _shaped_as(tuple(1 if d == -1 and not is_runtime_size(d)
                                else d for d in items), "broadcast_to", "shape")
        return _broadcast_like(input, like)
    return call("broadcast_to", (input,), (shape_attr(shape, "broadcast_to"),))


def _broadcast_like(input, like):  # noqa: A002
    """input broadcast with `like`'s shape as the graph runs (a copy): for shapes along
    dimensions of any size, which broadcast_to's attribute cannot name."""
    if input.dtype == mstype.bool_:
        return call("logical_or", (input, call("fill_like", (like,), (0, dtype_attr(input.dtype)))))
    return call("add", (input, call("fill_like", (like,), (0, dtype_attr(input.dtype)))))


def squeeze(input, axis=None):  # noqa: A002
    """Drops the size-1 axes listed in `axis` (all of them when None)."""
    return call("squeeze", (input,), (axes_attr(axis, "squeeze"),))


def expand_dims(input_x, axis):
    return call("expand_dims", (input_x,), (int_arg(axis, "expand_dims", "axis"),))


def unsqueeze(input, dim):  # noqa: A002
    return call("expand_dims", (input,), (int_arg(dim, "unsqueeze", "dim"),))


def flatten(input, order="C", *, start_dim=1, end_dim=-1):  # noqa: A002
    """Merges the axes start_dim..end_dim into one; a 0-d input becomes shape (1,)."""
    if not isinstance(order, str):  # a wrong type, as MindSpore tells it from a wrong value
        raise TypeError(f"flatten: order must be a str, 'C' or 'F', got {type(order).__name__}")
    if order not in ("C", "F"):
        raise ValueError(f"flatten: order must be 'C' or 'F', got {order!r}")
    shape = tuple(input.shape)
    if not shape:
        return reshape(input, (1,))
    if order == "F":
        input = transpose(input, tuple(reversed(range(len(shape)))))
        shape = shape[::-1]
    start = _axis(start_dim, len(shape), "flatten", "start_dim")
    end = _axis(end_dim, len(shape), "flatten", "end_dim")
    if start > end:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    merged = math.prod(shape[start:end + 1])
    if builtins.min(shape) < 0:
        # A graph's dimensions of any size: the kept ones by their sizes as the graph runs, the
        # merged one as what they leave (-1) when it holds one of them.
        kept = [size_when_run(input, i) for i in range(len(shape))]
        merged = -1 if builtins.min(shape[start:end + 1]) < 0 else merged
        return reshape(input, tuple(kept[:start]) + (merged,) + tuple(kept[end + 1:]))
    return reshape(input, shape[:start] + (merged,) + shape[end + 1:])


def narrow(input, axis, start, length):  # noqa: A002
    """The `length` elements from `start` along `axis`, as a view."""
    n = _ndim(input)
    axis = _axis(axis, n, "narrow")
    size = input.shape[axis]
    if size < 0:
        require_known_sizes("narrow", input)
    start, length = int_arg(start, "narrow", "start"), int_arg(length, "narrow", "length")
    start = start + size if start < 0 else start
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise ValueError(f"narrow: start {start} and length {length} do not fit axis {axis} "
                         f"of size {size}")
    return _slice_axis(input, axis, start, start + length)


def _slice_axis(x, axis, start, stop, step=1):
    begin = (0,) * axis + (start,)
    end = (_INT64_MAX,) * axis + (stop,)
    return call("strided_slice", (x,), (begin, end, (1,) * axis + (step,)))


# ---- joining and splitting ----

def concat(tensors, axis=0):
    """Joins tensors along an existing axis; dtypes promote to their common type."""
    tensors = tuple(tensors)
    if not tensors:
        raise ValueError("concat: expected at least one tensor")
    return call("concat", tensors, (int_arg(axis, "concat", "axis"),))


cat = concat


def stack(tensors, axis=0):
    """Joins tensors along a new axis; all must have the same shape."""
    tensors = tuple(tensors)
    if not tensors:
        raise ValueError("stack: expected at least one tensor")
    shape = tuple(tensors[0].shape)
    for i, t in enumerate(tensors):
        if tuple(t.shape) != shape:
            raise ValueError(f"stack: tensor {i} has shape {tuple(t.shape)}, expected {shape}")
    axis = _axis(axis, len(shape) + 1, "stack")
    return concat([expand_dims(t, axis) for t in tensors], axis)


def split(tensor, split_size_or_sections, axis=0):
    """Views of `tensor` along axis: chunks of an int size (the last may be smaller), or the
    listed section sizes. Returns a tuple."""
    axis = _axis(axis, _ndim(tensor), "split")
    size = tensor.shape[axis]
    if not isinstance(split_size_or_sections, (tuple, list)):
        step = int_arg(split_size_or_sections, "split", "split_size_or_sections")
        if step <= 0:
            raise ValueError(f"split: split_size must be positive, got {step}")
        sizes = [min(step, size - s) for s in range(0, size, step)] or [0]
    else:
        sizes = list(shape_attr(split_size_or_sections, "split", "split_size_or_sections"))
        if builtins.sum(sizes) != size:
            raise ValueError(f"split: sections {sizes} do not sum to axis {axis}'s size {size}")
    out = call("split", (tensor,), (axis, tuple(sizes)))
    return out if isinstance(out, tuple) else (out,)


def chunk(input, chunks, axis=0):  # noqa: A002
    """At most `chunks` views of equal size ceil(n / chunks) along axis (the last smaller)."""
    chunks = int_arg(chunks, "chunk", "chunks")
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    size = input.shape[_axis(axis, _ndim(input), "chunk")]
    step = -(-size // chunks) if size else 1
    return split(input, builtins.max(step, 1), axis)


def tile(input, dims):  # noqa: A002
    """Repeats the whole tensor `dims[i]` times along each axis (np.tile)."""
    dims = shape_attr(dims, "tile", "dims")
    shape = tuple(input.shape)
    if builtins.min(shape, default=0) < 0:
        # A graph's dimension of any size: copies joined along each axis, which needs no size.
        x = input
        for _ in range(len(dims) - len(shape)):
            x = call("expand_dims", (x,), (0,))
        dims = (1,) * (len(x.shape) - len(dims)) + dims
        for axis, reps in enumerate(dims):
            if reps > 1:
                x = call("concat", (x,) * reps, (axis,))
            elif reps == 0:  # nothing along that axis
                ends = tuple(0 if a == axis else _indexing._TO_END for a in range(len(dims)))
                x = call("strided_slice", (x,), ((0,) * len(dims), ends, (1,) * len(dims)))
        return x
    n = builtins.max(len(dims), len(shape))
    dims = (1,) * (n - len(dims)) + dims
    shape = (1,) * (n - len(shape)) + shape
    x = reshape(input, builtins.sum(((1, d) for d in shape), ()))
    x = broadcast_to(x, builtins.sum(((r, d) for r, d in zip(dims, shape)), ()))
    return reshape(x, tuple(r * d for r, d in zip(dims, shape)))


# ---- gathering ----

def gather(input_params, input_indices, axis, batch_dims=0):
    """np.take(input_params, input_indices, axis); negative indices wrap."""
    return call("gather", (input_params, _as_index_tensor(input_indices)),
                (int_arg(axis, "gather", "axis"), int_arg(batch_dims, "gather", "batch_dims")))


def one_hot(indices, depth, on_value=1, off_value=0, axis=-1):
    """One-hot vectors along a new axis; the dtype is on_value's (int64 for ints, float32 for
    floats). Indices outside [0, depth) give all off_value."""
    return one_hot_checked(indices, depth, on_value, off_value, axis, out_of_range_error="")


def one_hot_checked(indices, depth, on_value, off_value, axis, out_of_range_error):
    """one_hot for indices that must lie in [0, depth) (class labels, ids): the kernel raises
    IndexError("<out_of_range_error> <index> is out of range [0, depth)") in both modes."""
    if is_tensor(on_value):
        dtype = on_value.dtype
    elif isinstance(on_value, float) or isinstance(off_value, float):
        dtype = mstype.float32
    else:
        dtype = mstype.int64
    on, off = _scalar(on_value), _scalar(off_value)
    return call("one_hot", (_as_index_tensor(indices),),
                (int_arg(depth, "one_hot", "depth"), int_arg(axis, "one_hot", "axis"), on, off,
                 dtype_attr(dtype), out_of_range_error))


def nonzero(input, as_tuple=False):  # noqa: A002
    """int64 coordinates (n, ndim) of the nonzero elements; a tuple of columns if as_tuple."""
    coords = call("nonzero", (input,))
    if not as_tuple:
        return coords
    n = coords.shape[1]
    if n == 0:
        return ()
    return tuple(reshape(c, (-1,)) for c in split(coords, 1, axis=1))


def masked_select(input, mask):  # noqa: A002
    """The elements of input where mask (broadcast with it) holds, as a 1-D tensor."""
    shape = _broadcast_shape(tuple(input.shape), tuple(mask.shape))
    return _indexing.getitem(broadcast_to(input, shape), broadcast_to(mask, shape))


def _broadcast_shape(a, b):
    n = builtins.max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {a} and {b} cannot be broadcast together")
        out.append(y if x == 1 else x)
    return tuple(out)


def depend(value, expr):
    """Returns value, ordered after expr (a no-op data dependency in PyNative mode)."""
    return call("depend", (value, expr))


# ---- creation ----

def zeros(size=None, dtype=None, *, shape=None):
    """A tensor of zeros; the shape as `size` or, as MindSpore names it, `shape=`."""
    return _fill(_shape_argument("zeros", size, shape), 0, dtype or mstype.float32, "zeros",
                 "size" if shape is None else "shape")


def ones(size=None, dtype=None, *, shape=None):
    """A tensor of ones; the shape as `size` or, as MindSpore names it, `shape=`."""
    return _fill(_shape_argument("ones", size, shape), 1, dtype or mstype.float32, "ones",
                 "size" if shape is None else "shape")


def _shape_argument(op, size, shape):
    if (size is None) == (shape is None):
        raise TypeError(f"{op}: give the shape once, as the first argument or as shape=")
    return size if shape is None else shape


def zeros_like(input, *, dtype=None):  # noqa: A002
    return _fill(tuple(input.shape), 0, dtype or input.dtype, "zeros_like", like=input)


def ones_like(input, *, dtype=None):  # noqa: A002
    return _fill(tuple(input.shape), 1, dtype or input.dtype, "ones_like", like=input)


def full(size, fill_value, *, dtype=None):
    """A tensor of `size` filled with fill_value; the dtype follows the value's Python type
    (bool, int -> int64, float -> float32) unless given."""
    if dtype is None:
        dtype = _value_dtype(fill_value)
    return _fill(size, fill_value, dtype, "full")


def full_like(input, fill_value, *, dtype=None):  # noqa: A002
    return _fill(tuple(input.shape), fill_value, dtype or input.dtype, "full_like", like=input)


_INT64_MAX = (1 << 63) - 1


def _fill(size, value, dtype, op, name="size", like=None):
    if isinstance(size, _C.TensorBase):
        size = tuple(size.asnumpy().reshape(-1).tolist())
    mstype.check_int_fits(value, dtype, op)
    value = _scalar(value)
    if isinstance(value, int) and value > _INT64_MAX and mstype.to_dtype(dtype) is mstype.uint64:
        # fill's value attribute is an int64: a uint64 value past it travels as the int64 of the
        # same bits, which the kernel's conversion to uint64 (modulo 2**64) turns back.
        value -= 1 << 64
    # In a graph compiled for dimensions of any size the shape is known only when it runs:
    # fill_like takes it from a tensor then (`like`, or one shaped from the sizes read off
    # tensors, as in ops.zeros((x.shape[0], hidden))).
    if like is None or builtins.min(tuple(like.shape), default=0) >= 0:
        like = _shaped_as(size, op, name)
    if like is not None:
        return call("fill_like", (like,), (value, dtype_attr(dtype)))
    return call("fill", (), (shape_attr(size, op, name), value, dtype_attr(dtype)))


class _SizeWhenRun(int):
    """-1 to every computation, but creation ops and broadcast_to (through _shaped_as) take the
    size of `tensor`'s `axis` as the graph runs: kiln's own layers' way to build, say, an
    initial state for a batch whose size the graph does not know."""

    kiln_dim_of_any_size = True

    def __new__(cls, tensor, axis):
        size = super().__new__(cls, -1)
        size.tensor, size.axis = tensor, axis
        return size


def size_when_run(tensor, axis):
    """tensor.shape[axis]; where that is -1 (a graph compiled for dimensions of any size) a -1
    that zeros/ones/full/fill and broadcast_to resolve to the size the graph runs with."""
    size = tuple(tensor.shape)[axis]
    return _SizeWhenRun(tensor, axis % len(tensor.shape)) if size < 0 else size


def _shaped_as(size, op, name):
    """A float32 tensor of `size`'s shape when `size` holds sizes a graph reads off tensors
    along dimensions of any size (x.shape[0] there); None otherwise."""
    items = tuple(size) if isinstance(size, (tuple, list)) else (size,)
    read = [i for i, d in enumerate(items) if is_runtime_size(d)]
    if not read:
        return None
    static = tuple(1 if i in read else d for i, d in enumerate(items))
    out = call("fill", (), (shape_attr(static, op, name), 0, dtype_attr(mstype.float32)))
    for i in read:
        # Zeros along that axis of its tensor, as many as the graph runs with, at position i.
        line = _indexing.filled_along(items[i].tensor, items[i].axis, 0, mstype.float32)
        for _ in range(len(items) - 1 - i):
            line = call("expand_dims", (line,), (-1,))
        out = out + line
    return out


def _value_dtype(value):
    if isinstance(value, _C.TensorBase):
        return value.dtype
    if isinstance(value, bool):
        return mstype.bool_
    if isinstance(value, numbers.Integral):
        return mstype.int64
    return mstype.float32


def _scalar(value):
    """A Python number from a number, a NumPy scalar or a one-element tensor."""
    if hasattr(value, "item") and not isinstance(value, (bool, int, float)):
        value = value.item()
    if isinstance(value, (bool, int, float)):
        return value
    raise TypeError(f"expected a number, got {type(value).__name__}")


def runtime_positions(size):
    """int64 0, 1, ..., n - 1 for a size read off a dimension of any size (x.shape[i] in a graph
    compiled for it), n being that dimension's size as the graph runs."""
    return _indexing.runtime_positions_along(size.tensor, size.axis)


def arange(start=0, end=None, step=1, *, dtype=None):
    """Values from start (inclusive) to end (exclusive) by step: NumPy's length rule. The dtype
    is int64 when every argument is an int, float32 when any is a float, unless given."""
    if end is None:
        start, end = 0, start
    if is_runtime_size(end):  # ops.arange(x.shape[1]) in a graph compiled for any size
        return _arange_to_runtime_size(start, end, step, dtype)
    start, end, step = _scalar(start), _scalar(end), _scalar(step)
    if dtype is None:
        is_float = any(isinstance(v, float) for v in (start, end, step))
        dtype = mstype.float32 if is_float else mstype.int64
    return call("arange", (), (start, end, step, dtype_attr(dtype)))


def _arange_to_runtime_size(start, end, step, dtype):
    """arange(start, end, step) for an `end` known when the graph runs: start + step * k for the
    positions k of end's dimension, those below end kept."""
    start, step = _scalar(start), _scalar(step)
    if not isinstance(step, int) or step <= 0 or not isinstance(start, int) or start < 0:
        raise ValueError(f"arange: with an end known only when the graph runs (a dimension "
                         f"declared None), start must be a non-negative int and step a positive "
                         f"int, got {start!r} and {step!r}")
    pos = runtime_positions(end)
    values = call("add", (call("mul", (pos, step)), start)) if (start, step) != (0, 1) else pos
    if (start, step) != (0, 1):
        count = call("reduce_sum", (call("fill_like", (pos,), (1, dtype_attr(mstype.int64))),),
                     (None, False, None))
        values = _indexing.getitem(values, call("less", (values, count)))
    return values if dtype is None else call("cast", (values,), (dtype_attr(dtype),))


# ---- random ----

def _size_args(size, op):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    return shape_attr(size, op, "size")


def _seed(seed, op):
    return None if seed is None else int_arg(seed, op, "seed")


def _runtime_shape_of(shape, op):
    """(a tensor of `shape`,) where the shape holds sizes read off dimensions of any size (the
    random ops take it as the graph runs), else ()."""
    items = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    like = _shaped_as(items, op, "shape")
    return () if like is None else (like,)


def rand(*size, dtype=None, seed=None):
    """Uniform samples in [0, 1)."""
    shape = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    return call("uniform_real", _runtime_shape_of(shape, "rand"),
                (_size_args(size, "rand"), dtype_attr(dtype or mstype.float32), 0.0, 1.0,
                 _seed(seed, "rand")))


def randn(*size, dtype=None, seed=None):
    """Standard normal samples."""
    shape = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    return call("standard_normal", _runtime_shape_of(shape, "randn"),
                (_size_args(size, "randn"), dtype_attr(dtype or mstype.float32), 0.0, 1.0,
                 _seed(seed, "randn")))


def standard_normal(shape, seed=None, dtype=mstype.float32):
    return call("standard_normal", _runtime_shape_of(shape, "standard_normal"),
                (shape_attr(shape, "standard_normal"), dtype_attr(dtype), 0.0, 1.0,
                 _seed(seed, "standard_normal")))


def uniform(shape, minval, maxval, seed=None, dtype=mstype.float32):
    """Uniform samples in [minval, maxval)."""
    return call("uniform_real", _runtime_shape_of(shape, "uniform"),
                (shape_attr(shape, "uniform"), dtype_attr(dtype), float(_scalar(minval)),
                 float(_scalar(maxval)), _seed(seed, "uniform")))


def _as_index_tensor(indices):
    if is_tensor(indices):
        return indices
    return tensor_of(np.asarray(indices, dtype=np.int64))


def assign(variable, value):
    """Writes value (broadcast and converted to variable's dtype) into variable in place and
    returns it; in a compiled graph it is an ordered side effect on the Parameter."""
    if not is_tensor(variable):
        raise TypeError("assign: variable must be a Tensor or Parameter, got "
                        f"{type(variable).__name__}")
    return call("assign", (variable, value))
