"""Cell hooks (register_forward_pre_hook, register_forward_hook, register_backward_hook,
register_backward_pre_hook) and their handles.

A forward hook runs around every call of the cell: pre-hooks see (and may replace) the
arguments, forward hooks see (and may replace) the output. In PyNative they are plain Python
calls. In compiled code (a sub-cell called from a compiled construct) they are compiled with
the construct, as MindSpore 2.10 compiles them in Graph mode; a top-level cell called in
GRAPH_MODE runs its own hooks in Python around the compiled construct.

Backward hooks run while a PyNative gradient is taken (kiln.ops._backward_hooks cuts the
recorded graph at the cell's inputs and outputs): a backward pre-hook gets (cell, grad_output)
and may replace grad_output; a backward hook gets (cell, grad_input, grad_output) and may
replace grad_input. In compiled code (a grad inside ms.jit or GRAPH_MODE) they are compiled
into the backward part of the graph and run each time the gradient is computed, as MindSpore
2.10 runs them in Graph mode.
"""
import itertools
import threading
from collections import OrderedDict

from kiln import _graph_state
from kiln.ops import _backward_hooks
from kiln.ops._core import is_tensor

_IDS = itertools.count()
_REGISTER = threading.Lock()  # two threads registering on one cell must share its registry


class HookHandle:
    """What a register_*_hook call returns: ``handle.remove()`` unregisters the hook."""

    def __init__(self, hooks):
        self.handle_id = next(_IDS)
        self._hooks = hooks

    def remove(self):
        if self._hooks.pop(self.handle_id, None) is not None:
            _graph_state.bump_cell_epoch()  # compiled graphs that ran the hook recompile

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register(cell, kind, hook_fn, prepend, **flags):
    if not callable(hook_fn):
        raise TypeError(f"{type(cell).__name__}.register_{kind}: hook_fn must be a Python "
                        f"function, got {type(hook_fn).__name__}")
    with _REGISTER:
        hooks = cell.__dict__.get(f"_{kind}s")
        if hooks is None:
            hooks = OrderedDict()
            object.__setattr__(cell, f"_{kind}s", hooks)
        handle = HookHandle(hooks)
        hooks[handle.handle_id] = (hook_fn, flags)
        object.__setattr__(cell, "_hooked", True)  # Cell.__call__ then takes the hooked path
        if prepend:
            hooks.move_to_end(handle.handle_id, last=False)
    _graph_state.bump_cell_epoch()
    return handle


_KINDS = ("forward_pre_hook", "forward_hook", "backward_pre_hook", "backward_hook")


def key(cell):
    """What identifies cell's hooks, for compiled graphs' guards."""
    d = cell.__dict__
    return tuple(tuple(d.get(f"_{kind}s", ())) for kind in _KINDS)


def has_hooks(cell):
    """Hooks registered on the cell, or a custom bprop (which runs where hooks run)."""
    d = cell.__dict__
    return any(d.get(f"_{kind}s") for kind in _KINDS) or has_bprop(cell)


def call_with_hooks(cell, owner, args, kwargs, body, call=None):
    """body(args, kwargs) with cell's hooks around it; `owner` is what hooks get as the cell
    (the cell, or its proxy in compiled code); `call(fn, *args)` runs a hook (compiled code
    passes the converter's)."""
    call = call or (lambda fn, *a: fn(*a))
    d = cell.__dict__
    if has_bprop(cell) and _backward_hooks.current() is not None:
        body = _with_bprop(cell, owner, body, call)
    if (d.get("_backward_hooks") or d.get("_backward_pre_hooks")) and \
            _backward_hooks.current() is not None:
        body = _with_backward_hooks(cell, owner, body, call)
    for fn, flags in list(cell.__dict__.get("_forward_pre_hooks", {}).values()):
        if flags["with_kwargs"]:
            out = call(fn, owner, args, kwargs)
            if out is not None:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise RuntimeError(f"forward pre-hook {_name(fn)} with kwargs must return "
                                       f"None or (args, kwargs), got {type(out).__name__}")
                args, kwargs = out
        else:
            out = call(fn, owner, args)
            if out is not None:
                args = out if isinstance(out, tuple) else (out,)
    post = list(cell.__dict__.get("_forward_hooks", {}).values())
    try:
        output = body(args, kwargs)
    except Exception:
        for fn, flags in post:
            if flags["always_call"]:
                _post(call, fn, flags, owner, args, kwargs, None)
        raise
    for fn, flags in post:
        out = _post(call, fn, flags, owner, args, kwargs, output)
        if out is not None:
            output = out
    return output


