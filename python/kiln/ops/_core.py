"""Calls into the C++ op registry: op kinds by name, dtype and shape argument handling."""
from kiln import _C
from kiln import _graph_state as _state
from kiln._graph_state import compiling as _compiling
from kiln.common import dtype as mstype

KIND = {name: i for i, name in enumerate(_C.op_names())}


def call(name, inputs, attrs=()):
    """Runs the registry op `name`; returns a Tensor or a tuple of Tensors.

    The single interception point between eager and graph mode: while a function is being
    compiled, the op becomes a node of the graph under construction instead of running.
    """
    if not _state.threads_compiling:  # the common case: no thread is compiling
        return _C.call(KIND[name], inputs, attrs)
    builder = _compiling.builder  # this thread's graph under construction, if any
    if builder is None:
        return _C.call(KIND[name], inputs, attrs)
    return builder.emit(name, inputs, attrs)


def is_tensor(value):
    """True for kiln Tensors, and for graph values while a function is being compiled."""
    return isinstance(value, (_C.TensorBase, _state.graph_tensor_type))


def dtype_attr(dtype):
    """A dtype argument as the registry's attribute value (None stays None)."""
    return None if dtype is None else mstype.to_dtype(dtype)._enum


def axes_attr(axis):
    """None, an int or a sequence of ints -> None or a tuple of ints."""
    if axis is None:
        return None
    if isinstance(axis, int):
        return (axis,)
    return tuple(int(a) for a in axis)


def shape_attr(shape, op):
    """An int or a sequence of ints -> a tuple of ints; TypeError naming `op` otherwise."""
    if isinstance(shape, int):
        return (shape,)
    try:
        return tuple(_as_int(s) for s in shape)
    except TypeError:
        raise TypeError(f"{op}: expected a shape (tuple of ints), got {shape!r}") from None


def _as_int(value):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        if hasattr(value, "item") and getattr(value, "size", 0) == 1:
            return int(value.item())
        raise TypeError
    return int(value)
