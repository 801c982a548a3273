"""Operators on eager tensors (Parameters, constants) while a graph compiles: graph nodes."""

from kiln import _C
from kiln._graph_state import compiling as _compiling


def eager_operator_in_graph(op, tensor, other, swap):
    """`param * 0.9` on an eager tensor while compiling: a graph node, never a baked-in value."""
    from kiln.ops._core import call  # noqa: PLC0415

    if _compiling.builder is None:  # compile-time work (initializers) runs eagerly
        _C._set_graph_hook(None)
        try:
            return apply_eagerly(op, tensor, other, swap)
        finally:
            _C._set_graph_hook(eager_operator_in_graph)
    if other is None:
        return call(op, (tensor,))
    if not isinstance(other, (bool, int, float)) and not hasattr(other, "shape"):
        return NotImplemented
    return call(op, (other, tensor) if swap else (tensor, other))


def apply_eagerly(op, tensor, other, swap):
    import operator  # noqa: PLC0415

    names = {
        "add": operator.add,
        "sub": operator.sub,
        "mul": operator.mul,
        "div": operator.truediv,
        "floor_div": operator.floordiv,
        "mod": operator.mod,
        "pow": operator.pow,
        "matmul": operator.matmul,
        "equal": operator.eq,
        "not_equal": operator.ne,
        "less": operator.lt,
        "less_equal": operator.le,
        "greater": operator.gt,
        "greater_equal": operator.ge,
        "bitwise_and": operator.and_,
        "bitwise_or": operator.or_,
        "bitwise_xor": operator.xor,
        "bitwise_left_shift": operator.lshift,
        "bitwise_right_shift": operator.rshift,
    }
    if other is None:
        unary = {"neg": operator.neg, "abs": operator.abs, "bitwise_not": operator.invert}
        return unary[op](tensor)
    fn = names[op]
    return fn(other, tensor) if swap else fn(tensor, other)