def _with_backward_hooks(cell, owner, body, call):
    """body with the recorded graph cut at the cell's tensor inputs and outputs, so that the
    gradient leaving the cell (grad_output) and the one reaching its inputs (grad_input) pass
    through the cell's backward hooks."""
    d, state = cell.__dict__, {}

    def input_backward(grads):
        grad_input = tuple(grads)
        for fn, _ in list(d.get("_backward_hooks", {}).values()):
            out = call(fn, owner, grad_input, state.get("grad_output", ()))
            grad_input = tuple(_backward_hooks.as_grads(out, grad_input, "backward hook"))
        return list(grad_input)

    def output_backward(grads):
        grad_output = tuple(grads)
        for fn, _ in list(d.get("_backward_pre_hooks", {}).values()):
            out = call(fn, owner, grad_output)
            grad_output = tuple(_backward_hooks.as_grads(out, grad_output, "backward pre hook"))
        state["grad_output"] = grad_output
        return list(grad_output)

    def run(args, kwargs):
        args = _replace_tensors(args, lambda ts: _backward_hooks.cut(ts, input_backward))
        output = body(args, kwargs)
        single = not isinstance(output, tuple)
        outs = _replace_tensors((output,) if single else output,
                                lambda ts: _backward_hooks.cut(ts, output_backward))
        return outs[0] if single else outs

    return run


def has_bprop(cell):
    """Whether the cell's class defines a custom backward (MindSpore's Cell.bprop)."""
    return getattr(type(cell), "bprop", None) is not None


def _with_bprop(cell, owner, body, call):
    """body whose gradient is cell.bprop(*inputs, out, dout) -> (one gradient per input), as
    MindSpore runs a Cell's bprop in both modes: construct's own operations are not
    differentiated, so the gradient of anything used only inside construct (its Parameters
    included) is zero."""
    bprop = type(cell).bprop

    def run(args, kwargs):
        if kwargs:
            raise TypeError(f"{type(cell).__name__}: a Cell with a custom bprop takes its "
                            f"inputs by position, got keyword arguments {sorted(kwargs)}")
        output = body(args, kwargs)
        single = not isinstance(output, tuple)
        outs = (output,) if single else output
        positions = [i for i, v in enumerate(args) if is_tensor(v)]

        def backward(grads):
            dout = grads[0] if single else tuple(grads)
            result = call(bprop, owner, *args, output, dout)
            if not isinstance(result, (tuple, list)) or len(result) != len(args):
                got = (f"{len(result)}" if isinstance(result, (tuple, list))
                       else type(result).__name__)
                raise TypeError(f"{type(cell).__name__}.bprop must return a tuple of "
                                f"{len(args)} gradient(s), one per input of construct, got {got}")
            return [result[i] for i in positions]

        tensor_outs = [i for i, v in enumerate(outs) if is_tensor(v)]
        leaves = _backward_hooks.replace_outputs([args[i] for i in positions],
                                                 [outs[i] for i in tensor_outs], backward)
        new = list(outs)
        for i, leaf in zip(tensor_outs, leaves):
            new[i] = leaf
        return new[0] if single else tuple(new)

    return run


def _replace_tensors(values, fn):
    positions = [i for i, v in enumerate(values) if is_tensor(v)]
    if not positions:
        return tuple(values)
    new = fn([values[i] for i in positions])
    out = list(values)
    for i, v in zip(positions, new):
        out[i] = v
    return tuple(out)


def _post(call, fn, flags, owner, args, kwargs, output):
    if flags["with_kwargs"]:
        return call(fn, owner, args, kwargs, output)
    return call(fn, owner, args, output)


def _name(fn):
    return getattr(fn, "__name__", repr(fn))
