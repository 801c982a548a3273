"""tril, triu and roll (MindSpore 2.x names and arguments; NumPy's meaning), made of registry
ops: a where over a broadcast index comparison, and a gather along each rolled axis."""
import numpy as np

from kiln.common._arrays import tensor_of
from kiln.ops import _indexing
from kiln.ops._core import axes_attr, call, int_arg, is_tensor

__all__ = ["tril", "triu", "roll"]


def _triangle(op, input, diagonal, lower):  # noqa: A002
    if not is_tensor(input):
        raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
    shape = tuple(input.shape)
    if len(shape) < 2:
        raise ValueError(f"{op}: input must have at least 2 dimensions, got shape {shape}")
    k = int_arg(diagonal, op, "diagonal")
    rows, cols = shape[-2:]
    if rows < 0 or cols < 0:
        # Sizes known when the graph runs: keep where column - row <= k (lower) or >= k.
        n = len(shape)
        offset = call("sub", (_indexing.positions_along(input, n - 1),
                              _indexing.positions_along(input, n - 2)))
        keep = call("less_equal" if lower else "greater_equal", (offset, k))
    else:
        keep = tensor_of(np.tril(np.ones((rows, cols), bool), k) if lower
                         else np.triu(np.ones((rows, cols), bool), k))
    return call("where", (keep, input, call("fill", (), ((), 0, input.dtype._enum))))


def tril(input, diagonal=0):  # noqa: A002
    """The lower triangle of the last two axes (entries above `diagonal` made 0)."""
    return _triangle("tril", input, diagonal, True)


def triu(input, diagonal=0):  # noqa: A002
    """The upper triangle of the last two axes (entries below `diagonal` made 0)."""
    return _triangle("triu", input, diagonal, False)


def roll(input, shifts, dims=None):  # noqa: A002
    """Elements shifted by `shifts` along `dims`, wrapping around (np.roll); dims None rolls
    the flattened tensor."""
    op = "roll"
    if not is_tensor(input):
        raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
    shift_list = axes_attr(shifts, op, "shifts")
    if dims is None:
        if len(shift_list) != 1:
            raise ValueError(f"{op}: without dims, shifts must be one int, got {shifts!r}")
        flat = call("reshape", (input,), ((-1,),))
        return call("reshape", (roll(flat, shift_list, 0),), (tuple(input.shape),))
    dim_list = axes_attr(dims, op, "dims")
    if len(dim_list) != len(shift_list):
        raise ValueError(f"{op}: shifts and dims must have the same length, got {shifts!r} and "
                         f"{dims!r}")
    out = input
    for shift, dim in zip(shift_list, dim_list):
        size = input.shape[dim]
        if size < 0:  # a graph's dimension of any size: positions as it runs
            axis = dim % len(input.shape)
            pos = _indexing.runtime_positions_along(out, axis)
            index = call("mod", (call("sub", (pos, shift)), _indexing.runtime_size(out, axis)))
            out = call("gather", (out, index), (dim, 0))
        elif size:
            index = (np.arange(size) - shift) % size
            out = call("gather", (out, tensor_of(index.astype(np.int64))), (dim, 0))
    return out
