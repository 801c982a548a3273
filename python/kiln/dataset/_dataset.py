"""Dataset: MindSpore's dataset operations as a tree of nodes, each built into engine stages."""
import numbers

import numpy as np

from kiln.dataset import _multiprocess, _random
from kiln.dataset._iterators import DictIterator, TupleIterator, annotate
from kiln.dataset._rows import (
    BatchInfo,
    MapTask,
    _count_arg,
    _names,
    _op_name,
    _output_columns,
    _stack,
    _workers,
    as_array,
    as_value,
)
from kiln.dataset._split import split
from kiln.dataset._sync import BlockRelease


class Dataset:
    """The base of every dataset: sources are leaves, each operation a node over its inputs."""

    def __init__(self, children=(), num_parallel_workers=None):
        self.children = list(children)
        self.num_parallel_workers = num_parallel_workers
        self._size_cache = None

    # ---- what subclasses define ----
    def _build(self, builder, passes):
        """Adds this node's stages (after its children's) to builder.pipe; returns its id.
        `passes`: how many passes over this node the nodes above read (-1: no end)."""
        raise NotImplementedError

    def _columns(self):
        return self.children[0]._columns()

    def _row_count(self):
        """Rows per epoch when known without reading; None when only reading can tell."""
        return self.children[0]._row_count()

    # ---- operations ----
    def map(self, operations, input_columns=None, output_columns=None, num_parallel_workers=None,
            python_multiprocessing=False, cache=None, callbacks=None, max_rowsize=None,
            offload=None):
        return MapDataset(self, operations, input_columns, output_columns, num_parallel_workers,
                          python_multiprocessing)

    def batch(self, batch_size, drop_remainder=False, num_parallel_workers=None,
              per_batch_map=None, input_columns=None, output_columns=None,
              python_multiprocessing=False, max_rowsize=None, pad_info=None):
        return BatchDataset(self, batch_size, drop_remainder, num_parallel_workers, per_batch_map,
                            input_columns, output_columns, pad_info, padded=pad_info is not None)

    def padded_batch(self, batch_size, drop_remainder=False, num_parallel_workers=None,
                     pad_info=None):
        return BatchDataset(self, batch_size, drop_remainder, num_parallel_workers, None, None,
                            None, pad_info, padded=True)

    def shuffle(self, buffer_size):
        return ShuffleDataset(self, buffer_size)

    def repeat(self, count=None):
        return RepeatDataset(self, count)

    def take(self, count=-1):
        return TakeDataset(self, count)

    def skip(self, count):
        return SkipDataset(self, count)

    def filter(self, predicate, input_columns=None, num_parallel_workers=None):
        return FilterDataset(self, predicate, input_columns, num_parallel_workers)

    def project(self, columns):
        return ProjectDataset(self, columns)

    def rename(self, input_columns, output_columns):
        return RenameDataset(self, input_columns, output_columns)

    def zip(self, datasets):
        datasets = (datasets,) if isinstance(datasets, Dataset) else tuple(datasets)
        return ZipDataset((self,) + datasets)

    def concat(self, datasets):
        datasets = [datasets] if isinstance(datasets, Dataset) else list(datasets)
        return ConcatDataset([self] + datasets)

    def __add__(self, other):
        return self.concat(other)

    def sync_wait(self, condition_name, num_batch=1, callback=None):
        """Pauses the pipeline here every `num_batch` rows until sync_update(condition_name)."""
        return SyncWaitDataset(self, condition_name, num_batch, callback)

    def sync_update(self, condition_name, num_batch=None, data=None):
        """Lets the sync point `condition_name` pass `num_batch` more rows (its own count by
        default), after calling its callback with `data`."""
        todo = [self]
        while todo:
            node = todo.pop()
            if isinstance(node, SyncWaitDataset) and node.pair.name == condition_name:
                node.pair.release(num_batch, data)
                return
            todo.extend(node.children)
        raise ValueError(f"sync_update: no sync_wait named {condition_name!r} in this dataset")

    def split(self, sizes, randomize=True):
        return split(self, sizes, randomize)

    # ---- iteration ----
    def create_tuple_iterator(self, columns=None, num_epochs=-1, output_numpy=False,
                              do_copy=True):
        return TupleIterator(self, num_epochs, output_numpy, columns)

    def create_dict_iterator(self, num_epochs=-1, output_numpy=False, do_copy=True):
        return DictIterator(self, num_epochs, output_numpy)

    def __iter__(self):
        return iter(self.create_tuple_iterator(num_epochs=1))

    # ---- information ----
    def get_col_names(self):
        return list(self._columns())

    def get_dataset_size(self):
        if self._size_cache is None:
            count = self._row_count()
            if count is None:  # an iterable source or a filter: read an epoch and count
                count = sum(1 for _ in self.create_tuple_iterator(num_epochs=1,
                                                                  output_numpy=True))
            self._size_cache = count
        return self._size_cache

    def _first_row(self):
        for row in self.create_tuple_iterator(num_epochs=1, output_numpy=True):
            return row
        raise RuntimeError(f"{type(self).__name__}: the dataset has no rows")

    def output_shapes(self, estimate=False):
        return [list(np.shape(c)) for c in self._first_row()]

    def output_types(self):
        return [np.asarray(c).dtype for c in self._first_row()]

    def get_batch_size(self):
        return self.children[0].get_batch_size() if self.children else 1

    def get_repeat_count(self):
        return self.children[0].get_repeat_count() if self.children else 1

    def _mappable_source(self):
        """For split(randomize=True): the random-access source this dataset is, or None."""
        return None

    def _can_batch(self):
        """Whether _build(builder, passes, batch_size, drop_remainder) batches rows itself."""
        return False


