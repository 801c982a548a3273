"""Sources over Python data: GeneratorDataset and NumpySlicesDataset, on a random-access base."""
import copy

import numpy as np

from kiln.common import dtype as mstype
from kiln.common.tensor import Tensor
from kiln.dataset import _multiprocess, _random
from kiln.dataset._dataset import Dataset
from kiln.dataset._iterators import annotate
from kiln.dataset._rows import _names, _workers, as_value
from kiln.dataset.samplers import select_sampler


def column_value(value):
    """A source's value as an array of its own (the source may reuse or change its object); a
    dict stays a dict (MindSpore carries Python dicts through the pipeline as they are)."""
    if isinstance(value, dict):
        return value
    if hasattr(value, "asnumpy"):
        value = value.asnumpy()
    return np.array(value)


class ReadTask:
    """Reads a row of a random-access source by index. Module-level, so
    python_multiprocessing can send it (and the source) to worker processes."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __call__(self, row):
        try:
            return self.dataset._read(row[0])
        except Exception as exc:
            annotate(exc, f"reading index {row[0]}")
            raise


class MappableDataset(Dataset):
    """A source whose rows can be read by index: a sampler picks each epoch's indices (on the
    source stage), and `num_parallel_workers` map workers read the rows."""

    def __init__(self, num_samples, num_parallel_workers, shuffle, sampler, num_shards, shard_id):
        super().__init__([], num_parallel_workers)
        self.sampler = select_sampler(num_samples, shuffle, sampler, num_shards, shard_id,
                                      type(self).__name__)
        self.sampler._bind(self)

    # Whether rows leave the reader as kiln Tensors (see _build).
    _tensor_rows = False

    def _length(self):
        raise NotImplementedError

    def _read(self, index):
        """Row `index` as a tuple of arrays."""
        raise NotImplementedError

    def _row_count(self):
        return self.sampler._count(self._length())

    def _mappable_source(self):
        return self

    def _with_sampler(self, sampler):
        other = copy.copy(self)
        other.sampler = sampler
        other._size_cache = None
        sampler._bind(other)
        return other

    def _column_values(self, name):
        """Every row's value of column `name` (PKSampler's labels): read row by row, unless a
        reader knows them at once."""
        names = self.get_col_names()
        if name not in names:
            raise ValueError(f"{type(self).__name__}: no column {name!r}; it has {names}")
        column = names.index(name)
        return [self._read(i)[column] for i in range(self._length())]

    def _tensor_columns(self):
        """The columns as kiln Tensors when the engine can slice rows itself (a tensor source,
        no Python call per row), else None."""
        return None

    def _can_batch(self):
        return self._tensor_columns() is not None

    def _build(self, builder, passes, batch_size=0, drop_remainder=False):
        """`batch_size` > 0: a batch directly above is built here, in one stage."""
        n, sampler = self._length(), self.sampler
        seed = builder.derive(builder.stage())
        name = type(self).__name__
        tensors = self._tensor_columns()
        if tensors is not None:
            return builder.pipe.add_tensor_source(
                name, tensors, lambda epoch: sampler._indices(n, seed, epoch).tolist(), passes,
                batch_size, drop_remainder)

        def indices(epoch):
            return ((int(i),) for i in sampler._indices(n, seed, epoch))

        task, workers = ReadTask(self), _workers(self.num_parallel_workers)
        # Numeric columns as kiln Tensors (zero-copy) where the engine takes them further
        # without Python: native image ops and batching in C++.
        values = (lambda row: tuple(as_value(v) for v in row)) if self._tensor_rows else tuple
        processes = None
        if getattr(self, "python_multiprocessing", False) and workers > 1:
            processes = _multiprocess.start(task, workers, name)
        if processes is not None:
            builder.resources.append(processes)

            def read(row, epoch, position):
                return values(processes(row, [seed, epoch, position]))
        else:
            def read(row, epoch, position):
                previous = _random.enter_row([seed, epoch, position])
                try:
                    return values(task(row))
                finally:
                    _random.leave_row(previous)

        source = builder.pipe.add_source(f"{name} sampler", indices, passes)
        return builder.pipe.add_map(name, source, read, workers)


class GeneratorDataset(MappableDataset):
    """Rows from Python: a random-access source (``__getitem__`` and ``__len__``: sampled,
    shuffled and sharded like every random-access source, read by `num_parallel_workers`
    threads), an iterable, or a callable returning an iterator (read in order by one thread).
    Workers are threads: Python code runs under the GIL, NumPy and OpenCV release it."""

    def __init__(self, source, column_names=None, column_types=None, schema=None,
                 num_samples=None, num_parallel_workers=1, shuffle=None, sampler=None,
                 num_shards=None, shard_id=None, python_multiprocessing=True, max_rowsize=None):
        self.source = source
        self._random_access = hasattr(source, "__getitem__") and hasattr(source, "__len__")
        if not self._random_access and not (hasattr(source, "__iter__") or callable(source)):
            raise TypeError("GeneratorDataset: source must be random-access (__getitem__ and "
                            "__len__), iterable, or a callable returning an iterator")
        if not self._random_access and (shuffle or sampler is not None or num_shards):
            raise ValueError("GeneratorDataset: shuffle, sampler and num_shards need a "
                             "random-access source (__getitem__ and __len__)")
        if schema is not None:
            raise NotImplementedError("GeneratorDataset: schema is not supported by kiln; give "
                                      "column_names (and column_types)")
        if column_names is None:
            raise ValueError("GeneratorDataset: column_names must be given")
        self.column_names = _names(column_names, "GeneratorDataset: column_names")
        self.num_samples = num_samples
        self.python_multiprocessing = bool(python_multiprocessing)
        self._types = None
        if column_types is not None:
            self._types = [mstype.dtype_to_nptype(mstype.to_dtype(t)) for t in column_types]
        super().__init__(num_samples, num_parallel_workers,
                         shuffle if self._random_access else False, sampler, num_shards,
                         shard_id)

    def _columns(self):
        return list(self.column_names)

    def _length(self):
        return len(self.source)

    def _row(self, item):
        values = item if isinstance(item, tuple) else (item,)
        if len(values) != len(self.column_names):
            raise ValueError(f"GeneratorDataset: the source gave {len(values)} columns, but "
                             f"column_names has {len(self.column_names)}: {self.column_names}")
        row = tuple(column_value(v) for v in values)
        if self._types is not None:
            row = tuple(v.astype(t, copy=False) for v, t in zip(row, self._types))
        return row

    def _read(self, index):
        return self._row(self.source[index])

    def _row_count(self):
        return super()._row_count() if self._random_access else None

    def _mappable_source(self):
        return self if self._random_access else None

    def _iterate(self):
        if hasattr(self.source, "__iter__"):
            return iter(self.source)
        return iter(self.source())

    def _can_batch(self):
        return self._random_access and super()._can_batch()

    def _build(self, builder, passes, batch_size=0, drop_remainder=False):
        if self._random_access:
            return super()._build(builder, passes, batch_size, drop_remainder)
        limit = self.num_samples

        def rows(epoch):
            for k, item in enumerate(self._iterate()):
                if limit and k >= limit:
                    return
                yield self._row(item)

        return builder.pipe.add_source("GeneratorDataset", rows, passes)


class _Slices:
    """Rows of equally long columns, sliced along the first axis."""

    def __init__(self, columns):
        self.columns = columns

    def __len__(self):
        return len(self.columns[0])

    def __getitem__(self, index):
        return tuple(c[index] for c in self.columns)


def _slice_columns(data, column_names):
    if isinstance(data, dict):
        names, columns = list(data), [np.asarray(v) for v in data.values()]
    elif isinstance(data, tuple):
        names, columns = None, [np.asarray(v) for v in data]
    elif isinstance(data, (list, np.ndarray)) or hasattr(data, "asnumpy"):
        names, columns = None, [np.asarray(data.asnumpy() if hasattr(data, "asnumpy") else data)]
    else:
        raise TypeError(f"NumpySlicesDataset: data must be a list, tuple, dict or array, got "
                        f"{type(data).__name__}")
    if column_names is not None:
        names = _names(column_names, "NumpySlicesDataset: column_names")
    names = names or [f"column_{i}" for i in range(len(columns))]
    if len(names) != len(columns):
        raise ValueError(f"NumpySlicesDataset: {len(columns)} columns but column_names "
                         f"{names}")
    if any(c.ndim == 0 for c in columns):
        raise ValueError("NumpySlicesDataset: every column needs a first axis to slice")
    lengths = {len(c) for c in columns}
    if len(lengths) > 1:
        raise ValueError(f"NumpySlicesDataset: columns have different lengths {sorted(lengths)}")
    return names, columns


def _as_tensors(columns):
    """The columns as kiln Tensors (copies), or None when one has no kiln dtype (strings)."""
    tensors = []
    for column in columns:
        try:
            mstype.to_dtype(column.dtype)
        except TypeError:
            return None
        tensors.append(Tensor(np.array(column, order="C")))
    return tensors


class NumpySlicesDataset(GeneratorDataset):
    """Rows sliced from arrays: a list or array is one column, a tuple one column per element,
    a dict one column per key. Numeric columns are read by the engine itself (a tensor source:
    row views made in C++, batches stacked in C++), so neither needs the GIL."""

    def __init__(self, data, column_names=None, num_samples=None, num_parallel_workers=1,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None):
        names, columns = _slice_columns(data, column_names)
        super().__init__(_Slices(columns), column_names=names, num_samples=num_samples,
                         num_parallel_workers=num_parallel_workers, shuffle=shuffle,
                         sampler=sampler, num_shards=num_shards, shard_id=shard_id)
        self._tensors = _as_tensors(columns)

    def _tensor_columns(self):
        return self._tensors
