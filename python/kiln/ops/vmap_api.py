"""ops.vmap: fn mapped over an axis of its arguments, run once on the whole batch.

The mapped arguments enter fn as Batched values (kiln.ops._batching) and every op fn calls
runs through a batching rule: elementwise ops, reductions, softmax, shape ops, concat and
matmul run once on the whole batch; any other op runs once per example and is stacked (the
documented fallback, docs/compatibility.md "vmap"). Nested vmaps compose.
"""
import threading

import numpy as np

from kiln.common._arrays import tensor_of
from kiln.ops import _batching, _core

__all__ = ["vmap"]


def vmap(fn, in_axes=0, out_axes=0):
    """Returns a function that maps `fn` over axis in_axes[i] of its i-th argument (None: not
    mapped) and puts the mapped axis of each result at out_axes."""
    if not callable(fn):
        raise TypeError(f"vmap: fn must be callable, got {type(fn).__name__}")
    _check_axes_spec(in_axes, "in_axes")
    _check_axes_spec(out_axes, "out_axes")

    def mapped(*args):
        axes = _per_arg(in_axes, args, "in_axes")
        levels = _batching.levels()
        level = len(levels) + 1
        sizes = set()
        batched = tuple(_enter(a, ax, level, sizes) for a, ax in zip(args, axes))
        if not sizes:
            raise ValueError("vmap: in_axes must map at least one tensor argument")
        if len(sizes) > 1:
            raise ValueError(f"vmap: the mapped axes have different sizes {sorted(sizes)}")
        size = sizes.pop()
        levels.append(level)
        _hook_on()
        try:
            out = fn(*batched)
        finally:
            levels.pop()
            _hook_off()
        return _leave(out, out_axes, level, size)

    mapped.__name__ = f"vmap({getattr(fn, '__name__', type(fn).__name__)})"
    return mapped


# ops._core.call goes through _batching.dispatch while any thread runs a vmap (one module
# value, read on every op call, so eager code pays nothing otherwise); dispatch sends the ops
# of a thread without Batched inputs straight to the registry, so other threads are unaffected.
_lock = threading.Lock()
_running = [0]  # vmap calls in progress, all threads together


def _hook_on():
    with _lock:
        _running[0] += 1
        _core.batch_hook = _batching.dispatch


def _hook_off():
    with _lock:
        _running[0] -= 1
        if not _running[0]:
            _core.batch_hook = None


def _check_axes_spec(spec, name):
    ok = spec is None or isinstance(spec, int) and not isinstance(spec, bool) or (
        isinstance(spec, (tuple, list)))
    if not ok:
        raise TypeError(f"vmap: {name} must be an int, None, or a tuple/list of them, got "
                        f"{type(spec).__name__}")


def _per_arg(spec, args, name):
    if isinstance(spec, (tuple, list)):
        if len(spec) != len(args):
            raise ValueError(f"vmap: {name} has {len(spec)} entries for {len(args)} arguments")
        return tuple(spec)
    return (spec,) * len(args)


def _enter(arg, axis, level, sizes):
    """arg as fn sees it: a tensor mapped over `axis` becomes a Batched value."""
    if axis is None:
        return arg
    if isinstance(arg, (tuple, list)):
        axes = _per_arg(axis, arg, "in_axes") if isinstance(axis, (tuple, list)) else (
            (axis,) * len(arg))
        return type(arg)(_enter(a, ax, level, sizes) for a, ax in zip(arg, axes))
    if not _core.is_tensor(arg):
        raise TypeError(f"vmap: a mapped argument must be a Tensor (or a tuple of them), got "
                        f"{type(arg).__name__}; give it in_axes None")
    ndim = len(arg.shape)
    if not -ndim <= axis < ndim:
        raise ValueError(f"vmap: in_axes {axis} is out of range for an argument of shape "
                         f"{tuple(arg.shape)}")
    axis %= ndim
    sizes.add(arg.shape[axis])
    return _batching.Batched(_move(arg, axis, 0), level)


def _move(value, source, dest):
    ndim = len(value.shape)
    if source == dest:
        return value
    order = [a for a in range(ndim) if a != source]
    order.insert(dest, source)
    return _core.call("transpose", (value,), (tuple(order),))


def _leave(out, axes, level, size):
    if isinstance(out, (tuple, list)):
        per = _per_arg(axes, out, "out_axes") if isinstance(axes, (tuple, list)) else (
            (axes,) * len(out))
        return type(out)(_leave(o, a, level, size) for o, a in zip(out, per))
    if isinstance(axes, (tuple, list)):
        raise ValueError("vmap: out_axes is a sequence but fn returned a single value")
    if isinstance(out, _batching.Batched) and out.level == level:
        value = out.value
    else:  # the same for every example (it did not depend on a mapped argument)
        if axes is None:
            return out
        out = out if _core.is_tensor(out) else tensor_of(np.asarray(out))
        value = _core.call("broadcast_to", (_core.call("expand_dims", (out,), (0,)),),
                           ((size,) + tuple(out.shape),))
    if axes is None:
        raise ValueError("vmap: out_axes None for a result that depends on a mapped argument")
    ndim = len(value.shape)
    if not -ndim <= axes < ndim:
        raise ValueError(f"vmap: out_axes {axes} is out of range for a result of rank {ndim}")
    return _move(value, 0, axes % ndim)
