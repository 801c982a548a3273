"""Callables compiled code meets: nested defs, zero-argument super(), Cells built inside it."""

import types

from kiln import _graph_state
from kiln.jit.forbidden import ForbiddenCall
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
            return two_argument_super(self.converter, args)
        return super_view(self.converter, self.cls, self.self_obj)


def two_argument_super(converter, args):
    """super(Cls, self) in compiled code: looks past Cls in the MRO of self's Cell; what it
    finds is compiled like any other method."""
    if len(args) != 2:
        raise TypeError("super() in compiled code takes no arguments or (class, object)")
    cls = real_classes(args[0])[0]
    return super_view(converter, cls, args[1])


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
        with _graph_state.eager():
            return self.cls(*args, **kwargs)


def real_classes(classinfo):
    """classinfo as a tuple of real classes (a Cell class read by compiled code is wrapped)."""
    if isinstance(classinfo, tuple):
        return tuple(c for item in classinfo for c in real_classes(item))
    if isinstance(classinfo, BuildAtCompileTime):
        return (classinfo.cls,)
    return (classinfo.target if isinstance(classinfo, ForbiddenCall) else classinfo,)
