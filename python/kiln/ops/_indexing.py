"""NumPy indexing for Tensor.__getitem__/__setitem__, built on the registry's view and index ops.

An index is split into a *basic* part -- ints, slices, None and ``...`` -- applied as one
strided_slice plus one reshape (always views), and an *advanced* part -- integer and boolean
arrays -- applied by advanced_index / index_put at the axes they index. Slices with negative
steps are taken as the same elements in ascending order and then reversed along the result
axis (a copy; kiln strides are never negative); setitem reverses the value instead, so the
destination stays a view. As in NumPy, an int beside an array index counts as a 0-d array
(it takes part in placing the broadcast index dimensions).
"""
import math
import numbers

import numpy as np

from kiln import _C
from kiln.common import dtype as mstype
from kiln.common._arrays import tensor_of
from kiln.ops._core import call, dtype_attr, is_tensor

# strided_slice's end for "to the end of the axis": runtime clamping makes it the axis's size,
# which a graph compiled for a dimension of any size (-1) does not know.
_TO_END = 2**63 - 1


class _Plan:
    """The parsed index: how to slice, reshape, advance-index and reverse one tensor."""

    def __init__(self):
        self.begin, self.end, self.steps = [], [], []  # strided_slice over the input's dims
        self.view_shape = []       # shape after dropping int axes and inserting None axes
        self.advanced = []         # (view axis, int64 Tensor)
        self.reversed = []         # view axes taken with a negative step
        self.int_dims = []         # input dims an int takes (kept, length 1, by strided_slice)
        self.new_axes = []         # view_shape positions that None inserts


class InvalidIndexError(IndexError, TypeError):
    """An index of a type that cannot index (a float, a float tensor, a dict...): an IndexError
    as NumPy and MindSpore raise, and a TypeError as kiln raised before."""


def _is_int(item):
    return isinstance(item, numbers.Integral) and not isinstance(item, (bool, np.bool_))


def _classify(item):
    """Returns (kind, payload): kind is 'int', 'slice', 'none', 'ellipsis', 'array' or 'bool'."""
    if item is None:
        return "none", None
    if item is Ellipsis:
        return "ellipsis", None
    if isinstance(item, slice):
        return "slice", item
    if isinstance(item, (bool, np.bool_)):
        return "bool", np.asarray(bool(item))
    if _is_int(item):
        return "int", int(item)
    if is_tensor(item):
        if item.dtype.is_floating_point:
            raise InvalidIndexError(f"tensors used as indices must be integer or bool, got "
                                    f"{item.dtype}")
        if item.dtype == mstype.bool_:
            return "bool", item
        return "array", item
    if isinstance(item, (list, tuple, np.ndarray)):
        arr = np.asarray(item)
        if arr.dtype == np.bool_:
            return "bool", arr
        if arr.size == 0 and arr.dtype != object:
            arr = arr.astype(np.int64)
        if not np.issubdtype(arr.dtype, np.integer):
            raise InvalidIndexError(f"arrays used as indices must be integer or bool, got "
                                    f"{arr.dtype}")
        return "array", tensor_of(arr.astype(np.int64, copy=False))
    raise InvalidIndexError(f"invalid index of type {type(item).__name__}: only integers, "
                            f"slices, None, ..., and integer or boolean tensors/arrays are "
                            f"valid indices")


def _consumed(kind, payload):
    if kind in ("int", "slice", "array"):
        return 1
    if kind == "bool":
        return len(payload.shape)  # a 0-d bool consumes nothing
    return 0


