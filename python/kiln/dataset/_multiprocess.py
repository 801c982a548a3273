"""Worker processes for python_multiprocessing=True: a map's operations (or a random-access
source's reads) run in fresh interpreters (a spawn: never a fork of a process whose thread
pools already run), started with subprocess so that they never re-run the user's main script.

The engine's stage keeps its threads: each takes a free process, sends it the row and waits for
the answer without the GIL, so the order, the failures and the per-row random state are those
of the thread mode, and results under a seed are the same in both. Messages are pickles with a
length in front, over the worker's stdin and a duplicate of its stdout (its own stdout goes to
stderr, so a print in user code cannot break them)."""
import os
import pickle
import queue
import struct
import subprocess
import sys
import types

from kiln import log
from kiln.dataset import _random

_LENGTH = struct.Struct("<Q")
_WORKER = "from kiln.dataset._multiprocess import serve; serve()"


def _send(stream, message):
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def _receive(stream):
    """The next message; EOFError when the other side is gone."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError
    (length,) = _LENGTH.unpack(head)
    data = stream.read(length)
    if len(data) < length:
        raise EOFError
    return pickle.loads(data)


def serve():
    """A worker's main: the parent's sys.path and task first, then (row, key) → (True, result)
    or (False, exception) until None or the end of its stdin."""
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # user code's prints go to stderr, not into the replies
    sys.stdout = sys.stderr
    try:
        path, payload = _receive(requests)
    except EOFError:
        return
    sys.path[:] = path
    task = pickle.loads(payload)
    while True:
        try:
            message = _receive(requests)
        except EOFError:
            return
        if message is None:
            return
        row, key = message
        previous = _random.enter_row(key)
        try:
            reply = (True, task(row))
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the parent
            reply = (False, exc)
        finally:
            _random.leave_row(previous)
        try:
            _send(replies, reply)
        except Exception as exc:  # noqa: BLE001 - an exception or result that cannot pickle
            _send(replies, (False, RuntimeError(f"{type(exc).__name__}: {exc}")))


class _NoMainPickler(pickle.Pickler):
    """Refuses what is defined in the main script: a fresh interpreter cannot import it."""

    def reducer_override(self, obj):
        if (isinstance(obj, (type, types.FunctionType))
                and getattr(obj, "__module__", None) == "__main__"):
            raise pickle.PicklingError(f"{obj.__qualname__} is defined in the main script")
        return NotImplemented


def picklable(task):
    """The pickled task and None, or None and why it cannot go to a worker process."""
    import io  # noqa: PLC0415 - only here

    buffer = io.BytesIO()
    try:
        _NoMainPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(task)
    except Exception as exc:  # noqa: BLE001 - lambdas, local functions, open files, ...
        return None, f"{type(exc).__name__}: {exc}"
    return buffer.getvalue(), None


class WorkerProcesses:
    """`count` interpreters running `payload` (a pickled callable row -> result)."""

    def __init__(self, payload, count, what):
        self.what = what
        self._closing = False
        self._free = queue.SimpleQueue()
        self._workers = []
        try:
            for _ in range(count):
                process = subprocess.Popen([sys.executable, "-c", _WORKER],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                self._workers.append(process)
                _send(process.stdin, (list(sys.path), payload))
                self._free.put(process)
        except BaseException:
            self.close()
            raise

    def pids(self):
        return [process.pid for process in self._workers]

    def _take(self):
        while not self._closing:
            try:
                return self._free.get(timeout=0.05)
            except queue.Empty:
                continue
        raise RuntimeError(f"{self.what}: the pipeline stopped")

    def __call__(self, row, key):
        """The task's result for `row` from a free worker (waits without the GIL)."""
        process = self._take()
        try:
            _send(process.stdin, (row, key))
            ok, value = _receive(process.stdout)
        except (EOFError, OSError) as exc:
            try:
                code = process.wait(1)
            except subprocess.TimeoutExpired:
                code = None
            raise RuntimeError(f"{self.what}: worker process {process.pid} ended (exit code "
                               f"{code})") from exc
        self._free.put(process)
        if not ok:
            raise value
        return value

    def interrupt(self):
        """Before the pipeline's threads are joined: no thread may wait for a worker any more
        (a worker lost to a crash never comes back to the free list), and a worker still busy
        with a row (user code that takes long or never ends) is killed, so the thread waiting
        on it returns."""
        self._closing = True
        for process in self._workers:
            if process.poll() is None:
                process.kill()

    def close(self):
        """Stops every worker: asked first (None, then the end of its input), killed if it has
        not ended within a second."""
        for process in self._workers:
            try:
                _send(process.stdin, None)
                process.stdin.close()
            except OSError:
                pass
        for process in self._workers:
            try:
                process.wait(1)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            process.stdout.close()
            if not process.stdin.closed:
                try:
                    process.stdin.close()
                except OSError:
                    pass
        self._workers = []


def start(task, count, what):
    """WorkerProcesses for `task`, or None (with a warning) when it cannot go to a process."""
    payload, why = picklable(task)
    if payload is None:
        log.warning(f"kiln.dataset: {what}: python_multiprocessing=True needs operations a new "
                    f"process can import (not lambdas, local functions or the main script's): "
                    f"{why}; running them on threads")
        return None
    return WorkerProcesses(payload, count, what)
