"""Runs a function in PyNative mode and compiled, and compares the results."""

import numpy as np

import kiln as ms


def _leaves(value):
    if isinstance(value, (tuple, list)):
        out = []
        for v in value:
            out += _leaves(v)
        return out
    if isinstance(value, dict):
        return _leaves(list(value.values()))
    return [value]


def assert_same_in_both_modes(fn, *args, rtol=1e-5, atol=1e-6, **kwargs):
    """fn(*args) eagerly and through ms.jit must agree in structure, types and values."""
    eager = fn(*args, **kwargs)
    graph = ms.jit(fn)(*args, **kwargs)
    le, lg = _leaves(eager), _leaves(graph)
    assert len(le) == len(lg), f"{len(le)} results eagerly, {len(lg)} compiled"
    for e, g in zip(le, lg):
        if isinstance(e, ms.Tensor):
            assert isinstance(g, ms.Tensor), f"expected a Tensor, got {type(g).__name__}"
            assert e.dtype == g.dtype, f"dtype {e.dtype} eagerly, {g.dtype} compiled"
            assert e.shape == g.shape, f"shape {e.shape} eagerly, {g.shape} compiled"
            np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=rtol, atol=atol)
        elif isinstance(g, ms.Tensor):
            # A Python number carried through tensor-dependent control flow becomes a 0-d tensor.
            assert g.shape == () and g.item() == e, f"{e!r} eagerly, {g!r} compiled"
        else:
            assert type(e) is type(g) and e == g, f"{e!r} eagerly, {g!r} compiled"
    return graph


def in_three_modes(fn, *args):
    """fn(*args) in PyNative, through ms.jit, and as a Cell's construct in GRAPH_MODE: a list
    of (mode, thunk) whose thunks run it (exceptions propagate)."""

    class Wrapped(ms.nn.Cell):
        def construct(self, *a):
            return fn(*a)

    def graph_cell():
        previous = ms.get_context("mode")
        ms.set_context(mode=ms.GRAPH_MODE)
        try:
            return Wrapped()(*args)
        finally:
            ms.set_context(mode=previous)

    return [("pynative", lambda: fn(*args)), ("jit", lambda: ms.jit(fn)(*args)),
            ("cell", graph_cell)]
