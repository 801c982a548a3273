"""Name resolution while compiling: locals, closures, globals, builtins, and `self`.

Values the compiled code reads are wrapped on the way in: user functions and methods become
Converted callables (compiled from their source too), Cells become CellProxy objects (their
Parameters turn into graph inputs), and every plain value read from a global or from `self`
is recorded as a guard of the compile cache.
"""

import builtins
import types

from kiln import _graph_state
from kiln.jit import builtins_graph


def is_library(obj):
    """kiln's own code runs as is on graph values; user code is compiled from source."""
    module = getattr(obj, "__module__", None) or ""
    return module == "kiln" or module.startswith("kiln.")


def _guardable(value):
    """Values a guard can check: Python constants by value (containers too), and tensors, Cells
    and functions by identity (rebinding `self.mask` or a global to another tensor recompiles
    instead of silently running with the old one)."""
    if isinstance(value, (bool, int, float, str, type(None))) or _by_identity(value):
        return True
    if isinstance(value, (tuple, list)):
        return all(_guardable(v) for v in value)
    if type(value) is dict:
        return all(_guardable(k) and _guardable(v) for k, v in value.items())
    return False


def _by_identity(value):
    from kiln.common.tensor import Tensor  # noqa: PLC0415
    from kiln.nn import Cell  # noqa: PLC0415

    return isinstance(value, (Tensor, Cell, types.FunctionType))


class _Same:
    """Compares equal only to a guard value holding the very same object."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return isinstance(other, _Same) and other.obj is self.obj

    def __repr__(self):
        return f"<{type(self.obj).__name__} object at {id(self.obj):#x}>"


class Guards:
    """Values compilation read as constants; a cached graph is reused only while they hold."""

    def __init__(self):
        self.items = []  # (description, getter, value, always)
        self._always = []  # the items checked on every call
        self._passed_at_epoch = None

    def record(self, description, getter, value, cell_attr=False):
        """cell_attr: read from a Cell attribute; unless the value is a mutable container, it can
        only change through Cell.__setattr__, which bumps kiln._graph_state.cell_epoch."""
        if _guardable(value):
            always = not cell_attr or isinstance(value, (list, dict))
            self.items.append((description, getter, _freeze(value), always))
            if always:
                self._always.append(self.items[-1])

    def has_per_call_checks(self):
        return bool(self._always)

    def first_failure(self):
        epoch = _graph_state.cell_epoch
        # Unless a Cell attribute was set since the last pass, only the always-checked guards.
        items = self.items if epoch != self._passed_at_epoch else self._always
        for description, getter, value, _ in items:
            try:
                now = getter()
                now = _freeze(now) if _guardable(now) else _Same(now)
            except Exception:  # noqa: BLE001 - a vanished attribute fails the guard
                return f"{description} can no longer be read"
            if now != value:
                return f"{description} changed from {value!r} to {now!r}"
        self._passed_at_epoch = epoch
        return None


def _freeze(value):
    if _by_identity(value):
        return _Same(value)
    if isinstance(value, list):
        return ("__list__",) + tuple(_freeze(v) for v in value)
    if isinstance(value, tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return ("__dict__",) + tuple((_freeze(k), _freeze(v)) for k, v in value.items())
    return value


class Scope(dict):
    """The globals mapping expressions are evaluated in (a dict subclass, so comprehensions and
    lambdas inside them resolve names through it as well)."""

    def __init__(self, converter, frame_locals, fn_globals, closure):
        super().__init__()
        self.converter = converter
        self.locals = frame_locals
        self.fn_globals = fn_globals
        self.closure = closure

    def __getitem__(self, name):
        if name in self.locals:
            return self.locals[name]
        if name in self.closure:
            return self.converter.wrap(self.closure[name], f"closure variable {name!r}", None)
        if name in self.fn_globals:
            g = self.fn_globals
            return self.converter.wrap(g[name], f"global {name!r}", lambda: g[name])
        if name == "__builtins__":
            return builtins
        special = builtins_graph.SPECIAL.get(name)
        if special is not None:
            return special
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise NameError(f"name {name!r} is not defined", name=name)

    def __contains__(self, name):
        try:
            self[name]
        except NameError:
            return False
        return True

    def get(self, name, default=None):
        try:
            return self[name]
        except NameError:
            return default

    def __setitem__(self, name, value):
        self.locals[name] = value  # walrus targets inside expressions


class Converted:
    """A user function (or method, with `self_obj`) that runs through the converter."""

    def __init__(self, converter, fn, self_obj=None):
        self.converter, self.fn, self.self_obj = converter, fn, self_obj
        self.__name__ = getattr(fn, "__name__", "function")

    def __call__(self, *args, **kwargs):
        if self.self_obj is not None:
            args = (self.self_obj,) + args
        return self.converter.call_function(self.fn, args, kwargs)


class CellProxy:
    """`self` (or a sub-Cell) while compiling: reads become graph inputs, constants or
    converted methods; Parameter assignment becomes an in-place update in the graph."""

    def __init__(self, converter, cell, path):
        object.__setattr__(self, "_cell", cell)
        object.__setattr__(self, "_converter", converter)
        object.__setattr__(self, "_path", path)

    def __getattr__(self, name):
        cell, conv = self._cell, self._converter
        value = getattr(cell, name)
        if isinstance(value, types.MethodType) and value.__self__ is cell:
            if is_library(value.__func__):
                return types.MethodType(value.__func__, self)  # library code, still through us
            return Converted(conv, value.__func__, self)
        return conv.wrap(
            value,
            f"{self._path}.{name}",
            lambda: getattr(cell, name),
            path=f"{self._path}.{name}",
            cell_attr=True,
        )

    def __setattr__(self, name, value):
        self._converter.assign_attribute(self._cell, self._path, name, value)

    def __call__(self, *args, **kwargs):
        return self._converter.call_cell(self._cell, self, args, kwargs)

    def __iter__(self):
        for i, item in enumerate(self._cell):
            yield self._converter.wrap(item, f"{self._path}[{i}]", None, path=f"{self._path}[{i}]")

    def __len__(self):
        return len(self._cell)

    def __getitem__(self, index):
        item = self._cell[index]
        return self._converter.wrap(
            item, f"{self._path}[{index!r}]", None, path=f"{self._path}[{index!r}]"
        )