def _plan(shape, index):
    """Parses `index` against a tensor of `shape` into a _Plan."""
    if not isinstance(index, tuple):
        index = (index,)
    items = [_classify(i) for i in index]
    if sum(k == "ellipsis" for k, _ in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(_consumed(k, p) for k, p in items)
    ndim = len(shape)
    if used > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    plan = _Plan()
    has_advanced = any(k in ("array", "bool") for k, _ in items)
    dim = 0
    for kind, payload in items:
        if kind == "ellipsis":
            for _ in range(ndim - used):
                _keep_axis(plan, shape[dim])
                dim += 1
        elif kind == "none":
            plan.new_axes.append(len(plan.view_shape))
            plan.view_shape.append(1)
        elif kind == "int" and shape[dim] < 0:
            # A dimension of any size (a declared None): the bound is checked when the graph
            # runs, by a 0-d index (placed as the int would be; NumPy's rule agrees).
            plan.advanced.append((len(plan.view_shape), tensor_of(np.array(payload, np.int64))))
            _keep_axis(plan, shape[dim])
            dim += 1
        elif kind == "int":
            size = shape[dim]
            if not -size <= payload < size:
                raise IndexError(f"index {payload} is out of bounds for axis {dim} with size "
                                 f"{size}")
            i = payload + size if payload < 0 else payload
            if has_advanced:  # NumPy: beside arrays, an int is a 0-d array and places like one
                plan.advanced.append((len(plan.view_shape), tensor_of(np.array(i, np.int64))))
                _keep_axis(plan, size)
            else:
                plan.begin.append(i)
                plan.end.append(i + 1)
                plan.steps.append(1)
                plan.int_dims.append(dim)
            dim += 1
        elif kind == "slice":
            _slice_axis(plan, payload, shape[dim])
            dim += 1
        elif kind == "array":
            plan.advanced.append((len(plan.view_shape), payload))
            _keep_axis(plan, shape[dim])
            dim += 1
        else:
            dim = _bool_index(plan, payload, shape, dim)
    for _ in range(dim, ndim):  # trailing axes not indexed: an implicit ellipsis
        _keep_axis(plan, shape[dim])
        dim += 1
    return plan


def _keep_axis(plan, size):
    plan.begin.append(0)
    plan.end.append(size if size >= 0 else _TO_END)
    plan.steps.append(1)
    plan.view_shape.append(size)


def _slice_of_any_size(plan, sl):
    """A slice along a dimension of any size: Python's bounds, resolved when the graph runs."""
    step = 1 if sl.step is None else int(sl.step)
    if step == 0:
        raise ValueError("slice step cannot be zero")
    if step < 0:
        raise IndexError("a slice with a negative step along a dimension declared of any size "
                         "(None) is not supported; reverse the tensor with ops.flip")
    plan.begin.append(0 if sl.start is None else int(sl.start))
    plan.end.append(_TO_END if sl.stop is None else int(sl.stop))
    plan.steps.append(step)
    plan.view_shape.append(-1)


def _slice_axis(plan, sl, size):
    if size < 0:
        _slice_of_any_size(plan, sl)
        return
    start, stop, step = sl.indices(size)
    count = len(range(start, stop, step))
    if step < 0:
        # The same elements in ascending order; the result axis is reversed afterwards.
        if count:
            start, stop = start + (count - 1) * step, start + 1
        else:
            start = stop = 0
        plan.reversed.append(len(plan.view_shape))
        step = -step
    plan.begin.append(start)
    plan.end.append(max(stop, start))
    plan.steps.append(step)
    plan.view_shape.append(count)


def _bool_index(plan, mask, shape, dim):
    """A boolean mask over the next mask.ndim axes: its nonzero coordinates index them."""
    mshape = tuple(mask.shape)
    if not mshape:  # a 0-d bool adds an axis of length 1 (True) or 0 (False)
        value = bool(mask.item()) if hasattr(mask, "item") else bool(mask)
        plan.advanced.append((len(plan.view_shape), tensor_of(np.zeros(int(value), np.int64))))
        plan.view_shape.append(1)
        return dim
    for j, m in enumerate(mshape):
        if shape[dim + j] != m:
            raise IndexError(f"boolean index did not match indexed tensor along axis {dim + j}; "
                             f"size of axis is {shape[dim + j]} but size of corresponding "
                             f"boolean axis is {m}")
    if isinstance(mask, np.ndarray):
        coords = [tensor_of(c.astype(np.int64)) for c in np.nonzero(mask)]
    else:
        nz = call("nonzero", (mask,))  # (n, k)
        columns = call("split", (nz,), (1, (1,) * len(mshape)))
        columns = columns if isinstance(columns, tuple) else (columns,)
        coords = [call("reshape", (c,), ((-1,),)) for c in columns]
    for j, c in enumerate(coords):
        plan.advanced.append((len(plan.view_shape), c))
        _keep_axis(plan, shape[dim + j])
    return dim + len(mshape)


def _basic_view(tensor, plan):
    """The strided_slice + reshape view for the basic part of the plan."""
    view = tensor
    if any(s != 1 or b != 0 or (e < d if d >= 0 else e != _TO_END) for b, e, s, d in
           zip(plan.begin, plan.end, plan.steps, tensor.shape)):
        view = call("strided_slice", (tensor,),
                    (tuple(plan.begin), tuple(plan.end), tuple(plan.steps)))
    if tuple(view.shape) == tuple(plan.view_shape):
        return view
    if all(d >= 0 for d in plan.view_shape):
        return call("reshape", (view,), (tuple(plan.view_shape),))
    # Dimensions of any size (-1): no reshape can name them, so the int axes are squeezed and
    # the None axes inserted one by one.
    if plan.int_dims:
        view = call("squeeze", (view,), (tuple(plan.int_dims),))
    for axis in plan.new_axes:
        view = call("expand_dims", (view,), (axis,))
    return view


def _result_axis(plan, axis, ndim_b):
    """Where view axis `axis` (not advanced) lands in the advanced-indexing result."""
    axes = [a for a, _ in plan.advanced]
    if not axes:
        return axis
    adjacent = all(b == a + 1 for a, b in zip(axes, axes[1:]))
    if adjacent:
        return axis if axis < axes[0] else axis - len(axes) + ndim_b
    return ndim_b + sum(1 for a in range(axis) if a not in axes)


def _index_ndim(plan):
    shapes = [tuple(t.shape) for _, t in plan.advanced]
    return max((len(s) for s in shapes), default=0)


def _reverse(x, axis):
    n = x.shape[axis]
    if n < 0:
        rev = _reversed_positions(x, axis)
    elif n <= 1:
        return x
    else:
        rev = call("arange", (), (n - 1, -1, -1))
    return call("advanced_index", (x, rev), ((axis,),))


def filled_along(x, axis, value, dtype=mstype.int64):
    """A vector of `value`, one per position of x's axis as the graph runs (a dimension declared
    of any size): x's line along that axis (index 0 elsewhere), filled."""
    line = getitem(x, tuple(slice(None) if d == axis else 0 for d in range(len(x.shape))))
    return call("fill_like", (line,), (value, dtype_attr(dtype)))


def runtime_positions_along(x, axis):
    """int64 0, 1, ..., n - 1 for the size n of x's axis as the graph runs (a vector): the
    running count of ones, less one."""
    return call("sub", (call("cumsum", (filled_along(x, axis, 1),), (0, False)), 1))


def runtime_size(x, axis):
    """The size of x's axis as the graph runs: a 0-d int64 tensor."""
    return call("tensor_shape", (x,))[axis]


def _reversed_positions(x, axis):
    """n - 1, ..., 0 for the size n that x's axis has when the graph runs."""
    return call("sub", (call("sub", (runtime_size(x, axis), 1)), runtime_positions_along(x, axis)))


def positions_along(x, axis):
    """int64 positions 0..n-1 along x's axis, shaped to broadcast against x (n at `axis`, 1
    elsewhere); where n is known only when the graph runs, the running count of ones less one."""
    n, rank = x.shape[axis], len(x.shape)
    if n >= 0:
        shape = [1] * rank
        shape[axis] = n
        return tensor_of(np.arange(n, dtype=np.int64).reshape(shape))
    pos = runtime_positions_along(x, axis)
    for _ in range(rank - 1 - axis):
        pos = call("expand_dims", (pos,), (-1,))
    for _ in range(axis):
        pos = call("expand_dims", (pos,), (0,))
    return pos


def getitem(tensor, index):
    """tensor[index] with NumPy's semantics; basic indices give views, advanced ones copies."""
    plan = _plan(tuple(tensor.shape), index)
    out = _basic_view(tensor, plan)
    if plan.advanced:
        axes = tuple(a for a, _ in plan.advanced)
        out = call("advanced_index", (out,) + tuple(t for _, t in plan.advanced), (axes,))
    elif out is tensor:
        out = call("strided_slice", (tensor,), ((), (), ()))  # a new view object, like NumPy
    ndim_b = _index_ndim(plan)
    for axis in plan.reversed:
        out = _reverse(out, _result_axis(plan, axis, ndim_b))
    return out


def setitem(tensor, index, value, traced=None):
    """tensor[index] = value in place: value broadcasts to the indexed shape and converts to
    tensor's dtype. Returns the tensor as written: `tensor` itself, or (traced) the output of
    the one op that wrote it.

    Writing through a view (strided_slice + assign) is fastest, but a gradient cannot follow
    it: the tape and the IR's autodiff see the view written, not `tensor`. Where a gradient may
    follow (`traced`; by default while a PyNative tape records), the write is one op over
    tensor's own axes instead (_setitem_traced), whose gradient rule routes dy to both sides."""
    if traced is None:
        traced = _C.tape_active() and not _C.graph_target()
    if traced:
        return _setitem_traced(tensor, index, value)
    plan = _plan(tuple(tensor.shape), index)
    target = _basic_view(tensor, plan)
    if is_tensor(value):
        if value._shares_storage(tensor):
            value = value.copy()  # overlapping source and destination
    elif isinstance(value, (bool, int, float)):
        mstype.check_int_fits(value, tensor.dtype, "setitem")
        plan.reversed = []  # a number reads the same in either order; the op converts it exactly
    else:
        value = tensor_of(_as_value_array(value))
    if plan.advanced:
        axes = tuple(a for a, _ in plan.advanced)
        indices = tuple(t for _, t in plan.advanced)
        if plan.reversed:
            value = _reversed_value(value, plan, _indexed_shape(target, plan))
        else:
            value = _strip_leading_ones(value, len(_indexed_shape(target, plan)))
        call("index_put", (target, value) + indices, (axes, False))
    else:
        if plan.reversed:
            value = _reversed_value(value, plan, tuple(target.shape))
        else:
            value = _strip_leading_ones(value, len(target.shape))
        call("assign", (target, value))
    return tensor


def _setitem_traced(tensor, index, value):
    """tensor[index] = value as one index_put on `tensor` (or, 0-d, one assign): the element
    positions the index selects are found by indexing a tensor of flat positions the same way,
    so ints, slices (negative steps too), None, ..., and integer and boolean arrays all keep
    NumPy's meaning, in the index's order."""
    shape = tuple(tensor.shape)
    value = _value_operand(tensor, value)
    positions = call("arange", (), (0, math.prod(shape), 1))
    dest = getitem(call("reshape", (positions,), (shape,)), index)
    value = _strip_leading_ones(value, len(dest.shape))
    if not shape:  # the one element, or none (x[False] = v)
        if 0 in dest.shape:
            return tensor
        if is_tensor(value):  # dest holds one element: the value must broadcast to it
            value = call("reshape", (call("broadcast_to", (value,), (tuple(dest.shape),)),), ((),))
        return call("assign", (tensor, value))
    coords, stride = [], 1
    for size in reversed(shape):  # the coordinate along each axis of every flat position
        c = call("floor_div", (dest, stride)) if stride > 1 else dest
        coords.append(call("mod", (c, size)) if len(coords) < len(shape) - 1 else c)
        stride *= size
    coords.reverse()
    return call("index_put", (tensor, value) + tuple(coords), (tuple(range(len(shape))), False))


def _value_operand(tensor, value):
    """A setitem value as an op operand: a tensor, a number that fits tensor's dtype, or an
    array-like made a tensor."""
    if is_tensor(value):
        return value
    if isinstance(value, (bool, int, float)):
        mstype.check_int_fits(value, tensor.dtype, "setitem")
        return value
    return tensor_of(_as_value_array(value))


def _as_value_array(value):
    arr = np.asarray(value)
    if arr.dtype == object:
        raise TypeError(f"cannot assign a value of type {type(value).__name__} to a tensor")
    return arr


def _strip_leading_ones(value, ndim):
    """NumPy lets a value carry extra leading size-1 axes; drop them so it broadcasts."""
    if not hasattr(value, "shape") or len(value.shape) <= ndim:
        return value
    shape = tuple(value.shape)
    extra = len(shape) - ndim
    if any(d != 1 for d in shape[:extra]):
        raise ValueError(f"could not broadcast value of shape {shape} to the indexed shape")
    return call("reshape", (value,), (shape[extra:],))


def _indexed_shape(target, plan):
    """The shape target[advanced part] has (what advanced_index would return)."""
    b = _broadcast_index_shapes([tuple(t.shape) for _, t in plan.advanced])
    axes = [a for a, _ in plan.advanced]
    rest = [d for i, d in enumerate(target.shape) if i not in axes]
    if all(y == x + 1 for x, y in zip(axes, axes[1:])):
        k = axes[0]
        return tuple(rest[:k]) + tuple(b) + tuple(rest[k:])
    return tuple(b) + tuple(rest)


def _broadcast_index_shapes(shapes):
    """np.broadcast_shapes of the index arrays' shapes, where a dim may be -1: a boolean
    mask's count of True elements while compiling, known only when the graph runs."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s, ndim - len(s)):
            if -1 in (d, out[i]):  # a run-time count: broadcasts with 1, must equal the rest
                other = out[i] if d == -1 else d
                out[i] = -1 if other in (1, -1) else other
            elif out[i] == 1 or d in (1, out[i]):
                out[i] = max(d, out[i])
            else:
                raise IndexError(f"shape mismatch: indexing arrays could not be broadcast "
                                 f"together with shapes {' '.join(map(str, shapes))}")
    return tuple(out)


def _reversed_value(value, plan, shape):
    """value broadcast to `shape`, reversed along each negative-step result axis."""
    value = _strip_leading_ones(value, len(shape))
    value = call("broadcast_to", (value,), (tuple(shape),))
    ndim_b = _index_ndim(plan)
    for axis in plan.reversed:
        value = _reverse(value, _result_axis(plan, axis, ndim_b))
    return value
