"""The "simplify" pass in the O1 pipeline: a jitted function using algebraic identities gives
the eager result, and its optimized graph no longer has the ops the identities remove."""

import numpy as np

import kiln as ms
from kiln import Tensor, ops


def identities(x, n):
    y = x.exp()
    y = y * 1.0                                   # mul by one
    y = y / 1                                     # div by one (a cast weak constant)
    y = y - 0.0                                   # sub +0.0
    y = ops.transpose(ops.transpose(y, (1, 2, 0)), (2, 0, 1))  # identity composition
    y = y.reshape(6, 4).reshape(2, 3, 4)          # reshape to x's shape through another
    y = ops.cast(ops.cast(y, ms.float64), ms.float32)  # widening round trip
    y = -(-y)  # noqa: B002 - a double negation on purpose: the pass removes it
    k = ops.cast(ops.cast(n, ms.int64), ms.float32)  # int32 -> int64 -> float32: one cast
    return y.tanh() + k.sum(), ((n + 0) * 1).abs()


def test_simplify_matches_eager_and_removes_ops():
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((2, 3, 4)).astype(np.float32))
    n = Tensor(np.array([1, -2, 3], np.int32))
    jitted = ms.jit(identities)
    got = jitted(x, n)
    want = identities(x, n)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.asnumpy(), w.asnumpy())

    # graph_text("frontend") is the graph as built from the source; the default is what runs.
    frontend = jitted.graph_text("frontend")
    for op in ("transpose(", "reshape(", "neg(", "mul(", "div(", "sub("):
        assert op in frontend, op
    (compiled,) = jitted.variants()
    optimized = compiled.executable.text()
    for op in ("transpose(", "reshape(", "neg(", "mul(", "div(", "sub("):
        assert op not in optimized, optimized
    assert optimized.count("cast(") == 1, optimized  # n's cast to float32
