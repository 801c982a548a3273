"""kiln.common.mutable -- mutable(): Python values that compiled functions take as graph inputs.

Defined here, below kiln.ops and kiln.jit, because both ask whether a value is one: the compiler
(kiln.jit.api) makes them graph inputs, and constexpr (kiln.ops.primitive) treats them as
unknown until the graph runs.
"""
from kiln import _C
from kiln._graph_state import GraphValue

__all__ = ["mutable"]


class _MutableInt(int):
    pass


class _MutableFloat(float):
    pass


class _MutableBool(int):
    pass


class _MutableTuple(tuple):
    pass


class _MutableList(list):
    pass


_MUTABLE_TYPES = (_MutableInt, _MutableFloat, _MutableBool, _MutableTuple, _MutableList)


def mutable(input_data, dynamic_len=False):
    """Marks a scalar, tuple or list as a run-time variable of compiled functions (a graph
    input), so new values do not recompile; in PyNative it behaves like the plain value."""
    if isinstance(input_data, (_C.TensorBase, GraphValue)):  # a graph value: inside a graph
        return input_data
    if isinstance(input_data, bool):
        return _MutableBool(input_data)
    if isinstance(input_data, int):
        return _MutableInt(input_data)
    if isinstance(input_data, float):
        return _MutableFloat(input_data)
    if isinstance(input_data, (tuple, list)):
        kind = _MutableTuple if isinstance(input_data, tuple) else _MutableList
        sequence = kind(mutable(v) for v in input_data)
        sequence.dynamic_len = bool(dynamic_len)  # F.is_sequence_shape_unknown reads it
        return sequence
    raise TypeError(
        f"mutable: expected a number, tuple, list or Tensor, got {type(input_data).__name__}"
    )


def _is_dynamic_len(value):
    return getattr(value, "dynamic_len", False) is True
