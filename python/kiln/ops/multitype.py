"""MultitypeFuncGraph (a function chosen by its arguments' types) and HyperMap / Map (a function
applied over tuples and lists): MindSpore's composite function combinators, in both modes."""
import functools
import types

from kiln import _graph_state
from kiln.ops._core import is_tensor

__all__ = ["MultitypeFuncGraph", "HyperMap", "Map"]

# MindSpore's type names, each with the names it is a kind of ("Int" is a "Number").
_PARENTS = {
    "Tensor": (), "Number": (), "Bool": ("Number",), "Int": ("Number",), "Float": ("Number",),
    "String": (), "None": (), "Tuple": (), "List": (), "Dictionary": (), "Function": (),
    "Slice": (), "Ellipsis": (), "TypeType": (),
}
# MindSpore names of values kiln does not have (sparse tensors, ...): accepted in a
# registration, so code registering them runs, and matched by no kiln value.
_NEVER_MATCHED = frozenset({
    "RowTensor", "COOTensor", "CSRTensor", "MapTensor", "UInt", "Class", "Undetermined",
    "Keyword", "Problem", "External", "EnvType", "TypeNone", "RefKey", "Symbol",
})


def type_name(value):
    """MindSpore's type name of a value; in compiled code a graph value is a "Tensor", so
    dispatch uses compile-time types."""
    if is_tensor(value):
        return "Tensor"
    for python_type, name in ((bool, "Bool"), (int, "Int"), (float, "Float"), (str, "String"),
                              (tuple, "Tuple"), (list, "List"), (dict, "Dictionary"),
                              (slice, "Slice"), (type, "TypeType")):
        if isinstance(value, python_type):
            return name
    if value is None:
        return "None"
    if value is Ellipsis:
        return "Ellipsis"
    if callable(value):
        return "Function"
    return f"{type(value).__name__} object"  # never a registered name, even for a class "Tensor"


def _matches(name, registered):
    return name == registered or registered in _PARENTS.get(name, ())


def _check_registered_name(mftype_name, name):
    if not isinstance(name, str):
        raise TypeError(f"MultitypeFuncGraph {mftype_name!r}: register() takes MindSpore type "
                        f"names as str (\"Tensor\", \"Number\", ...), got {name!r}")
    if name not in _PARENTS and name not in _NEVER_MATCHED:
        raise ValueError(f"MultitypeFuncGraph {mftype_name!r}: unknown type name {name!r}; "
                         f"known: {', '.join(sorted(_PARENTS))}")


def _as_compiled(fn, description):
    """Inside compiled code, a user function is compiled from its source like any callee;
    outside, it is called as is."""
    converter = _graph_state.converter()
    if converter is None:
        return fn
    return converter.wrap(fn, description, None)


class MultitypeFuncGraph:
    """A function with one implementation per tuple of argument types:
    ``@add.register("Tensor", "Number")`` registers one, and a call runs the first registered
    whose types match (in compiled code: the compile-time types, a graph value being a
    "Tensor"). No match is a ValueError listing the argument types and the registrations."""

    def __init__(self, name, read_value=False, doc_url="", need_raise=False):
        if not isinstance(name, str):
            raise TypeError(f"MultitypeFuncGraph: name must be a str, got {type(name).__name__}")
        self.name, self.read_value, self.doc_url = name, read_value, doc_url
        self.need_raise = need_raise
        self.entries = []  # (type names, function), in registration order

    def register(self, *type_names):
        for name in type_names:
            _check_registered_name(self.name, name)

        def deco(fn):
            if not callable(fn):
                raise TypeError(f"MultitypeFuncGraph {self.name!r}: register() decorates a "
                                f"function, got {type(fn).__name__}")
            self.entries.append((tuple(type_names), fn))
            return fn

        return deco

    def _select(self, args):
        names = tuple(type_name(a) for a in args)
        for registered, fn in self.entries:
            if len(registered) == len(names) and all(map(_matches, names, registered)):
                return fn
        known = "; ".join(f"({', '.join(r)})" for r, _ in self.entries) or "none"
        raise ValueError(f"MultitypeFuncGraph {self.name!r}: no function registered for "
                         f"argument types ({', '.join(names)}); registered: {known}")

    def __call__(self, *args):
        fn = self._select(args)
        return _as_compiled(fn, f"{self.name} registered {getattr(fn, '__name__', 'fn')}")(*args)

    def __repr__(self):
        return f"MultitypeFuncGraph({self.name!r}, {len(self.entries)} registered)"


