"""Small math and utility Cells (OneHot, Tril, Triu, Roll, Moments, MatMul, Norm, ClipByNorm,
ReduceLogSumExp, L1Regularizer, ImageGradients) and ops.tril/triu/roll vs NumPy, gradients and
Graph mode."""
import numpy as np
import pytest
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes
from helpers import assert_close

import kiln as ms
from kiln import Tensor, nn, ops

RNG = np.random.default_rng(23)


def test_tril_triu_roll_functions():
    x = RNG.standard_normal((2, 4, 5))
    for k in (-2, 0, 1):
        assert_close(ops.tril(Tensor(x), k), np.tril(x, k), ms.float64)
        assert_close(ops.triu(Tensor(x), k), np.triu(x, k), ms.float64)
    ints = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert_close(ops.tril(Tensor(ints)), np.tril(ints), ms.int32)
    assert_close(ops.roll(Tensor(x), 2, 1), np.roll(x, 2, 1), ms.float64)
    assert_close(ops.roll(Tensor(x), (1, -3), (0, 2)), np.roll(x, (1, -3), (0, 2)), ms.float64)
    assert_close(ops.roll(Tensor(x), 7), np.roll(x, 7), ms.float64)
    check_grad(lambda t: ops.roll(ops.triu(t, 1), (1, 2), (0, 1)), RNG.standard_normal((3, 4)))
    with pytest.raises(ValueError, match="tril: input must have at least 2 dimensions"):
        ops.tril(Tensor(np.ones(3)))
    with pytest.raises(ValueError, match="roll: shifts and dims must have the same length"):
        ops.roll(Tensor(x), (1, 2), 0)
    with pytest.raises(TypeError, match="tril: diagonal"):
        ops.tril(Tensor(x), 1.0)


def test_cells_match_numpy():
    x = RNG.standard_normal((2, 3, 4, 5))
    m = RNG.standard_normal((4, 5))
    hot = nn.OneHot(1, 4, 2.0, -1.0)(Tensor(np.array([0, 3, 1], np.int32)))
    assert_close(hot, np.where(np.eye(4)[[0, 3, 1]] > 0, 2.0, -1.0), ms.float32)
    assert_close(nn.Tril()(Tensor(m), 1), np.tril(m, 1), ms.float64)
    assert_close(nn.Triu()(Tensor(x), -1), np.triu(x, -1), ms.float64)
    assert_close(nn.Roll((1, 2), (0, 3))(Tensor(x)), np.roll(x, (1, 2), (0, 3)), ms.float64)
    mean, var = nn.Moments((1, 2), True)(Tensor(x))
    assert_close(mean, x.mean((1, 2), keepdims=True), ms.float64)
    assert_close(var, x.var((1, 2), keepdims=True), ms.float64)
    assert nn.Moments(1)(Tensor(x))[0].shape == (2, 4, 5)
    assert_close(nn.MatMul(False, True)(Tensor(x), Tensor(m)), x @ m.T, ms.float64)
    assert_close(nn.MatMul()(Tensor(m[0]), Tensor(m.T)), m[0] @ m.T, ms.float64)
    assert_close(nn.Norm((1, 3))(Tensor(x)), np.sqrt((x ** 2).sum((1, 3))), ms.float64)
    assert_close(nn.Norm()(Tensor(x)), np.sqrt((x ** 2).sum()), ms.float64)
    lse = np.log(np.exp(x).sum((1, 2), keepdims=True))
    assert_close(nn.ReduceLogSumExp((1, 2), True)(Tensor(x)), lse, ms.float64)
    assert_close(nn.L1Regularizer(0.5)(Tensor(x)), 0.5 * np.abs(x).sum(), ms.float64)
    dy, dx = nn.ImageGradients()(Tensor(x))
    assert_close(dy, np.pad(np.diff(x, axis=2), ((0, 0), (0, 0), (0, 1), (0, 0))), ms.float64)
    assert_close(dx, np.pad(np.diff(x, axis=3), ((0, 0), (0, 0), (0, 0), (0, 1))), ms.float64)
    with pytest.raises(ValueError, match="L1Regularizer: scale"):
        nn.L1Regularizer(0.0)
    with pytest.raises(ValueError, match="Roll: shift and axis must have the same length"):
        nn.Roll((1, 2), 0)


def test_moments_stop_gradient_and_graph_mode():
    x = RNG.standard_normal((3, 4))
    # d var / d x with the mean held fixed: 2 (x - mean) / n
    grad = ms.grad(lambda t: nn.Moments(1)(t)[1].sum())(Tensor(x))
    assert_close(grad, 2 * (x - x.mean(1, keepdims=True)) / 4, ms.float64)
    t = Tensor(x.astype(np.float32))

    def many(v):
        return (ops.tril(v), ops.roll(v, 1, 0), nn.Norm(1)(v), nn.ReduceLogSumExp(0)(v))

    assert_same_in_both_modes(many, t)


def _clip_reference(x, clip, axis):
    norm = np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    return x * clip / np.maximum(norm, clip)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_clip_by_norm_cell(axis):
    x = RNG.standard_normal((3, 4)) * 3
    x[1] = 0.0  # a zero row keeps its zeros, and a finite gradient
    clip = Tensor(np.array(2.0))
    cell = nn.ClipByNorm(axis=axis)
    assert_close(cell(Tensor(x), clip), _clip_reference(x, 2.0, axis), ms.float64)
    assert_same_in_both_modes(cell, Tensor(x.astype(np.float32)), Tensor(np.float32(2.0)))
    check_grad(lambda t: cell(t, clip), x)
    small = x * 1e-3  # inside the norm already: unchanged
    assert_close(cell(Tensor(small), clip), small, ms.float64)


def test_clip_by_norm_cell_keeps_the_dtype_and_checks_its_arguments():
    x = Tensor(np.array([3.0, 4.0], np.float16))
    out = nn.ClipByNorm()(x, Tensor(np.array(1.0, np.float32)))
    assert out.dtype == ms.float16
    np.testing.assert_allclose(out.asnumpy(), [0.6, 0.8], rtol=1e-3)
    with pytest.raises(TypeError, match="axis"):
        nn.ClipByNorm(axis=1.5)
    with pytest.raises(TypeError, match="floating-point"):
        nn.ClipByNorm()(Tensor(np.array([3, 4], np.int32)), 1.0)
