"""Flattening nested tuples, lists and dicts into leaves and a structure, and back."""


def flatten(value):
    """(leaves, structure): containers are walked; everything else is a leaf."""
    leaves = []
    structure = _flatten(value, leaves)
    return leaves, structure


def _flatten(value, leaves):
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return ("tuple", tuple(_flatten(v, leaves) for v in value))
    if isinstance(value, list):
        return ("list", tuple(_flatten(v, leaves) for v in value))
    if isinstance(value, dict):
        keys = tuple(value)
        return ("dict", keys, tuple(_flatten(value[k], leaves) for k in keys))
    leaves.append(value)
    return "*"


_LAZY_SEQUENCES = (map, zip, filter, enumerate, range, reversed)


def lazy_as_tuples(value):
    """A graph's result as MindSpore returns it: map, zip, filter, enumerate, range and
    reversed objects (also inside tuples, lists and dicts) become tuples, made while compiling
    (a lazy object cannot leave the graph)."""
    if isinstance(value, _LAZY_SEQUENCES):
        return tuple(lazy_as_tuples(v) for v in value)
    if type(value) is tuple:
        return tuple(lazy_as_tuples(v) for v in value)
    if type(value) is list:
        return [lazy_as_tuples(v) for v in value]
    if type(value) is dict:
        return {k: lazy_as_tuples(v) for k, v in value.items()}
    return value


def unflatten(structure, leaves):
    it = iter(leaves)
    return _build(structure, it)


def _build(structure, it):
    if structure == "*":
        return next(it)
    kind = structure[0]
    if kind == "tuple":
        return tuple(_build(s, it) for s in structure[1])
    if kind == "list":
        return [_build(s, it) for s in structure[1]]
    return {k: _build(s, it) for k, s in zip(structure[1], structure[2])}
