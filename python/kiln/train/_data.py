"""How Model reads data: kiln.dataset datasets and any iterable of batches, as tuples of Tensors;
and the sink feeder that stacks batches for one compiled loop, prefetched on a thread."""
import queue
import threading

import numpy as np

from kiln.common.tensor import Tensor

__all__ = ["DataSource", "SinkFeeder"]

# The most bytes of batches one compiled sink loop takes: a sink of more is split into several
# calls of the same loop (kiln keeps the whole sink in host memory; a device queue would not).
SINK_CHUNK_BYTES = 256 << 20


def _as_tensor(value):
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (np.ndarray, np.generic, int, float, bool, list)):
        return Tensor(np.asarray(value))
    raise TypeError(f"Model: a batch must hold Tensors or NumPy arrays, got "
                    f"{type(value).__name__}")


def as_batch(item):
    """One batch as a tuple of Tensors: a tuple/list of columns, a dict (its values in order),
    or a single Tensor/array (one column)."""
    if isinstance(item, dict):
        item = tuple(item.values())
    elif isinstance(item, (Tensor, np.ndarray)):
        item = (item,)
    elif not isinstance(item, (tuple, list)):
        raise TypeError(f"Model: each batch must be a tuple or list of Tensors/arrays, a dict "
                        f"of columns or one Tensor, got {type(item).__name__}")
    return tuple(_as_tensor(v) for v in item)


class DataSource:
    """A dataset as Model reads it. A kiln.dataset dataset is read through one tuple iterator
    made for all the epochs of a call (so the next epoch is prefetched); another iterable is
    read afresh each epoch (a one-shot iterator, e.g. a generator, is read into a list first)."""

    def __init__(self, data, who):
        if isinstance(data, (str, bytes)) or not (hasattr(data, "create_tuple_iterator")
                                                   or hasattr(data, "__iter__")):
            raise TypeError(f"For 'Model.{who}', the dataset must be a kiln.dataset dataset or an "
                            f"iterable of batches, but got {type(data).__name__}.")
        if not hasattr(data, "create_tuple_iterator") and iter(data) is data:
            data = list(data)
        self.data = data
        self._iterator = None

    def size(self):
        if hasattr(self.data, "get_dataset_size"):
            return self.data.get_dataset_size()
        if hasattr(self.data, "__len__"):
            return len(self.data)
        return sum(1 for _ in self.data)

    def _fresh(self):
        if hasattr(self.data, "create_tuple_iterator"):
            if self._iterator is None:
                self._iterator = self.data.create_tuple_iterator(num_epochs=-1)
            return iter(self._iterator)
        return iter(self.data)

    def close(self):
        """Stops the dataset's pipeline (its threads would otherwise prefetch on)."""
        iterator, self._iterator = self._iterator, None
        if iterator is not None:
            iterator.stop()

    def epoch(self):
        """The batches of one pass over the data."""
        for item in self._fresh():
            yield as_batch(item)

    def endless(self):
        """Batches without end, pass after pass (a sink of sink_size steps continues where the
        previous one stopped, as MindSpore's does)."""
        while True:
            empty = True
            for batch in self.epoch():
                empty = False
                yield batch
            if empty:
                raise ValueError("There is no valid data in dataset, please check dataset file "
                                 "firstly.")


def _runs(batches):
    """Splits a list of batches into runs of equal column shapes and dtypes (only those can be
    stacked into one array per column)."""
    runs, key = [], None
    for batch in batches:
        sig = tuple((tuple(t.shape), t.dtype) for t in batch)
        if sig != key:
            runs.append([])
            key = sig
        runs[-1].append(batch)
    return runs


def _stack(run):
    """A run of batches as (count, columns): each column stacked along a new first axis."""
    columns = tuple(Tensor(np.stack([b[i].asnumpy() for b in run]))
                    for i in range(len(run[0])))
    return len(run), columns


class SinkFeeder:
    """Reads sinks of `sink_size` batches from `source` on a thread, one sink ahead of the
    training loop, and hands each as a list of stacked chunks (count, columns)."""

    def __init__(self, source, sink_size):
        self._batches = source.endless()
        self._sink_size = sink_size
        self._queue = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = None

    def _put(self, item):
        """Hands `item` over unless the loop has stopped (then it is dropped: a full queue
        never blocks the thread for good)."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def _produce(self):
        try:
            while not self._stop.is_set():
                batches = [next(self._batches) for _ in range(self._sink_size)]
                chunks = []
                for run in _runs(batches):
                    per_step = sum(t.nbytes for t in run[0]) or 1
                    length = max(1, SINK_CHUNK_BYTES // per_step)
                    chunks += [_stack(run[i:i + length]) for i in range(0, len(run), length)]
                self._put((chunks, None))
        except BaseException as e:  # handed to the training loop, which raises it
            self._put((None, e))

    def next_sink(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._produce, name="kiln-sink-feeder",
                                            daemon=True)
            self._thread.start()
        while True:
            try:
                chunks, error = self._queue.get(timeout=0.05)
                break
            except queue.Empty:
                if not self._thread.is_alive():
                    raise RuntimeError("the sink feeder thread ended without data") from None
        if error is not None:
            raise error
        return chunks

    def close(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
