"""The fused optimizer update ops against NumPy."""

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, ops


@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_apply_momentum_matches_numpy_and_updates_in_place(nesterov, dtype):
    rng = np.random.default_rng(0)
    v0, a0, g = (rng.standard_normal((50, 7)).astype(dtype) for _ in range(3))
    var, acc = Tensor(v0.copy()), Tensor(a0.copy())
    out = ops.apply_momentum(var, acc, 0.1, Tensor(g), 0.9, use_nesterov=nesterov)
    a = a0 * 0.9 + g
    v = v0 - 0.1 * ((g + a * 0.9) if nesterov else a)
    np.testing.assert_allclose(acc.asnumpy(), a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var.asnumpy(), v, rtol=1e-5, atol=1e-6)
    assert out._shares_storage(var)


def test_apply_momentum_takes_tensor_hyperparameters_and_strided_gradients():
    var, acc = Tensor(np.ones(4, np.float32)), Tensor(np.zeros(4, np.float32))
    grad = Tensor(np.arange(8, dtype=np.float32))[::2]
    ops.apply_momentum(
        var, acc, Tensor(np.array(0.5, np.float32)), grad, Tensor(np.array(0.0, np.float32))
    )
    np.testing.assert_allclose(var.asnumpy(), 1.0 - 0.5 * np.array([0, 2, 4, 6]))


@pytest.mark.parametrize(
    "bad,exc",
    [
        (dict(grad=np.ones(3, np.float32)), ValueError),
        (dict(lr=np.ones(2, np.float32)), ValueError),
        (dict(grad=np.ones(4, np.float64)), TypeError),
        (dict(var=np.ones(4, np.int32)), TypeError),
    ],
)
def test_apply_momentum_rejects_bad_input(bad, exc):
    args = dict(
        var=np.ones(4, np.float32),
        acc=np.zeros(4, np.float32),
        lr=np.array(0.1, np.float32),
        grad=np.ones(4, np.float32),
    )
    args.update(bad)
    with pytest.raises(exc, match="apply_momentum"):
        ops.apply_momentum(
            Tensor(args["var"]), Tensor(args["acc"]), Tensor(args["lr"]), Tensor(args["grad"]), 0.9
        )


def test_apply_momentum_in_a_compiled_step_matches_eager():
    def step(v, a, g):
        return ops.apply_momentum(v, a, 0.1, g, 0.9) * 1.0

    g = Tensor(np.full(3, 2.0, np.float32))
    v1, a1 = Tensor(np.ones(3, np.float32)), Tensor(np.zeros(3, np.float32))
    v2, a2 = Tensor(np.ones(3, np.float32)), Tensor(np.zeros(3, np.float32))
    jitted = ms.jit(step)
    for _ in range(3):
        step(v1, a1, g)
        jitted(v2, a2, g)
    np.testing.assert_allclose(v2.asnumpy(), v1.asnumpy())
    np.testing.assert_allclose(a2.asnumpy(), a1.asnumpy())
