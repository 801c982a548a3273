"""What the dataset nodes share that is not a node: argument checks, the values rows carry,
map's column rule and task, and batch's stacking."""
import numbers

import numpy as np

from kiln import _C
from kiln.dataset import config
from kiln.dataset._iterators import annotate


def _names(value, what):
    if value is None:
        return None
    names = [value] if isinstance(value, str) else list(value)
    if not names or not all(isinstance(n, str) for n in names):
        raise TypeError(f"{what}: expected a column name or a list of names, got {value!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: column names repeat: {names}")
    return names


def _count_arg(what, value, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what}: expected an int, got {type(value).__name__}")
    if value != -1 and value < low:
        raise ValueError(f"{what}: {value} must be -1 or >= {low}")
    return int(value)


def _workers(value):
    if value is None:
        return config.get_num_parallel_workers()
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"num_parallel_workers must be an int >= 1, got {value!r}")
    return int(value)


def as_array(value):
    """A column value as the pipeline carries it: a NumPy array (a kiln Tensor's values)."""
    if hasattr(value, "asnumpy"):
        return value.asnumpy()
    return np.asarray(value)


_TENSOR_KINDS = frozenset("biuf")


def as_value(value):
    """A map result as the pipeline carries it: numeric arrays as kiln Tensors sharing their
    memory (batch then stacks them in C++, without the GIL), others as NumPy arrays."""
    if isinstance(value, dict):
        return value
    array = as_array(value)
    if array.dtype.kind in _TENSOR_KINDS and array.dtype.itemsize <= 8:
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        return _C.tensor_from_array(array)
    return array


def _op_name(op):
    return getattr(op, "__name__", None) or type(op).__name__


class BatchInfo:
    """What per_batch_map learns about the batch it combines."""

    def __init__(self, batch_num, epoch_num):
        self._batch_num, self._epoch_num = batch_num, epoch_num

    def get_batch_num(self):
        return self._batch_num

    def get_epoch_num(self):
        return self._epoch_num


def _output_columns(names, inputs, outputs):
    """MindSpore's map rule: as many outputs as inputs take the inputs' places; otherwise the
    outputs come first, then the columns that were not inputs, in their order."""
    if len(inputs) == len(outputs):
        mapping = dict(zip(inputs, outputs))
        result = [mapping.get(n, n) for n in names]
    else:
        result = list(outputs) + [n for n in names if n not in inputs]
    if len(set(result)) != len(result):
        raise ValueError(f"map: output columns {outputs} repeat a column of {names}")
    return result


def _apply(op, args):
    out = op(*args)
    return list(out) if isinstance(out, tuple) else [out]


class MapTask:
    """A map's operations on one row: its input columns in, the last operation's outputs out.
    Module-level, so python_multiprocessing can send it to worker processes."""

    def __init__(self, operations, in_index):
        self.operations, self.in_index = operations, in_index

    def __call__(self, row):
        args = [row[i] for i in self.in_index]
        for op in self.operations:
            try:
                args = _apply(op, args)
            except Exception as exc:
                annotate(exc, f"in {_op_name(op)}")
                raise
        return [r if isinstance(r, dict) else as_array(r) for r in args]


def _pad_to(array, shape, value, column):
    if len(shape) != array.ndim or any(s < d for s, d in zip(shape, array.shape)):
        raise ValueError(f"padded_batch: column {column!r} has shape {array.shape}, which does "
                         f"not fit the pad shape {tuple(shape)}")
    widths = [(0, s - d) for s, d in zip(shape, array.shape)]
    return np.pad(array, widths, constant_values=value)


def _stack(values, column, pad):
    if all(isinstance(v, dict) for v in values):  # a dict column: each key batched
        keys = list(values[0])
        if any(list(v) != keys for v in values):
            raise ValueError(f"batch: the dicts of column {column!r} have different keys")
        return {k: _stack([as_array(v[k]) for v in values], f"{column}.{k}", pad) for k in keys}
    if pad is not None:
        shape, value = pad
        longest = np.max([np.shape(v) for v in values], axis=0) if values[0].ndim else ()
        shape = [int(longest[i]) if shape is None or shape[i] is None else shape[i]
                 for i in range(values[0].ndim)]
        values = [_pad_to(np.asarray(v), shape, value, column) for v in values]
    shapes = {np.shape(v) for v in values}
    if len(shapes) > 1:
        raise ValueError(f"batch: column {column!r} has rows of different shapes "
                         f"{sorted(shapes)}; pad them with padded_batch")
    return np.stack(values)
