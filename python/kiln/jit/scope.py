"""Name resolution while compiling: locals, closures, globals, builtins, and `self`.

Values the compiled code reads are wrapped on the way in: user functions and methods become
Converted callables (compiled from their source too), Cells become CellProxy objects (their
Parameters turn into graph inputs), and every value read from a global, a closure variable or
`self` is recorded as a guard of the compile cache (jit/guards.py).
"""

import builtins
import types

from kiln.common.parameter import Parameter
from kiln.jit.cell_interface import amp_call, amp_param
from kiln.jit.source import assigned_attributes


def is_library(obj):
    """kiln's own code runs as is on graph values; user code is compiled from source."""
    module = getattr(obj, "__module__", None) or ""
    return module == "kiln" or module.startswith("kiln.")


class Scope(dict):
    """The globals mapping expressions are evaluated in (a dict subclass, so comprehensions and
    lambdas inside them resolve names through it as well)."""

    def __init__(self, converter, frame):
        super().__init__()
        self.converter = converter
        self.locals = frame.locals
        self.fn_globals = frame.fn_globals
        self.closure = frame.closure
        self.closure_cells = frame.closure_cells
        self.source_node = frame.source.node

    def __getitem__(self, name):
        if name in self.locals:
            return self.locals[name]
        if name in self.closure:
            return self._closure_variable(name)
        if name in self.fn_globals:
            g = self.fn_globals
            value = self.converter.wrap(
                g[name], f"global {name!r}", lambda: g[name], key=(id(g), name)
            )
            return self._outside_object(name, value, f"global {name!r}")
        if name == "__builtins__":
            return builtins
        special = self.converter.graph_builtins.get(name)
        if special is not None:
            return special
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise NameError(f"name {name!r} is not defined", name=name)

    def _closure_variable(self, name):
        """A closure variable; one the enclosing function can still rebind (its cell) is
        guarded, unless compilation already replaced it by a graph value."""
        value, cell = self.closure[name], self.closure_cells.get(name)
        getter = None
        if cell is not None and cell.cell_contents is value:
            getter = lambda: cell.cell_contents  # noqa: E731 - read on every call
        value = self.converter.wrap(value, f"closure variable {name!r}", getter, key=id(cell))
        return self._outside_object(name, value, f"closure variable {name!r}")

    def _outside_object(self, name, value, description):
        """LAX: an object from outside whose attributes the function assigns is run-time state:
        seen through an OutsideObject, which reads and writes those attributes when the graph
        runs (and guards the others one by one, not the object's whole contents)."""
        from kiln.jit.guards import is_user_object  # noqa: PLC0415

        if not self.converter.lax or not is_user_object(value):
            return value
        written = {attr for owner, attr in assigned_attributes(self.source_node)
                   if owner == name}
        if not written:
            return value
        self.converter.guards.by_identity(value)
        return OutsideObject(self.converter, value, written, description)

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


class OutsideObject:
    """An object from outside the function (a global or closure variable) whose attributes in
    `written` the function assigns (LAX): those are read and written when the graph runs; any
    other attribute is read while compiling and guarded on its own."""

    def __init__(self, converter, obj, written, path):
        object.__setattr__(self, "_conv", converter)
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_written", written)
        object.__setattr__(self, "_path", path)

    def __getattr__(self, name):
        obj, conv = self._obj, self._conv
        if name in self._written:
            return conv.runtime_attribute(obj, self._path, name)
        return conv.wrap(getattr(obj, name), f"{self._path}.{name}", lambda: getattr(obj, name),
                         key=(id(obj), name))

    def __setattr__(self, name, value):
        from kiln.jit import lax  # noqa: PLC0415

        lax.run_later(setattr, (self._obj, name, value), {}, f"{self._path}.{name} = ...",
                      output="none", probe=False)


class Converted:
    """A user function (or method, with `self_obj`; or a functools.partial of one, with its
    bound arguments) that runs through the converter."""

    def __init__(self, converter, fn, self_obj=None, bound=(), bound_kwargs=None):
        self.converter, self.fn, self.self_obj = converter, fn, self_obj
        self.bound, self.bound_kwargs = tuple(bound), dict(bound_kwargs or {})
        self.__name__ = getattr(fn, "__name__", "function")

    def __call__(self, *args, **kwargs):
        args = self.bound + args
        if self.self_obj is not None:
            args = (self.self_obj,) + args
        if self.bound_kwargs:
            kwargs = {**self.bound_kwargs, **kwargs}
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
        if (id(cell), name) in conv.written_attributes:
            return conv.runtime_attribute(cell, self._path, name)
        value = getattr(cell, name)
        if isinstance(value, types.MethodType) and value.__self__ is cell:
            if is_library(value.__func__):
                return types.MethodType(value.__func__, self)  # library code, still through us
            return Converted(conv, value.__func__, self)
        wrapped = conv.wrap(
            value,
            f"{self._path}.{name}",
            lambda: getattr(cell, name),
            path=f"{self._path}.{name}",
            cell_attr=True,
            key=(id(cell), name),
        )
        # A cell run in mixed precision reads its trainable Parameters cast (Cell.to_float).
        trainable = isinstance(value, Parameter) and value.requires_grad
        return amp_param(cell, wrapped) if trainable else wrapped

    def __setattr__(self, name, value):
        self._converter.assign_attribute(self._cell, self._path, name, value)

    def __call__(self, *args, **kwargs):
        def run(a, k):
            return self._converter.call_cell(self._cell, self, a, k)

        return amp_call(self._cell, run, args, kwargs)

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
