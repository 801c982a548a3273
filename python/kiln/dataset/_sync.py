"""Dataset.sync_wait / sync_update: a pipeline that pauses every `num_batch` rows until the
training loop releases it (and hands the callback its data), as in MindSpore."""
import threading


class BlockRelease:
    """Counts the rows a sync point may pass; a worker blocks at zero until release()."""

    def __init__(self, name, num_batch, callback):
        self.name, self.num_batch, self.callback = name, num_batch, callback
        self._condition = threading.Condition()
        self._left = num_batch
        self._stopping = False

    def reset(self):
        with self._condition:
            self._left, self._stopping = self.num_batch, False

    def block(self):
        """Called for each row by the sync stage's thread (waits without the GIL)."""
        with self._condition:
            while self._left <= 0 and not self._stopping:
                self._condition.wait()
            if self._stopping:
                raise RuntimeError(f"sync_wait({self.name!r}): the pipeline stopped")
            self._left -= 1

    def release(self, num_batch, data):
        if self.callback is not None:
            self.callback(data)
        with self._condition:
            self._left += self.num_batch if num_batch is None else num_batch
            self._condition.notify_all()

    # A pipeline resource: interrupt() before its threads are joined, close() after.
    def interrupt(self):
        with self._condition:
            self._stopping = True
            self._condition.notify_all()

    def close(self):
        pass
