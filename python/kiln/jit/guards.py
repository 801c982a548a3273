"""Compile-cache guards: the outside values a compilation read as constants, frozen for lookup.

A guard is (description, getter, frozen value). Frozen values are hashable and compare equal
only when the graph built from them would be the same: numbers keep their type (1, 1.0 and True
build different graphs), containers are compared item by item, tensors, Cells and functions by
identity, and objects of user classes by identity plus the frozen state of their attributes
(so changing `cfg.mult` of a global `cfg` recompiles instead of reusing the old constant), and
NumPy arrays by content (their values become constants of the graph).
"""

import reprlib
import sys
import types
import warnings

import numpy as np

from kiln import _graph_state
from kiln.common.tensor import Tensor
from kiln.jit.cell_interface import CellBase

_NOT_GUARDED = (types.ModuleType, type, types.BuiltinFunctionType, types.MethodWrapperType)
_NOT_USER_MODULES = frozenset(sys.stdlib_module_names) | {"kiln", "numpy", "builtins"}


class Same:
    """Compares equal only to a guard value holding the very same object."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return isinstance(other, Same) and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)

    def __repr__(self):
        return f"<{type(self.obj).__name__} object at {id(self.obj):#x}>"


def guardable(value):
    """Whether a value read from outside (a global, closure variable or attribute) gets a guard:
    everything but modules, classes and builtins, whose contents compiled code reads through
    attributes of their own."""
    return not isinstance(value, _NOT_GUARDED)


def _by_identity(value):
    return isinstance(value, (Tensor, CellBase, types.FunctionType, _graph_state.GraphValue))


def is_user_object(value):
    """An instance of a class defined outside the standard library, NumPy and kiln, with plain
    attributes (a config object): guarded by the values of its attributes."""
    module = (getattr(type(value), "__module__", None) or "builtins").partition(".")[0]
    return (
        module not in _NOT_USER_MODULES
        and isinstance(getattr(value, "__dict__", None), dict)
        and not isinstance(value, _NOT_GUARDED)
        and not _by_identity(value)
    )


def freeze(value, seen=None):
    """The hashable guard value of `value` (see the module docstring)."""
    kind = type(value)
    if kind in (bool, int, float, complex):
        return (kind, value)
    if kind is str or value is None:
        return value
    if _by_identity(value):
        return Same(value)
    if isinstance(value, np.ndarray):  # by content: compiled code makes constants from it
        return ("__ndarray__", value.dtype.str, value.shape, value.tobytes())
    seen = set() if seen is None else seen
    if id(value) in seen:  # a container or object that contains itself
        return Same(value)
    if isinstance(value, (list, tuple, dict, set, frozenset)) or is_user_object(value):
        seen.add(id(value))
        try:
            return _freeze_contents(value, seen)
        finally:
            seen.discard(id(value))
    if isinstance(value, (bool, int, float, str)):  # subclasses: IntEnum, mutable(...)
        return (kind, value)
    return Same(value)  # anything else by identity: rebinding it recompiles


def _freeze_contents(value, seen):
    if isinstance(value, list):
        return ("__list__", type(value)) + tuple(freeze(v, seen) for v in value)
    if isinstance(value, tuple):
        return ("__tuple__", type(value)) + tuple(freeze(v, seen) for v in value)
    if isinstance(value, dict):
        return ("__dict__", type(value)) + tuple(
            (freeze(k, seen), freeze(v, seen)) for k, v in value.items()
        )
    if isinstance(value, (set, frozenset)):
        return ("__set__", type(value), frozenset(freeze(v, seen) for v in value))
    attrs = tuple((k, freeze(v, seen)) for k, v in vars(value).items())
    return ("__object__", Same(value)) + attrs


class _ShortRepr(reprlib.Repr):
    """reprlib's truncating repr, except that values guarded by identity (tensors, Parameters,
    Cells, functions) show as their kind and identity: their own repr formats every element or
    the whole network, which made compiling a ResNet-18 spend most of its time printing weights
    that a message would only ever need to name."""

    def repr1(self, x, level):
        if _by_identity(x):
            shape = getattr(x, "shape", None)
            name = getattr(x, "name", None) if isinstance(getattr(x, "name", None), str) else None
            detail = ", ".join(
                part for part in (f"name={name!r}" if name else "",
                                  f"shape={tuple(shape)}" if shape is not None else "") if part)
            return f"<{type(x).__name__}{' ' + detail if detail else ''} at {id(x):#x}>"
        return super().repr1(x, level)


_short = _ShortRepr()


def show(value):
    """A short text for a guard value in messages: `Config(mult=2.0)` for user objects."""
    if is_user_object(value):
        attrs = ", ".join(f"{k}={_short.repr(v)}" for k, v in vars(value).items())
        return f"{type(value).__name__}({attrs})"
    return _short.repr(value)


def holds(frozen, obj):
    """True when a frozen guard value refers to `obj` by identity (anywhere inside)."""
    if isinstance(frozen, Same):
        return frozen.obj is obj
    if isinstance(frozen, tuple):
        return any(holds(item, obj) for item in frozen)
    return False


def graph_value_inside(frozen):
    """True when a frozen value holds a graph value (one compiled code stored there)."""
    if isinstance(frozen, Same):
        return isinstance(frozen.obj, _graph_state.GraphValue)
    if isinstance(frozen, tuple):
        return any(graph_value_inside(item) for item in frozen)
    return False


class JitSideEffectWarning(RuntimeWarning):
    """Compiling a function changed Python state outside it (done once, not per call)."""


class _Guard:
    __slots__ = ("description", "getter", "value", "shown", "always", "identity")

    def __init__(self, description, getter, value, always):
        self.description, self.getter, self.always = description, getter, always
        self.value, self.shown = freeze(value), show(value)
        self.identity = False  # guards only which object it is (run-time state, by_identity)

    def read(self):
        """The frozen current value, or None when it can no longer be read."""
        try:
            value = self.getter()
            return Same(value) if self.identity else freeze(value)
        except Exception:  # noqa: BLE001 - a vanished attribute or global fails the guard
            return _UNREADABLE


_UNREADABLE = object()


class Guards:
    """Values compilation read as constants; a cached graph is reused only while they hold."""

    def __init__(self):
        self.items = []
        self._described = set()  # keys of what is guarded: each once, however often read
        self._always = []  # the items checked on every call
        self._passed_at_epoch = None

    def record(self, description, getter, value, cell_attr=False, key=None):
        """cell_attr: read from a Cell attribute; unless the value is a mutable container or
        object, it can only change through Cell.__setattr__, which bumps
        kiln._graph_state.cell_epoch (as does every change of a Cell's `_cells` registry)."""
        key = description if key is None else key
        if not guardable(value) or key in self._described:
            return
        self._described.add(key)
        mutable = isinstance(value, (list, dict)) and not isinstance(value, _graph_state.EpochDict)
        always = not cell_attr or mutable or is_user_object(value)
        self.items.append(_Guard(description, getter, value, always))
        if always:
            self._always.append(self.items[-1])

    def settle(self, function_name):
        """After compiling: the guards hold the values as compilation left them, so state the
        function itself changed (a list it appended to) is not a guard failing on every call.
        Such a change happened once, while compiling, so it is reported; a graph value stored
        into outside state is an error: it would outlive the graph."""
        changed = []
        for guard in self.items:
            now = guard.read()
            if now is not _UNREADABLE and now != guard.value:
                if graph_value_inside(now):
                    raise TypeError(
                        f"Graph mode: compiled code stored a tensor it computes into "
                        f"{guard.description}, which outlives the compiled function; return "
                        f"the tensor instead (or assign into a Tensor with index assignment)"
                    )
                guard.value, guard.shown = now, show(guard.getter())
                changed.append(guard.description)
        if changed:
            warnings.warn(
                f"jit: compiling {function_name} changed {', '.join(changed)}; in a compiled "
                f"function such Python side effects happen once, while compiling, not on "
                f"every call (return values instead, or run it in PyNative)",
                JitSideEffectWarning,
                stacklevel=2,
            )

    def holds(self, obj):
        """True when compilation read `obj` from outside (a global, closure or attribute)."""
        return any(holds(guard.value, obj) for guard in self.items)

    def _reading(self, obj):
        for guard in self.items:
            try:
                same = guard.getter() is obj
            except Exception:  # noqa: BLE001 - a vanished name is not this object
                same = False
            if same:
                yield guard

    def reaches(self, obj):
        """Whether `obj` is what compilation read from outside, or sits inside it (a list in a
        list attribute), by identity."""
        def inside(value, depth):
            if value is obj:
                return True
            if depth > 8:
                return False
            items = value.values() if type(value) is dict else (
                value if type(value) in (list, tuple) else ())
            return any(inside(v, depth + 1) for v in items)

        for guard in self.items:
            try:
                value = guard.getter()
            except Exception:  # noqa: BLE001 - a vanished name reaches nothing
                continue
            if inside(value, 0):
                return True
        return False

    def read_directly(self, obj):
        """Whether compilation read `obj` itself from a global, closure variable or attribute."""
        return any(True for _ in self._reading(obj))

    def by_identity(self, obj):
        """`obj` (a list compiled code changes when the graph runs) is run-time state: the
        guards that read it hold on to which object it is, not to its contents."""
        for guard in list(self._reading(obj)):
            guard.identity, guard.value = True, Same(obj)

    def identity_checks(self):
        """The per-call checks as (getter, object) pairs when each one only asks whether a
        global or closure variable still holds the same object (a Cell, a function, a tensor):
        cheap enough for the fast path. None when one compares contents (a list, a number, a
        config object), which only the full check can do."""
        checks = []
        for guard in self._always:
            if not isinstance(guard.value, Same):
                return None
            checks.append((guard.getter, guard.value.obj))
        return tuple(checks)

    def names(self):
        """The key of the guards' group in the compile cache: what was read, in order."""
        return tuple(guard.description for guard in self.items)

    def values(self):
        return tuple(guard.value for guard in self.items)

    def current_values(self):
        """The frozen values the guarded names have now (None when one can't be read)."""
        values = tuple(guard.read() for guard in self.items)
        return None if any(v is _UNREADABLE for v in values) else values

    def mark_passed(self):
        self._passed_at_epoch = _graph_state.cell_epoch

    def first_failure(self):
        epoch = _graph_state.cell_epoch
        # Unless a Cell attribute was set since the last pass, only the always-checked guards.
        items = self.items if epoch != self._passed_at_epoch else self._always
        for guard in items:
            now = guard.read()
            if now is _UNREADABLE:
                return f"{guard.description} can no longer be read"
            if now != guard.value:
                return f"{guard.description} changed from {guard.shown} to {_show_now(guard)}"
        self._passed_at_epoch = epoch
        return None


def _show_now(guard):
    try:
        return show(guard.getter())
    except Exception:  # noqa: BLE001 - it was readable a moment ago
        return "?"
