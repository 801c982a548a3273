"""Index assignment (`y[i] = v`) on graph values, with Python's sharing semantics.

The graph never mutates an intermediate value: `y[i] = v` makes an updated copy. To keep
PyNative's meaning, every other reference to the old value that the running code can see (other
names, lists, dicts and tuples of the frames in the same graph region) is pointed at the copy;
a graph input (a tensor argument, a Parameter, a tensor read from a global or `self`) is also
written back in place, as PyNative changes the caller's tensor. Assigning into a *view* of
another tensor (what indexing, reshape, transpose... return) would change that tensor too in
PyNative; Graph mode refuses it with a clear error instead of silently differing.
"""

from kiln.jit.graph_tensor import GraphTensor
from kiln.ops import _indexing
from kiln.ops._core import call


def set_item(converter, container, index, value):
    """Returns the updated copy of `container` after `container[index] = value`."""
    emitter = converter.emitter
    if not isinstance(container, GraphTensor):
        # A Parameter, or a tensor reached through outside state (a global list), is a graph
        # input and changes in place; another eager tensor was made at compile time (a
        # constant): names bound to it see the copy.
        eager, container = container, emitter.to_graph(container, "setitem")
        rebind(converter, eager, container, deep=False)
    op = _visible_base(converter, container)
    if op is not None:
        raise TypeError(
            f"index assignment into a view of another tensor (made by {op}): in PyNative it also "
            f"changes the tensor it views, which Graph mode does not support; assign into the "
            f"original tensor, or copy the view first (y = y + 0)"
        )
    updated = call("mul", (container, 1))  # a copy: graph values are never shared-mutated
    # Under grad (emitter.differentiating) the write is one node whose output is the updated
    # tensor, so the IR's autodiff sees what overwrote which elements.
    updated = _indexing.setitem(updated, index, value, traced=emitter.differentiating > 0)
    origin = _written_input(emitter, container)
    if origin is not None:
        call("assign", (origin, updated))  # the caller's tensor changes, as in PyNative
        # a later write to the updated value (x[0] = a; x[1] = b) writes the caller's too
        emitter.__dict__.setdefault("written_inputs", {})[id(updated)] = (updated, origin)
    rebind(converter, container, updated)
    return updated


def _written_input(emitter, value):
    """The graph input that `value` is (or is the updated copy of, after earlier writes)."""
    if id(value) in emitter.entries:
        return value
    hit = emitter.__dict__.get("written_inputs", {}).get(id(value))
    return hit[1] if hit is not None and hit[0] is value else None


def _visible_base(converter, value):
    """The view op, when `value` views a tensor the program can still see; else None."""
    views = converter.emitter.views
    hit = views.get(id(value))
    if hit is None:
        return None
    op, base = hit[1], hit[2]
    while True:
        if id(base) in converter.emitter.entries or _referenced(converter, base):
            return op
        hit = views.get(id(base))
        if hit is None:
            return None
        base = hit[2]


def _referenced(converter, value):
    seen = set()

    def find(v):
        if v is value:
            return True
        if type(v) in (list, tuple, dict) and id(v) not in seen:
            seen.add(id(v))
            return any(find(x) for x in (v.values() if type(v) is dict else v))
        return False

    return any(
        find(v)
        for frame, _ in converter.frames
        for store in (frame.locals, frame.closure)
        for v in store.values()
    )


def rebind(converter, old, new, deep=True):
    """Points every reference to `old` in the frames of the current region at `new` (with
    deep=False only names, not items of containers, which may belong to user state)."""
    func = converter.emitter.current_func
    seen = set()
    for frame, frame_func in reversed(converter.frames):
        if frame_func != func:
            break  # frames outside the region see the new value through the region's results
        for store in (frame.locals, frame.closure):
            for name, v in list(store.items()):
                replaced = _replace(v, old, new, seen) if deep else new if v is old else v
                if replaced is not v:
                    store[name] = replaced


def _replace(value, old, new, seen):
    if value is old:
        return new
    if isinstance(value, GraphTensor) or id(value) in seen:
        return value
    if type(value) is list:
        seen.add(id(value))
        for i, v in enumerate(value):
            value[i] = _replace(v, old, new, seen)
        return value
    if type(value) is dict:
        seen.add(id(value))
        for k, v in list(value.items()):
            value[k] = _replace(v, old, new, seen)
        return value
    if type(value) is tuple:
        items = tuple(_replace(v, old, new, seen) for v in value)
        return items if any(a is not b for a, b in zip(items, value)) else value
    return value
