"""ops.vmap against a Python loop: batching rules, the per-op fallback, axes, nesting, grad, jit."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, ops
from kiln.ops import _batching

RNG = np.random.default_rng(3)
X = RNG.standard_normal((4, 3, 5)).astype(np.float32)
W = RNG.standard_normal((5, 2)).astype(np.float32)
V = RNG.standard_normal((5,)).astype(np.float32)


def _loop(fn, args, in_axes, out_axis=0):
    size = next(a.shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = []
    for i in range(size):
        picked = [Tensor(a if ax is None else np.take(a, i, ax)) for a, ax in zip(args, in_axes)]
        outs.append(fn(*picked).asnumpy())
    return np.stack(outs, out_axis)


# (id, fn, args, in_axes): every op these use has a batching rule (no per-example loop)
RULED = [
    ("elementwise", lambda a, v: ops.exp(a) * v - 1 / (1 + a * a), (X, V), (0, None)),
    ("compare_where", lambda a: ops.where(a > 0, a, -a), (X,), (0,)),
    ("matmul", lambda a, w: a @ w, (X, W), (0, None)),
    ("rmatmul", lambda a, w: w.T @ a.T, (X, W), (0, None)),
    ("both_batched", lambda a, b: ops.matmul(a, b.T), (X, X), (0, 0)),
    ("reductions", lambda a: a.sum(1) + a.mean() - ops.amax(a, 0).sum(), (X,), (0,)),
    ("softmax", lambda a: ops.softmax(a, -1), (X,), (0,)),
    ("argmax", lambda a: ops.argmax(a, 1), (X,), (0,)),
    ("shape_ops", lambda a: a.reshape(15).expand_dims(0).transpose() + 1, (X,), (0,)),
    ("squeeze", lambda a: ops.squeeze(a[:1]), (X,), (0,)),
    ("slice", lambda a: a[1:, ::2] * 2, (X,), (0,)),
    ("concat", lambda a, w: ops.concat((a, w.T), 0), (X, W), (0, None)),
    ("axis_1", lambda a: a.sum(0), (X,), (1,)),
    ("axis_neg", lambda a: a * 2, (X,), (-1,)),
    ("broadcast_to", lambda a: ops.broadcast_to(a[0], (2, 5)), (X,), (0,)),
    ("gather_params", lambda a, i: ops.gather(a, i, 1), (X, np.array([4, 0], np.int32)),
     (0, None)),
    ("gather_indices", lambda w, i: ops.gather(w, i, 1), (W, np.array([[1, 0], [0, 0], [1, 1]],
                                                                   np.int32)), (None, 0)),
]


@pytest.mark.parametrize("case", RULED, ids=[c[0] for c in RULED])
def test_vmap_matches_a_loop_without_looping(case, monkeypatch):
    _, fn, args, in_axes = case

    def no_loop(name, *rest):
        raise AssertionError(f"vmap fell back to a per-example loop for '{name}'")

    monkeypatch.setattr(_batching, "_loop", no_loop)
    got = ops.vmap(fn, in_axes=in_axes)(*(Tensor(a) for a in args))
    np.testing.assert_allclose(got.asnumpy(), _loop(fn, args, in_axes), rtol=1e-5, atol=1e-5)


def test_fallback_loops_for_an_op_without_rule():
    fn = lambda a, i: ops.gather(a, i, 1) + 1  # noqa: E731 - both sides batched: no rule
    idx = np.array([[4, 0], [1, 1], [0, 2], [3, 3]], np.int32)
    got = ops.vmap(fn)(Tensor(X), Tensor(idx))
    np.testing.assert_allclose(got.asnumpy(), _loop(fn, (X, idx), (0, 0)))


def test_out_axes_and_several_outputs():
    fn = lambda a, v: (a * v, a.sum())  # noqa: E731
    got = ops.vmap(fn, in_axes=(1, None), out_axes=(1, 0))(Tensor(X), Tensor(V))
    assert got[0].shape == (4, 3, 5) and got[1].shape == (3,)
    np.testing.assert_allclose(got[0].asnumpy(), X * V, rtol=1e-6)
    np.testing.assert_allclose(got[1].asnumpy(), X.sum((0, 2)), rtol=1e-5)


def test_unmapped_result_is_broadcast():
    got = ops.vmap(lambda a, w: w * 2, in_axes=(0, None))(Tensor(X), Tensor(W))
    np.testing.assert_allclose(got.asnumpy(), np.broadcast_to(W * 2, (4, 5, 2)))


def test_nested_vmap():
    fn = ops.vmap(ops.vmap(lambda a, b: a * b + a.sum()))
    got = fn(Tensor(X), Tensor(X))
    np.testing.assert_allclose(got.asnumpy(), X * X + X.sum(-1, keepdims=True), rtol=1e-5)


def _per_example_loss(a, w):
    return ops.tanh(a @ w).sum()


def test_grad_through_vmap_and_vmap_in_jit():
    x, w = Tensor(X[:, 0]), Tensor(W)

    def loss(w):
        return ops.vmap(_per_example_loss, in_axes=(0, None))(x, w).sum()

    want = ms.grad(lambda w: sum(_per_example_loss(x[i], w) for i in range(4)))(w).asnumpy()
    for fn in (loss, ms.jit(loss)):
        np.testing.assert_allclose(ms.grad(fn)(w).asnumpy(), want, rtol=1e-5, atol=1e-6)
    eager = ops.vmap(_per_example_loss, in_axes=(0, None))(x, w)
    compiled = ms.jit(lambda x, w: ops.vmap(_per_example_loss, in_axes=(0, None))(x, w))(x, w)
    np.testing.assert_allclose(compiled.asnumpy(), eager.asnumpy(), rtol=1e-6)


@pytest.mark.parametrize("call, error", [
    (lambda: ops.vmap(lambda a: a, in_axes=None)(Tensor(X)), ValueError),
    (lambda: ops.vmap(lambda a, b: a + b)(Tensor(X), Tensor(W)), ValueError),
    (lambda: ops.vmap(lambda a: a, in_axes=3)(Tensor(X)), ValueError),
    (lambda: ops.vmap(lambda a: a, in_axes=(0, 0))(Tensor(X)), ValueError),
    (lambda: ops.vmap(lambda a: a, in_axes=0.5)(Tensor(X)), TypeError),
    (lambda: ops.vmap(lambda a: a.item())(Tensor(X)), TypeError),
    (lambda: ops.vmap(3), TypeError),
])
def test_vmap_errors(call, error):
    with pytest.raises(error):
        call()
