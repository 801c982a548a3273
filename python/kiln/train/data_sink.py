"""data_sink: MindSpore's functional sink mode -- a function bound to a dataset, each call
running it over the next `sink_size` batches (as one compiled loop when given a jit_config)."""
import numbers

import numpy as np

from kiln.common.tensor import Tensor
from kiln.jit.api import JitConfig, jit
from kiln.jit.declared import check_signature, dims_of
from kiln.train._data import DataSource, SinkFeeder

__all__ = ["data_sink"]


def _loop_over(fn):
    """fn applied to `count + 1` stacked batches: once on slice 0, then in a graph loop (range
    over the 0-d tensor count) on slices 1..count. Returns the last result."""

    def sink_loop(count, *columns):
        out = fn(*[c[0] for c in columns])
        for i in range(count):
            out = fn(*[c[i + 1] for c in columns])
        return out

    return sink_loop


def _stacked_signature(signature):
    """The sink loop's declared inputs from one batch's: the step count (a 0-d int32), then each
    column with a leading axis of any size (the stacked batches), so that one graph serves every
    sink whatever its chunks' lengths and batch sizes."""
    columns = check_signature(signature, "data_sink")
    if columns is None:
        return None
    stacked = [Tensor(shape=[None] + [None if d < 0 else d for d in dims_of(t)], dtype=t.dtype)
               for t in columns]
    return (Tensor(np.array(0, np.int32)), *stacked)  # the count: any 0-d int32


class _SinkProcess:
    """What data_sink returns: call it (without arguments) to run one sink."""

    def __init__(self, fn, dataset, sink_size, jit_config, input_signature):
        self._fn = fn
        self._feeder = SinkFeeder(DataSource(dataset, "data_sink"), sink_size)
        self._loop = self._step = None
        if jit_config is not None:
            self._loop = jit(_loop_over(fn), jit_config=jit_config,
                             input_signature=_stacked_signature(input_signature))
            self._step = jit(fn, jit_config=jit_config, input_signature=input_signature)

    def __call__(self):
        outputs = None
        for count, columns in self._feeder.next_sink():
            if self._loop is None:  # no jit_config: PyNative, step by step
                for i in range(count):
                    outputs = self._fn(*[c[i] for c in columns])
            elif count == 1:
                outputs = self._step(*[c[0] for c in columns])
            else:
                outputs = self._loop(Tensor(np.array(count - 1, np.int32)), *columns)
        return outputs

    def __del__(self):
        feeder = self.__dict__.get("_feeder")
        if feeder is not None:
            feeder.close()


def data_sink(fn, dataset, sink_size=1, jit_config=None, input_signature=None):
    """Binds `fn` (taking one batch's columns) to `dataset`: every call of the returned function
    runs fn over the next `sink_size` batches, continuing where the previous call stopped
    (the dataset wraps around), and returns fn's last result. With a jit_config the sink is one
    compiled loop (see docs/training.md, "Dataset sink mode"); without one it runs in PyNative.
    """
    if not callable(fn):
        raise TypeError(f"For 'data_sink', 'fn' must be callable, but got {type(fn).__name__}.")
    if isinstance(sink_size, bool) or not isinstance(sink_size, numbers.Integral) \
            or sink_size < 1:
        raise ValueError(f"For 'data_sink', 'sink_size' must be a positive int, but got "
                         f"{sink_size!r}.")
    if jit_config is not None and not isinstance(jit_config, JitConfig):
        raise TypeError(f"For 'data_sink', 'jit_config' must be a JitConfig or None, but got "
                        f"{type(jit_config).__name__}.")
    return _SinkProcess(fn, dataset, int(sink_size), jit_config, input_signature)
