"""Tensor conditions: reduced to one bool value, negated, and `cond and not flag` for loop exits."""

from kiln import _C
from kiln.jit.graph_tensor import CompileTimeValueError, GraphTensor
from kiln.ops._core import call


def scalar_bool(value):
    """A condition tensor as a 0-d bool tensor; more than one element is PyNative's error."""
    value._one_element("bool")
    if value.size != 1:  # a run-time length: one element is needed, whatever it turns out to be
        raise CompileTimeValueError(
            f"a condition must be a single value, got a tensor of shape "
            f"{value.shape}; use .any() or .all()"
        )
    if value.shape != ():
        value = call("reshape", (value,), ((),))
    if value._dtype != bool_dtype():
        value = call("not_equal", (value, 0))
    return value


def contains(item, container):
    """`item in container` in compiled code: Python's rule (each element `is` item or `==` it),
    where an element comparison that is a graph value is decided when the graph runs; a tensor
    container holds item if any element equals it. Either answer may be a 0-d bool tensor."""
    if isinstance(container, GraphTensor):
        return container.__contains__(item)
    if type(container) not in (tuple, list) or not any(
        isinstance(v, GraphTensor) for v in (item, *container)
    ):
        return item in container
    found = False
    for element in container:
        if element is item:
            return True
        same = element == item
        if not isinstance(same, GraphTensor):
            if same:
                return True
            continue
        same = scalar_bool(same)
        found = same if found is False else call("logical_or", (found, same))
    return found


def logical_not(value):
    if isinstance(value, GraphTensor):
            return call("logical_not", (value,))
    return not value


def and_not(cond, flag):
    """cond and not flag, for a loop condition with a break flag."""
    if flag is False:
        return cond
    return call(
        "logical_and",
        (scalar_bool(cond) if isinstance(cond, GraphTensor) else cond, logical_not(flag)),
    )


def bool_dtype():
    return _C.DType.bool


def int64_dtype():
    return _C.DType.int64
