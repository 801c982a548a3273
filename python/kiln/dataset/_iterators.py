"""Iterators: a dataset's stages built into one C++ pipeline (kiln._C.DatasetPipeline) and read.

The pipeline runs on its own threads from the moment the iterator exists; the iterator reads its
output queue (waiting without the GIL) and stops it when the last epoch ends, when it is
dropped (``break`` out of a loop), on an error, and at interpreter exit."""
import atexit
import numbers
import weakref

import numpy as np

from kiln import _C
from kiln.common.tensor import Tensor
from kiln.dataset import config

_LIVE = weakref.WeakSet()


@atexit.register
def _stop_all():
    """Stops every pipeline before the interpreter goes: its threads call into Python, which
    they must not do while it finalizes."""
    for iterator in list(_LIVE):
        iterator.stop()


class Builder:
    """What a dataset's stages are built with: the pipeline and the seeds of its random
    stages (each stage's from the pipeline's seed and the stage's place in the tree)."""

    def __init__(self, pipe, seed):
        self.pipe = pipe
        self.seed = seed
        self._stages = 0
        # What the stages use and must end with the pipeline (worker processes): closed after
        # its threads are joined.
        self.resources = []
        # {id(map node): batch size}: a batch directly above a map with native vision ops, which
        # then writes its rows straight into the batch's buffer.
        self.batch_hints = {}

    def stage(self):
        """A key for the next random stage, the same for the same tree every time."""
        self._stages += 1
        return self._stages

    def derive(self, key):
        return int(np.random.SeedSequence([self.seed, key]).generate_state(1, np.uint64)[0])


def annotate(exc, detail):
    """Adds where in a row an error happened (which op, which source index) to what the
    iterator reports."""
    try:
        exc._kiln_dataset_detail = detail
    except AttributeError:
        pass


def _reraise(where, exc):
    """A failure inside the pipeline as MindSpore reports it: a RuntimeError (whatever the
    user's code raised, which stays attached as __cause__) naming the stage, the row and the
    op or file."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        raise exc
    detail = getattr(exc, "_kiln_dataset_detail", None)
    place = where + (f", {detail}" if detail else "")
    raise RuntimeError(f"Exception thrown from the dataset pipeline at {place}: "
                       f"{type(exc).__name__}: {exc}") from exc


def _check_num_epochs(num_epochs):
    if isinstance(num_epochs, bool) or not isinstance(num_epochs, numbers.Integral):
        raise TypeError(f"num_epochs must be an int, got {type(num_epochs).__name__}")
    if num_epochs != -1 and num_epochs < 1:
        raise ValueError(f"num_epochs must be -1 or >= 1, got {num_epochs}")


def _to_tensor(value):
    if isinstance(value, dict):  # a Python dict column: its values converted, as in MindSpore
        return {k: _to_tensor(v) for k, v in value.items()}
    if isinstance(value, (int, float, bool, np.generic)):
        value = np.asarray(value)
    numeric = isinstance(value, np.ndarray) and value.dtype.kind in "biuf"
    if numeric and value.dtype != np.longdouble:
        return Tensor(value)
    return value  # strings and objects stay NumPy, as in MindSpore


class _Iterator:
    """Rows of `dataset` for `num_epochs` epochs (-1: without end). Each epoch ends with
    StopIteration; iterating again continues with the next one."""

    def __init__(self, dataset, num_epochs, output_numpy, columns=None):
        self._pipe = None
        self._resources = []
        _check_num_epochs(num_epochs)
        names = dataset.get_col_names()
        pipe = _C.DatasetPipeline(config.get_prefetch_size())
        builder = Builder(pipe, config._pipeline_seed())
        self._resources = builder.resources
        try:
            root = dataset._build(builder, num_epochs)
            if columns is not None:
                columns = [columns] if isinstance(columns, str) else list(columns)
                missing = [c for c in columns if c not in names]
                if missing:
                    raise ValueError(f"create_tuple_iterator: no column {missing[0]!r}; the "
                                     f"dataset has {names}")
                root = pipe.add_project(root, [names.index(c) for c in columns])
                names = columns
            pipe.start(root)
        except BaseException:
            self._close_resources()
            raise
        self._pipe = pipe
        self._names = names
        self._num_epochs = num_epochs
        self._epochs_done = 0
        self._output_numpy = output_numpy
        _LIVE.add(self)

    def __iter__(self):
        return self

    def __next__(self):
        if self._pipe is None:
            raise StopIteration
        kind, payload = self._pipe.next()
        if kind == 0:
            return self._row(payload)
        if kind == 1:
            self._epochs_done += 1
            if self._num_epochs != -1 and self._epochs_done >= self._num_epochs:
                self.stop()
            raise StopIteration
        self.stop()
        if kind == 3:
            _reraise(*payload)
        raise StopIteration

    def _row(self, columns):
        # Inline type checks, no call per column: this runs once per batch of the training loop.
        if self._output_numpy:
            return [c.asnumpy() if type(c) is Tensor or isinstance(c, Tensor) else c
                    for c in columns]
        return [c if type(c) is Tensor else _to_tensor(c) for c in columns]

    def get_col_names(self):
        return list(self._names)

    def stop(self):
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            for resource in self._resources:  # wakes stages that wait on them (sync_wait)
                getattr(resource, "interrupt", lambda: None)()
            pipe.stop()
        self._close_resources()

    def _close_resources(self):
        resources, self._resources = self._resources, []
        for resource in resources:
            resource.close()

    def __del__(self):
        self.stop()


class TupleIterator(_Iterator):
    """Rows as lists of columns (MindSpore's create_tuple_iterator)."""


class DictIterator(_Iterator):
    """Rows as {column name: value} (MindSpore's create_dict_iterator)."""

    def _row(self, columns):
        return dict(zip(self._names, super()._row(columns)))
