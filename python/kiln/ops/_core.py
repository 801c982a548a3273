"""Calls into the C++ op registry: op kinds by name, dtype and shape argument handling."""
import operator

import numpy as np

from kiln import _C
from kiln._graph_state import GraphValue
from kiln.common import dtype as mstype

KIND = {name: i for i, name in enumerate(_C.op_names())}


batch_hook = None  # kiln.ops._batching.dispatch while ops.vmap runs a function


def call(name, inputs, attrs=()):
    """Runs the registry op `name`; returns a Tensor or a tuple of Tensors.

    While this thread compiles a function the op becomes a node of that graph instead; the
    choice is made in C++ (bindings/dispatch.cc), the same place the Tensor operators ask.
    Inside ops.vmap the op goes through its batching rule first.
    """
    if batch_hook is not None:
        return batch_hook(name, inputs, attrs)
    return _C.call(KIND[name], inputs, attrs)


def is_tensor(value):
    """True for kiln Tensors, and for graph values while a function is being compiled."""
    return isinstance(value, (_C.TensorBase, GraphValue))


def dtype_attr(dtype):
    """A dtype argument as the registry's attribute value (None stays None)."""
    return None if dtype is None else mstype.to_dtype(dtype)._enum


def int_arg(value, op, name):
    """One int argument (axis, count, size, ...): a Python or NumPy integer or a one-element
    integer Tensor. A float, a bool or anything else is a TypeError naming `op` and `name`:
    an int argument is never truncated."""
    _refuse_runtime_size(value, op, name)
    value_or_none = _index(value)
    if value_or_none is None:
        raise TypeError(f"{op}: {name} must be an int, got {_describe(value)}")
    return value_or_none


def require_known_sizes(op, *tensors):
    """A ValueError for an op that computes with its operands' sizes while compiling, where one
    of them has a dimension declared None (a graph learns its size only when it runs)."""
    for t in tensors:
        shape = tuple(t.shape)
        if min(shape, default=0) < 0:
            raise ValueError(f"{op}: shape {shape} has a dimension declared None, whose size a "
                             f"graph learns only when it runs, and {op} needs it while "
                             f"compiling; declare that size or run {op} in PyNative mode")


def is_runtime_size(value):
    """True for a size read off a dimension of any size (x.shape[i] in a graph compiled for it;
    kiln's own size_when_run): -1 as an int, resolved by the ops that take it as the graph runs."""
    return getattr(value, "kiln_dim_of_any_size", False)


def _refuse_runtime_size(value, op, name):
    """A size read off a dimension of any size (x.shape[i] in a graph compiled for it) is -1 to
    an op that needs the number while compiling: a ValueError, not a silent -1."""
    if is_runtime_size(value):
        raise ValueError(f"{op}: {name} is the size of a dimension declared None, known only when "
                         f"the graph runs, and {op} needs it while compiling; declare that size "
                         f"or run {op} in PyNative mode")


def positive_int_arg(value, op, name):
    """int_arg that must also be > 0 (a count: steps, slices, a window); ValueError otherwise."""
    value = int_arg(value, op, name)
    if value <= 0:
        raise ValueError(f"{op}: {name} must be > 0, got {value}")
    return value


def axes_attr(axis, op, name="axis"):
    """None, an int or a sequence of ints -> None or a tuple of ints; TypeError naming `op`."""
    if axis is None:
        return None
    return _int_tuple(axis, op, name, "None, an int or a tuple of ints")


def shape_attr(shape, op, name="shape"):
    """An int or a sequence of ints -> a tuple of ints; TypeError naming `op` otherwise."""
    return _int_tuple(shape, op, name, "an int or a tuple of ints")


def _int_tuple(values, op, name, expected):
    items = tuple(values) if isinstance(values, (tuple, list)) else (values,)
    ints = tuple(_index(v) for v in items)
    if None in ints:
        raise TypeError(f"{op}: {name} must be {expected}, got {_describe(values)}")
    return ints


def _index(value):
    """operator.index(value), or None for a bool, a float or a non-integer value."""
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        return operator.index(value)
    except (TypeError, ValueError, RuntimeError):
        return None


def _describe(value):
    if is_tensor(value):
        return f"a {value.dtype} Tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return repr(value)
    return f"{type(value).__name__} {value!r}"


def pair_attr(value, op, name):
    """An int or a sequence of 2 ints -> (a, b): a TypeError for a float or bool, a ValueError
    for a sequence of another length (both naming `op` and `name`)."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{op}: {name} must be an int or a tuple of 2 ints, got "
                             f"{len(value)} values {_describe(value)}")
        return _int_tuple(value, op, name, "an int or a tuple of 2 ints")
    if _index(value) is None:
        raise TypeError(f"{op}: {name} must be an int or a tuple of 2 ints, got "
                        f"{_describe(value)}")
    return (_index(value),) * 2