def _sequence_kind(args, combinator):
    """tuple or list when args are sequences to map over (all of one kind and length); None
    when they are all leaves."""
    if not any(isinstance(a, (tuple, list)) for a in args):
        return None
    kind = tuple if isinstance(args[0], tuple) else list
    for i, a in enumerate(args):
        if not isinstance(a, kind):
            raise TypeError(f"{combinator}: the arguments to map over must all be tuples or all "
                            f"be lists; argument 0 is {type(args[0]).__name__}, argument {i} "
                            f"is {type(a).__name__}")
        if len(a) != len(args[0]):
            raise ValueError(f"{combinator}: the sequences to map over must have the same "
                             f"length; argument 0 has {len(args[0])} items, argument {i} has "
                             f"{len(a)}")
    return kind


def _map_items(apply, args, kind, reverse):
    """apply(*items) for each index of the sequences in args; in reverse order of evaluation
    when asked (the results keep the sequences' order)."""
    order = range(len(args[0]))
    results = {}
    for i in reversed(order) if reverse else order:
        results[i] = apply(*(a[i] for a in args))
    return kind(results[i] for i in order)


def _split_fn(combinator, fixed, args):
    if fixed is not None:
        return fixed, args
    if not args:
        raise TypeError(f"{combinator}: called without a function (none was given at "
                        f"construction) and without arguments")
    return args[0], args[1:]


def _resolve_fn(fn, combinator):
    if not callable(fn):
        raise TypeError(f"{combinator}: the function to map must be callable, got "
                        f"{type(fn).__name__}")
    if isinstance(fn, types.FunctionType | types.MethodType):
        return _as_compiled(fn, f"{combinator} function {fn.__name__}")
    return fn


class HyperMap:
    """``HyperMap(ops=None, reverse=False)``: applies a function element by element over
    tuples/lists, recursing into nested ones; leaves (tensors, numbers, ...) are passed to the
    function. Without `ops`, the function is the first argument of each call. Results keep the
    sequences' kind (tuple or list); sequences of different kinds or lengths are an error."""

    def __init__(self, ops=None, reverse=False):
        self.ops, self.reverse = ops, bool(reverse)

    def __call__(self, *args):
        fn, args = _split_fn("HyperMap", self.ops, args)
        if not args:
            raise TypeError("HyperMap: expected at least one argument to map over")
        return self._apply(_resolve_fn(fn, "HyperMap"), args)

    def _apply(self, fn, args):
        kind = _sequence_kind(args, "HyperMap")
        if kind is None:
            return fn(*args)
        return _map_items(functools.partial(self._recurse, fn), args, kind, self.reverse)

    def _recurse(self, fn, *items):
        return self._apply(fn, items)


class Map:
    """``Map(ops=None, reverse=False)``: like HyperMap, one level deep: the function gets the
    sequences' items as they are."""

    def __init__(self, ops=None, reverse=False):
        self.ops, self.reverse = ops, bool(reverse)

    def __call__(self, *args):
        fn, args = _split_fn("Map", self.ops, args)
        kind = _sequence_kind(args, "Map") if args else None
        if kind is None:
            raise TypeError("Map: the arguments to map over must be tuples or lists, got "
                            f"{', '.join(type(a).__name__ for a in args) or 'none'}")
        return _map_items(_resolve_fn(fn, "Map"), args, kind, self.reverse)
