"""CellBase: what Graph mode knows of a Cell, so that kiln.jit never imports kiln.nn."""

from kiln._C import TensorBase
from kiln._graph_state import GraphValue
from kiln.ops._core import call


class CellBase:
    """The base of kiln.nn.Cell as the compiler sees it.

    An instance is compiled through its ``construct``: inside compiled code it is seen through
    a CellProxy (jit/scope.py), so its Parameters become graph inputs and its other attributes
    guarded constants, and it is compared by identity in cache guards. Its compiled variants are
    kept on the instance (``_kiln_graph_fn``), compiled with the JitConfig of its
    ``_jit_config_dict``. A class deriving from it that compiled code calls is built at compile
    time. kiln.nn.Cell provides all of this; the compiler asks only ``isinstance(x, CellBase)``.
    """

    __slots__ = ()


# ---- Mixed precision (Cell.to_float, kiln.amp): the casts a Cell's call adds, in both modes.
# A cell run in a low-precision type has `_amp_dtype` (set by Cell.to_float on it and its
# children): its floating inputs, and the Parameters its construct reads while it runs, are cast
# to that type. `_amp_output_dtype` (set by kiln.amp) casts what the cell returns. Parameters
# themselves stay float32 (the master weights); the casts are ops, so gradients flow back
# through them to the float32 Parameters.


def amp_cast(value, dtype):
    """value cast to dtype when it is a floating tensor (or a graph value) of another type;
    tuples and lists are cast element by element; anything else is returned as is."""
    if isinstance(value, (TensorBase, GraphValue)):
        if value.dtype.is_floating_point and value.dtype != dtype:
            return call("cast", (value,), (dtype._enum,))
        return value
    if isinstance(value, (tuple, list)):
        return type(value)(amp_cast(v, dtype) for v in value)
    return value


# Weights are read through `cached_cast` (ops/optim.cc): the same values and gradient as a cast,
# but the low-precision copy is kept with the weight's bytes, and a fused optimizer update writes
# it in the same pass as the new float32 weight, so a training step does not cast its weights.
# False reads them through plain casts (the tests compare the two).
CACHED_WEIGHT_CASTS = True


def amp_param(cell, value):
    """A trainable Parameter read by `cell`'s construct: cast to the cell's mixed-precision type
    while the cell runs, the Parameter itself otherwise. (Callers pass non-trainable ones, state
    such as BatchNorm's moving statistics that the cell updates in place, through uncast: a cast
    copy would take the update instead.)"""
    d = cell.__dict__
    dtype = d.get("_amp_dtype")
    if dtype is None or not d.get("_amp_depth"):
        return value
    if CACHED_WEIGHT_CASTS and isinstance(value, (TensorBase, GraphValue)) \
            and value.dtype.is_floating_point and value.dtype != dtype:
        return call("cached_cast", (value,), (dtype._enum,))
    return amp_cast(value, dtype)


def amp_call(cell, run, args, kwargs):
    """run(args, kwargs) for `cell`, with the casts its mixed-precision settings ask for."""
    d = cell.__dict__
    dtype, out_dtype = d.get("_amp_dtype"), d.get("_amp_output_dtype")
    if dtype is None and out_dtype is None:
        return run(args, kwargs)
    if dtype is not None:
        args = amp_cast(tuple(args), dtype)
        kwargs = {k: amp_cast(v, dtype) for k, v in kwargs.items()}
    d["_amp_depth"] = d.get("_amp_depth", 0) + 1
    try:
        out = run(args, kwargs)
    finally:
        d["_amp_depth"] -= 1
    return out if out_dtype is None else amp_cast(out, out_dtype)
