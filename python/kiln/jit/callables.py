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
            from kiln.jit.builtins_graph import SPECIAL  # noqa: PLC0415

            return SPECIAL["super"](*args)
        return super_view(self.converter, self.cls, self.self_obj)


def super_view(converter, cls, self_obj):
    """super(cls, self_obj) in compiled code; self_obj may be a CellProxy."""
    real = getattr(self_obj, "_cell", self_obj)
    mro = type(real).__mro__
    if cls not in mro:
        raise TypeError(f"super(type, obj): obj must be an instance or subtype of type "
                        f"({type(real).__name__} is not a {getattr(cls, '__name__', cls)})")
    return _SuperView(converter, mro[mro.index(cls) + 1 :], self_obj)


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
