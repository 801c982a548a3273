"""Flattening nested tuples, lists and dicts into leaves and a structure, and back; the output
tree a compiled graph's signature records."""


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


_LAZY_SEQUENCES = (map, zip, filter, enumerate, range, reversed, type(iter([])))


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


def _is_literal(value):
    """Whether a result constant is kept in the graph's signature (it comes back as an equal
    value of the same type); any other object is `opaque`, kept here and passed back."""
    if value is None or type(value) in (bool, float):
        return True
    if type(value) is int:
        return -(1 << 63) <= value < (1 << 63)
    if type(value) is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates
            return False
        return True
    return False


def output_signature(result, is_result):
    """The output tree of a graph's signature (the engine rebuilds each call's result from it):
    ("result", k) for the k-th leaf that is_result accepts (a value the graph computes),
    ("literal", v), ("opaque", k), and ("tuple" | "list", items) / ("dict", [(key, value)])
    nodes, numbered in tree order. Returns (tree, the results in order, the opaque values)."""
    leaves, structure = flatten(result)
    outputs, opaque = [], []

    def leaf(value, can_be_result=True):
        if can_be_result and is_result(value):
            outputs.append(value)
            return ("result", len(outputs) - 1)
        if _is_literal(value):
            return ("literal", value)
        _check_no_graph_values_inside(value, is_result)
        opaque.append(value)
        return ("opaque", len(opaque) - 1)

    values = iter(leaves)

    def build(node):
        if node == "*":
            return leaf(next(values))
        if node[0] == "dict":  # a key before its value: the numbering the engine checks
            return ("dict", [(leaf(k, False), build(v)) for k, v in zip(node[1], node[2])])
        return (node[0], [build(item) for item in node[1]])

    return build(structure), outputs, opaque


def _check_no_graph_values_inside(value, is_result):
    """An object passed back as it is must not hold values the graph computes: they only exist
    while compiling. (A sparse tensor or a user object whose attributes compiled code set.)"""
    held = [k for k, v in getattr(value, "__dict__", {}).items() if is_result(v)]
    if held:
        kind = type(value).__name__
        raise TypeError(
            f"Graph mode: the compiled function returns a {kind} whose {', '.join(held)} "
            f"{'is a value' if len(held) == 1 else 'are values'} computed in the graph; an object "
            f"cannot carry them out. Return the tensors themselves (for a sparse tensor: "
            f"to_tuple() or to_dense())"
        )