class _ColumnStage(Dataset):
    """A node whose user function reads `input_columns` of each row and writes
    `output_columns` (map, filter, batch's per_batch_map)."""

    def _setup(self, child, input_columns, output_columns, what):
        names = child.get_col_names()
        self.input_columns = _names(input_columns, f"{what}: input_columns") or list(names)
        missing = [c for c in self.input_columns if c not in names]
        if missing:
            raise ValueError(f"{what}: no column {missing[0]!r}; the dataset has {names}")
        self.output_columns = (_names(output_columns, f"{what}: output_columns")
                               or list(self.input_columns))
        self._in_index = [names.index(c) for c in self.input_columns]
        self._names_out = (names if what == "filter" else
                           _output_columns(names, self.input_columns, self.output_columns))
        self._child_names = names

    def _columns(self):
        return list(self._names_out)

    def _assemble(self, row, results):
        """The output row from the input row and the function's results."""
        if len(results) != len(self.output_columns):
            raise ValueError(f"{len(results)} outputs for the {len(self.output_columns)} output "
                             f"columns {self.output_columns}")
        if self._names_out == self.output_columns:  # every column replaced: the usual case
            return tuple(as_value(r) for r in results)
        values = dict(zip(self._child_names, row))
        values.update(zip(self.output_columns, (as_value(r) for r in results)))
        return tuple(values[n] for n in self._names_out)


