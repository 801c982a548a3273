"""Callables compiled code meets: nested defs, zero-argument super(), Cells built inside it."""

import types

from kiln.jit.scope import Converted, is_library


class NestedFunction:
    """A `def` inside compiled code: calling it compiles its body with access to the frame."""

    def __init__(self, converter, node, frame):
        self.converter, self.node, self.frame = converter, node, frame
        self.__name__ = node.name

    def __call__(self, *args, **kwargs):
        return self.converter.call_nested(self, args, kwargs)


class ZeroArgSuper:
    """`super()` in a compiled method: looks past `cls` in the MRO of `self` (which may be a
    CellProxy), and compiles what it finds like any other method."""

    def __init__(self, converter, cls, self_obj):
        self.converter, self.cls, self.self_obj = converter, cls, self_obj

    def __call__(self, *args):
        if args:
            return super(*args)  # noqa: UP008 - explicit two-argument form passes through
        real = getattr(self.self_obj, "_cell", self.self_obj)
        mro = type(real).__mro__
        return _SuperView(self.converter, mro[mro.index(self.cls) + 1 :], self.self_obj)


class _SuperView:
    def __init__(self, converter, mro, self_obj):
        self._converter, self._mro, self._self = converter, mro, self_obj

    def __getattr__(self, name):
        for klass in self._mro:
            if name in vars(klass):
                value = vars(klass)[name]
                if isinstance(value, types.FunctionType):
                    if is_library(value):
                        return types.MethodType(value, self._self)
                    return Converted(self._converter, value, self._self)
                return value
        raise AttributeError(f"super() has no attribute {name!r}")


class BuildAtCompileTime:
    """Constructing a Cell inside compiled code builds it once, eagerly, at compile time (its
    initializers run as ordinary ops, not as graph nodes)."""

    def __init__(self, cls):
        self.cls = cls

    def __call__(self, *args, **kwargs):
        from kiln import _graph_state  # noqa: PLC0415

        with _graph_state.eager():
            return self.cls(*args, **kwargs)
