"""The graph this thread is compiling, if any; the state itself is kept in C++.

Whether an op runs now or becomes a node is decided in one place, bindings/dispatch.cc, from
one per-thread value: the GraphEmitter the thread compiles into (None while it runs eagerly).
`_C.call` (ops._core.call) and the Tensor operators both read it there; this module is how
Python code sets and reads that same value.
"""

import itertools
from collections import OrderedDict

from kiln import _C

# This thread's GraphEmitter (kiln.jit.emitter) while it compiles a function, else None.
emitter = _C.graph_target


def compiling():
    """True while this thread compiles a function (its ops become graph nodes)."""
    return _C.graph_target() is not None


def converter():
    """The kiln.jit.convert.Converter of this thread's compilation, or None."""
    target = _C.graph_target()
    return None if target is None else target.converter


def begin_compile(target):
    """Makes `target` (a GraphEmitter) this thread's graph under construction; returns what
    end_compile restores (the enclosing compilation's, when compiles nest)."""
    return _C.set_graph_target(target)


def end_compile(previous):
    _C.set_graph_target(previous)


class eager:  # noqa: N801 - used as `with _graph_state.eager():`
    """Runs ops eagerly even while a graph is being compiled (compile-time work such as
    initialising the Parameters of a Cell built inside a jitted function)."""

    def __enter__(self):
        self.saved = _C.set_graph_target(None)

    def __exit__(self, *exc):
        _C.set_graph_target(self.saved)


class GraphValue:
    """Base of the values of a graph under construction (kiln.jit.graph_tensor.GraphTensor):
    code below the compiler recognises them by this class without importing kiln.jit."""

    __slots__ = ()


cell_epoch = 0  # changed on every Cell attribute change: lets compile-cache guards skip re-reading
_epochs = itertools.count(1)


def bump_cell_epoch():
    """A Cell attribute changed. Each change stores a value never used before (next() on a
    count is atomic), so no change made by one thread is lost to another's at the same time."""
    global cell_epoch
    cell_epoch = next(_epochs)


class EpochDict(OrderedDict):
    """A Cell's registry of children (`_cells`): every change bumps cell_epoch, as assigning a
    Cell attribute does, so compiled code that iterated it (a SequentialCell's construct) is
    re-checked only after a change instead of comparing its contents on every call."""

    __slots__ = ()

    def __setitem__(self, key, value):
        bump_cell_epoch()
        super().__setitem__(key, value)

    def __delitem__(self, key):
        bump_cell_epoch()
        super().__delitem__(key)

    def __ior__(self, other):
        bump_cell_epoch()
        return super().__ior__(other)

    def clear(self):
        bump_cell_epoch()
        super().clear()

    def pop(self, *args):
        bump_cell_epoch()
        return super().pop(*args)

    def popitem(self, last=True):
        bump_cell_epoch()
        return super().popitem(last)

    def setdefault(self, key, default=None):
        bump_cell_epoch()
        return super().setdefault(key, default)

    def update(self, *args, **kwargs):
        bump_cell_epoch()
        super().update(*args, **kwargs)

    def move_to_end(self, key, last=True):
        bump_cell_epoch()
        super().move_to_end(key, last)