class MapDataset(_ColumnStage):
    def __init__(self, child, operations, input_columns, output_columns, num_parallel_workers,
                 python_multiprocessing=False):
        super().__init__([child], num_parallel_workers)
        ops = list(operations) if isinstance(operations, (list, tuple)) else [operations]
        if not ops or not all(callable(op) for op in ops):
            raise TypeError(f"map: operations must be callables, got {operations!r}")
        self.operations = ops
        self.python_multiprocessing = bool(python_multiprocessing)
        self._setup(child, input_columns, output_columns, "map")

    def _build(self, builder, passes):
        batch_size = builder.batch_hints.pop(id(self), 0)
        child = self.children[0]._build(builder, passes)
        run = self._native_run()
        if run is None:
            task = MapTask(self.operations, self._in_index)
            return self._python_stage(builder, child, self.operations, task, self._assemble)
        # The ops from Decode on that have a native form run in the engine, without the GIL;
        # the ops before and after them (if any) are map stages of their own, in Python.
        start, stop, specs = run
        column, ops = self._in_index[0], self.operations
        if start > 0:
            child = self._python_column_stage(builder, child, ops[:start], column)
        key, seed = builder.stage(), builder.seed
        task = MapTask(ops[start:stop], [column])

        def fallback(row, epoch, index):  # a row the native ops leave to Python (not a JPEG)
            previous = _random.enter_row([seed, key, epoch, index])
            try:
                return _replace(row, column, task(row))
            finally:
                _random.leave_row(previous)

        name = f"map({', '.join(_op_name(op) for op in ops[start:stop])})"
        child = builder.pipe.add_vision_map(name, child, specs, column, builder.derive(key),
                                            fallback, _workers(self.num_parallel_workers),
                                            batch_size if stop == len(ops) else 0)
        if stop < len(ops):
            child = self._python_column_stage(builder, child, ops[stop:], column)
        return child

    def _native_run(self):
        """(start, stop, specs): the ops [start, stop) the engine runs itself, from a Decode up
        to the first op without a native form (an HWC2CHW ends the run too); None when there
        is none, or the map is not one column to one column."""
        if len(self._in_index) != 1 or len(self.output_columns) != 1:
            return None
        specs = [op._native() if hasattr(op, "_native") else None for op in self.operations]
        starts = [i for i, spec in enumerate(specs) if spec is not None and spec[0] == "Decode"]
        if not starts:
            return None
        start = stop = starts[0]
        while stop < len(specs) and specs[stop] is not None and (stop == start or
                                                                 specs[stop][0] != "Decode"):
            stop += 1
            if specs[stop - 1][0] == "HWC2CHW":
                break
        return start, stop, specs[start:stop]

    def _python_column_stage(self, builder, child, ops, column):
        """A map stage running `ops` in Python on column `column`, which it replaces."""
        task = MapTask(ops, [column])
        return self._python_stage(builder, child, ops, task,
                                  lambda row, results: _replace(row, column, results))

    def _python_stage(self, builder, child, ops, task, assemble):
        key, seed = builder.stage(), builder.seed
        workers = _workers(self.num_parallel_workers)
        name = f"map({', '.join(_op_name(op) for op in ops)})"
        processes = None
        if self.python_multiprocessing and workers > 1:
            processes = _multiprocess.start(task, workers, name)
        if processes is not None:
            builder.resources.append(processes)

            def run(row, epoch, index):
                return assemble(row, processes(row, [seed, key, epoch, index]))
        else:
            def run(row, epoch, index):
                previous = _random.enter_row([seed, key, epoch, index])
                try:
                    return assemble(row, task(row))
                finally:
                    _random.leave_row(previous)

        return builder.pipe.add_map(name, child, run, workers)


def _replace(row, column, results):
    """`row` with column `column` replaced by the one result of a map's ops."""
    if len(results) != 1:
        raise ValueError(f"{len(results)} outputs for the 1 output column")
    return tuple(row[:column]) + (as_value(results[0]),) + tuple(row[column + 1:])


class FilterDataset(_ColumnStage):
    def __init__(self, child, predicate, input_columns, num_parallel_workers):
        super().__init__([child], num_parallel_workers)
        if not callable(predicate):
            raise TypeError("filter: predicate must be callable")
        self.predicate = predicate
        self._setup(child, input_columns, None, "filter")

    def _row_count(self):
        return None

    def _build(self, builder, passes):
        child = self.children[0]._build(builder, passes)

        def run(row, epoch, index):
            keep = self.predicate(*[row[i] for i in self._in_index])
            return tuple(row) if bool(np.asarray(keep)) else None

        name = f"filter({_op_name(self.predicate)})"
        return builder.pipe.add_map(name, child, run, _workers(self.num_parallel_workers))


