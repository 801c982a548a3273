"""Dataset sink mode in GRAPH_MODE: sink_size steps as one compiled loop whose every iteration
pops its batch from a dataset queue (the get_next op, MindSpore's GetNext), filled by a feeder
thread from the dataset while the loop trains."""
import threading

import numpy as np

from kiln import _C
from kiln.common.tensor import Tensor
from kiln.nn.cell import Cell
from kiln.ops._core import call

__all__ = ["QueueSink"]

QUEUE_CAPACITY = 4  # batches the feeder reads ahead of the loop


def _signature(batch):
    return tuple((t.dtype, tuple(t.shape)) for t in batch)


def get_next(attrs):
    """The next batch of the queue named in attrs, as a tuple of columns (a graph op)."""
    out = call("get_next", (), attrs)
    return out if isinstance(out, tuple) else (out,)


class QueueSinkLoop(Cell):
    """``count + 1`` training steps as one graph: step 0, then a graph loop (``range`` over the
    0-d tensor `count`), each step on the batch get_next pops. Returns the last step's outputs;
    the optimizer's in-place updates inside the loop are seen by the next iteration."""

    def __init__(self, network, queue_id, signature):
        super().__init__(auto_prefix=False)
        self.network = network
        dims = tuple(d for _, shape in signature for d in shape)
        self.attrs = (queue_id, tuple(dt._enum.value for dt, _ in signature),
                      tuple(len(shape) for _, shape in signature), dims)

    def construct(self, count):
        out = self.network(*get_next(self.attrs))
        for _ in range(count):
            out = self.network(*get_next(self.attrs))
        return out


class QueueSink:
    """The queue, its feeder thread and the compiled loops (one per batch signature) of one
    train() call. run(n) trains n steps and returns the last outputs; close() stops the feeder
    (also after an error or Ctrl-C) and frees the queue."""

    def __init__(self, network, source, check=None):
        self._network = network
        self._check = check  # called with each new batch signature (its columns) before use
        self.id = _C.feed_queue_create(QUEUE_CAPACITY)
        self._batches = source.endless()
        self._signatures = []  # of every batch pushed, in order
        self._changed = threading.Condition()
        self._error = None
        self._loops = {}
        self._thread = threading.Thread(target=self._produce, name="kiln-sink-feeder",
                                        daemon=True)
        self._thread.start()

    def _produce(self):
        try:
            for batch in self._batches:
                with self._changed:
                    self._signatures.append(_signature(batch))
                    self._changed.notify_all()
                if not _C.feed_queue_push(self.id, list(batch)):
                    return  # closed: training stopped
        except BaseException as e:  # raised by run() in the training thread
            with self._changed:
                self._error = e
                self._changed.notify_all()
            _C.feed_queue_close(self.id, f"reading the dataset failed: {type(e).__name__}: {e}")

    def _signature_at(self, index):
        """The signature of batch `index`, waiting for the feeder to read it."""
        with self._changed:
            while len(self._signatures) <= index:
                if self._error is not None:
                    raise self._error
                self._changed.wait(0.05)
            return self._signatures[index]

    def _loop(self, signature):
        if signature not in self._loops:
            if self._check is not None:
                self._check(signature)
            self._loops[signature] = QueueSinkLoop(self._network, self.id, signature)
        return self._loops[signature]

    def run(self, n):
        """n steps as one loop call; a batch of another shape (a partial last batch) ends the
        call before it, and a loop compiled for its shape takes the remaining steps."""
        done = 0
        while True:
            start = _C.feed_queue_pops(self.id)
            signature = self._signature_at(start)
            try:
                return self._loop(signature)(Tensor(np.array(n - done - 1, np.int32)))
            except ValueError:  # get_next refused a batch of another shape, or a real error
                if self._error is not None:
                    raise self._error from None
                popped = _C.feed_queue_pops(self.id) - start
                if popped < 1 or popped >= n - done or \
                        self._signature_at(start + popped) == signature:
                    raise
                done += popped  # those steps ran; the next batch has another shape
            except BaseException:  # the dataset's own error (get_next saw the queue closed)
                if self._error is not None:
                    raise self._error from None
                raise

    def close(self):
        _C.feed_queue_destroy(self.id)  # wakes the feeder (its push fails) and any get_next
        self._thread.join(timeout=5)
