"""The graph each thread is compiling, if any: ops._core.call sends ops there, not to kernels."""

import itertools
import threading


class _Compiling(threading.local):
    """What this thread is compiling. Per thread, so a thread running eager ops (or compiling
    its own function) while another thread compiles never has its ops sent into that graph."""

    builder = None  # a kiln.jit.emitter.GraphEmitter while this thread compiles a function
    converter = None  # the kiln.jit.convert.Converter of that compilation


compiling = _Compiling()
# How many threads are compiling now. A thread-local read costs ~40 ns more than a module
# attribute, so ops._core.call reads `compiling` only while this is not 0.
threads_compiling = 0
_counter_lock = threading.Lock()


def begin_compile(builder, converter):
    """Makes `builder` this thread's graph under construction; returns what to restore."""
    global threads_compiling
    previous = (compiling.builder, compiling.converter)
    with _counter_lock:
        threads_compiling += 1
    compiling.builder, compiling.converter = builder, converter
    return previous


def end_compile(previous):
    global threads_compiling
    compiling.builder, compiling.converter = previous
    with _counter_lock:
        threads_compiling -= 1
cell_epoch = 0  # changed on every Cell attribute change: lets compile-cache guards skip re-reading
_epochs = itertools.count(1)


def bump_cell_epoch():
    """A Cell attribute changed. Each change stores a value never used before (next() on a
    count is atomic), so no change made by one thread is lost to another's at the same time."""
    global cell_epoch
    cell_epoch = next(_epochs)
graph_tensor_type = type(None)  # kiln.jit.graph_tensor.GraphTensor, set when it is imported


class eager:  # noqa: N801 - used as `with _graph_state.eager():`
    """Runs ops eagerly even while a graph is being compiled (compile-time work such as
    initialising the Parameters of a Cell built inside a jitted function)."""

    def __enter__(self):
        self.saved, compiling.builder = compiling.builder, None

    def __exit__(self, *exc):
        compiling.builder = self.saved