class BatchDataset(_ColumnStage):
    def __init__(self, child, batch_size, drop_remainder, num_parallel_workers, per_batch_map,
                 input_columns, output_columns, pad_info, padded):
        super().__init__([child], num_parallel_workers)
        if callable(batch_size):
            raise NotImplementedError("batch: a callable batch_size is not supported by kiln; "
                                      "give an int")
        self.batch_size = _count_arg("batch", batch_size, 1)
        if self.batch_size == -1:
            raise ValueError("batch: batch_size must be >= 1")
        if not isinstance(drop_remainder, bool):
            raise TypeError("batch: drop_remainder must be a bool")
        if per_batch_map is not None and not callable(per_batch_map):
            raise TypeError("batch: per_batch_map must be callable")
        self.drop_remainder, self.per_batch_map = drop_remainder, per_batch_map
        self._setup(child, input_columns, output_columns, "batch")
        self.pad_info = self._pad_info(pad_info, padded)

    def _pad_info(self, pad_info, padded):
        if not padded:
            return {}
        names = self._names_out
        if pad_info is None:  # pad every column to its longest row, with zeros
            return {n: (None, 0) for n in names}
        if not isinstance(pad_info, dict):
            raise TypeError("padded_batch: pad_info must be a dict {column: (shape, value)}")
        for name in pad_info:
            if name not in names:
                raise ValueError(f"padded_batch: no column {name!r}; the dataset has {names}")
        return {n: (v[0], v[1] if v[1] is not None else 0) for n, v in pad_info.items()}

    def _row_count(self):
        rows = self.children[0]._row_count()
        if rows is None:
            return None
        return rows // self.batch_size if self.drop_remainder else -(-rows // self.batch_size)

    def get_batch_size(self):
        return self.batch_size

    def _combine(self, parts, epoch, index):
        columns = [list(c) for c in zip(*parts)]
        results = columns
        if self.per_batch_map is not None:
            args = [columns[i] for i in self._in_index] + [BatchInfo(index, epoch)]
            try:
                results = self.per_batch_map(*args)
            except Exception as exc:
                annotate(exc, f"in per_batch_map {_op_name(self.per_batch_map)}")
                raise
            results = list(results) if isinstance(results, tuple) else [results]
            if len(results) != len(self.output_columns):
                raise ValueError(f"batch: per_batch_map returned {len(results)} columns for "
                                 f"output_columns {self.output_columns}")
            values = dict(zip(self._child_names, columns))
            values.update(zip(self.output_columns, results))
            columns = [values[n] for n in self._names_out]
        return tuple(_stack([v if isinstance(v, dict) else as_array(v) for v in col], name,
                            self.pad_info.get(name))
                     for name, col in zip(self._names_out, columns))

    def _build(self, builder, passes):
        child = self.children[0]
        native = self.per_batch_map is None and not self.pad_info
        if native and child._can_batch():
            # A tensor source batches its own rows: one stage, one hand-off per batch.
            return child._build(builder, passes, self.batch_size, self.drop_remainder)
        if native and isinstance(child, MapDataset):
            builder.batch_hints[id(child)] = self.batch_size
        child = child._build(builder, passes)
        grouped = builder.pipe.add_batch(child, self.batch_size, self.drop_remainder)
        name = f"batch({self.batch_size})"
        # Stacking is cheap: more threads than one only pay when per_batch_map does work.
        workers = self.num_parallel_workers or (1 if self.per_batch_map is None else None)
        return builder.pipe.add_map(name, grouped, self._combine, _workers(workers), native)


class ShuffleDataset(Dataset):
    def __init__(self, child, buffer_size):
        super().__init__([child])
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, numbers.Integral):
            raise TypeError(f"shuffle: buffer_size must be an int, got {buffer_size!r}")
        if buffer_size < 2:
            raise ValueError(f"shuffle: buffer_size must be >= 2, got {buffer_size}")
        self.buffer_size = int(buffer_size)

    def _build(self, builder, passes):
        child = self.children[0]._build(builder, passes)
        seed = builder.derive(builder.stage())
        return builder.pipe.add_shuffle(child, self.buffer_size, seed)


def _times(passes, count):
    return -1 if passes == -1 or count == -1 else passes * count


class RepeatDataset(Dataset):
    def __init__(self, child, count):
        super().__init__([child])
        self.count = -1 if count is None else _count_arg("repeat", count, 1)

    def _row_count(self):
        rows = self.children[0]._row_count()
        return None if rows is None else (-1 if self.count == -1 else rows * self.count)

    def get_repeat_count(self):
        return self.count

    def _build(self, builder, passes):
        child = self.children[0]._build(builder, _times(passes, self.count))
        return builder.pipe.add_repeat(child, self.count)


class TakeDataset(Dataset):
    def __init__(self, child, count):
        super().__init__([child])
        self.count = _count_arg("take", count, 1)

    def _row_count(self):
        rows = self.children[0]._row_count()
        if self.count == -1 or rows is None:
            return rows
        return min(rows, self.count)

    def _build(self, builder, passes):
        child = self.children[0]._build(builder, passes)
        return child if self.count == -1 else builder.pipe.add_take(child, self.count)


