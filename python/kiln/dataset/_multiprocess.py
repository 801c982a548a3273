"""Worker processes for python_multiprocessing=True: a map's operations (or a random-access
source's reads) run in processes started with forkserver (spawn where there is none), never a
plain fork of a process whose thread pools already run.

The engine's stage keeps its threads: each takes a free process, sends it the row and waits for
the answer without the GIL, so the order, the failures and the per-row random state are those
of the thread mode, and results under a seed are the same in both."""
import multiprocessing
import pickle
import queue

from kiln import log
from kiln.dataset import _random


def _context():
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        # The server imports kiln.dataset once; the workers it forks start with it loaded.
        context.set_forkserver_preload(["kiln.dataset"])
        return context
    return multiprocessing.get_context("spawn")


def _serve(connection, payload):
    """A worker process: answers (row, key) with (True, result) or (False, exception) until
    told to stop (None) or its parent is gone (EOF)."""
    task = pickle.loads(payload)
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        row, key = message
        previous = _random.enter_row(key)
        try:
            reply = (True, task(row))
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
            reply = (False, exc)
        finally:
            _random.leave_row(previous)
        try:
            connection.send(reply)
        except Exception as exc:  # noqa: BLE001 - an exception or result that cannot pickle
            connection.send((False, RuntimeError(f"{type(exc).__name__}: {exc}")))


def picklable(task):
    """The pickled task, or None (the caller then uses threads) when it does not pickle."""
    try:
        return pickle.dumps(task)
    except Exception:  # noqa: BLE001 - lambdas, local functions, open files, ...
        return None


class WorkerProcesses:
    """`count` processes running `payload` (a pickled callable row -> result)."""

    def __init__(self, payload, count, what):
        self.what = what
        context = _context()
        self._free = queue.SimpleQueue()
        self._workers = []
        for _ in range(count):
            parent, child = context.Pipe()
            process = context.Process(target=_serve, args=(child, payload), daemon=True,
                                      name=f"kiln.dataset {what}")
            process.start()
            child.close()
            self._workers.append((process, parent))
            self._free.put((process, parent))

    def pids(self):
        return [process.pid for process, _ in self._workers]

    def __call__(self, row, key):
        """The task's result for `row` from a free worker (waits without the GIL)."""
        process, connection = self._free.get()
        try:
            connection.send((row, key))
            ok, value = connection.recv()
        except (EOFError, OSError, BrokenPipeError) as exc:
            process.join(1)
            raise RuntimeError(f"{self.what}: worker process {process.pid} ended (exit code "
                               f"{process.exitcode})") from exc
        self._free.put((process, connection))
        if not ok:
            raise value
        return value

    def close(self):
        """Stops every worker: asked first, terminated if it does not end within a second."""
        for _, connection in self._workers:
            try:
                connection.send(None)
            except (OSError, BrokenPipeError):
                pass
        for process, connection in self._workers:
            process.join(1)
            if process.is_alive():
                process.terminate()
                process.join(1)
            connection.close()
        self._workers = []


def start(task, count, what):
    """WorkerProcesses for `task`, or None (with a warning) when it cannot be pickled."""
    payload = picklable(task)
    if payload is None:
        log.warning(f"kiln.dataset: {what}: python_multiprocessing=True needs operations that "
                    f"pickle (no lambdas or local functions); running them on threads")
        return None
    return WorkerProcesses(payload, count, what)