class SkipDataset(Dataset):
    def __init__(self, child, count):
        super().__init__([child])
        self.count = _count_arg("skip", count, 0)
        if self.count == -1:
            raise ValueError("skip: count must be >= 0")

    def _row_count(self):
        rows = self.children[0]._row_count()
        return None if rows is None else max(0, rows - self.count)

    def _build(self, builder, passes):
        return builder.pipe.add_skip(self.children[0]._build(builder, passes), self.count)


class ProjectDataset(Dataset):
    def __init__(self, child, columns):
        super().__init__([child])
        self.columns = _names(columns, "project: columns")
        names = child.get_col_names()
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise ValueError(f"project: no column {missing[0]!r}; the dataset has {names}")
        self._index = [names.index(c) for c in self.columns]

    def _columns(self):
        return list(self.columns)

    def _build(self, builder, passes):
        return builder.pipe.add_project(self.children[0]._build(builder, passes), self._index)


class RenameDataset(Dataset):
    """Only names change: no stage of its own."""

    def __init__(self, child, input_columns, output_columns):
        super().__init__([child])
        inputs = _names(input_columns, "rename: input_columns")
        outputs = _names(output_columns, "rename: output_columns")
        if len(inputs) != len(outputs):
            raise ValueError(f"rename: {len(inputs)} input columns but {len(outputs)} outputs")
        names = child.get_col_names()
        missing = [c for c in inputs if c not in names]
        if missing:
            raise ValueError(f"rename: no column {missing[0]!r}; the dataset has {names}")
        mapping = dict(zip(inputs, outputs))
        self._names = [mapping.get(n, n) for n in names]
        if len(set(self._names)) != len(self._names):
            raise ValueError(f"rename: the result {self._names} repeats a column name")

    def _columns(self):
        return list(self._names)

    def _build(self, builder, passes):
        return self.children[0]._build(builder, passes)


class ZipDataset(Dataset):
    def __init__(self, datasets):
        if not all(isinstance(d, Dataset) for d in datasets):
            raise TypeError("zip: expected datasets")
        super().__init__(datasets)
        names = [n for d in datasets for n in d.get_col_names()]
        if len(set(names)) != len(names):
            raise ValueError(f"zip: the datasets' columns {names} repeat a name; rename first")
        self._names = names

    def _columns(self):
        return list(self._names)

    def _row_count(self):
        counts = [d._row_count() for d in self.children]
        return None if None in counts else min(counts)

    def _build(self, builder, passes):
        return builder.pipe.add_zip([d._build(builder, passes) for d in self.children])


class ConcatDataset(Dataset):
    def __init__(self, datasets):
        if not all(isinstance(d, Dataset) for d in datasets):
            raise TypeError("concat: expected datasets")
        super().__init__(datasets)
        names = datasets[0].get_col_names()
        for d in datasets[1:]:
            if d.get_col_names() != names:
                raise ValueError(f"concat: column names differ: {names} and "
                                 f"{d.get_col_names()}")

    def _row_count(self):
        counts = [d._row_count() for d in self.children]
        return None if None in counts else sum(counts)

    def _build(self, builder, passes):
        return builder.pipe.add_concat([d._build(builder, passes) for d in self.children])


class SyncWaitDataset(Dataset):
    def __init__(self, child, condition_name, num_batch, callback):
        super().__init__([child])
        if not isinstance(condition_name, str):
            raise TypeError("sync_wait: condition_name must be a string")
        if isinstance(num_batch, bool) or not isinstance(num_batch, numbers.Integral) \
                or num_batch < 1:
            raise ValueError(f"sync_wait: num_batch must be an int >= 1, got {num_batch!r}")
        if callback is not None and not callable(callback):
            raise TypeError("sync_wait: callback must be callable")
        self.pair = BlockRelease(condition_name, int(num_batch), callback)

    def _build(self, builder, passes):
        child = self.children[0]._build(builder, passes)
        self.pair.reset()
        builder.resources.append(self.pair)

        def wait(row, epoch, index):
            self.pair.block()
            return tuple(row)

        return builder.pipe.add_map(f"sync_wait({self.pair.name})", child, wait, 1)
