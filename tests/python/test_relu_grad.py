"""relu_grad(dy, x) = dy * (x > 0): relu's gradient as one op, in both modes, against NumPy."""
import numpy as np
import pytest
from gradcheck import check_grad

import kiln as ms
from kiln import Tensor, nn, ops
from kiln.ops._core import call

RNG = np.random.default_rng(5)


def relu_grad(dy, x):
    return call("relu_grad", (dy, x), ())


def reference(dy, x):
    return dy * (x > 0).astype(dy.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64])
def test_values_against_numpy(dtype):
    x = (RNG.standard_normal((5, 7)) * 4).astype(dtype)
    dy = (RNG.standard_normal((5, 7)) * 4).astype(dtype)
    out = relu_grad(Tensor(dy), Tensor(x))
    assert out.dtype == Tensor(x).dtype
    np.testing.assert_array_equal(out.asnumpy(), reference(dy, x))


def test_bfloat16_against_float32():
    x, dy = RNG.standard_normal((4, 33)), RNG.standard_normal((4, 33))
    out = relu_grad(Tensor(dy, ms.bfloat16), Tensor(x, ms.bfloat16))
    want = relu_grad(Tensor(dy, ms.bfloat16).astype(ms.float32),
                     Tensor(x, ms.bfloat16).astype(ms.float32))
    np.testing.assert_array_equal(out.astype(ms.float32).asnumpy(), want.asnumpy())


def test_broadcasting_and_strided_views():
    x, dy = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((3, 1))
    dy = dy.astype(np.float32)
    np.testing.assert_array_equal(relu_grad(Tensor(dy), Tensor(x)).asnumpy(), reference(dy, x))
    wide = RNG.standard_normal((6, 8)).astype(np.float32)
    view = Tensor(wide)[:, ::2]  # a strided view of x
    d = RNG.standard_normal((6, 4)).astype(np.float32)
    np.testing.assert_array_equal(relu_grad(Tensor(d), view).asnumpy(), reference(d, wide[:, ::2]))


def test_nan_and_inf_behave_as_the_multiply():
    x = np.array([-1.0, 0.0, 2.0, np.nan, -3.0], np.float32)
    dy = np.array([np.inf, 1.0, np.nan, 5.0, np.nan], np.float32)
    with np.errstate(invalid="ignore"):
        want = dy * (x > 0).astype(np.float32)  # inf * 0 and nan * 0 are NaN
    np.testing.assert_array_equal(relu_grad(Tensor(dy), Tensor(x)).asnumpy(), want)


def test_bool_is_refused_with_the_ops_name():
    b = Tensor(np.array([True, False]))
    with pytest.raises(TypeError, match="relu_grad"):
        relu_grad(b, b)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_relus_gradient_in_both_modes(mode):
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    w = RNG.standard_normal((4, 6)).astype(np.float32)
    grad = ms.grad(lambda t: ops.sum(ops.relu(t) * Tensor(w)))
    if mode == "graph":
        grad = ms.jit(grad)
    np.testing.assert_allclose(grad(Tensor(x)).asnumpy(), w * (x > 0), rtol=1e-6)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_relus_gradient_at_zero_nan_and_inf(mode):
    # the rule reads relu's output: zero, -0, NaN and -inf inputs must still give a zero mask
    x = np.array([0.0, -0.0, np.nan, -np.inf, np.inf, 2.0, -3.0], np.float32)
    grad = ms.grad(lambda t: ops.sum(ops.relu(t) * Tensor(np.ones(7, np.float32))))
    if mode == "graph":
        grad = ms.jit(grad)
    np.testing.assert_array_equal(grad(Tensor(x)).asnumpy(), [0, 0, 0, 0, 1, 1, 0])


def test_relu_and_relu_grad_against_finite_differences():
    x = RNG.standard_normal((3, 5))
    x[np.abs(x) < 0.05] = 0.5  # away from the kink
    dy = RNG.standard_normal((3, 5))
    check_grad(ops.relu, x)
    check_grad(relu_grad, dy, x)  # in dy: relu_grad itself; in x: zero


def test_second_derivative_is_the_same_in_both_modes():
    first = ms.grad(lambda t, d: ops.relu(t) * d, (0, 1))
    x, dy = Tensor(RNG.standard_normal((3, 4))), Tensor(RNG.standard_normal((3, 4)))

    def h(t, d):
        gx, gd = first(t, d)
        return ops.sum(gx * gx) + ops.sum(gd)

    want = ms.grad(h, (0, 1))(x, dy)
    got = ms.jit(ms.grad(h, (0, 1)))(x, dy)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-12)
    mask = x.asnumpy() > 0
    # in x only sum(relu(x)) varies; in dy, sum((dy mask)^2) gives 2 dy mask
    np.testing.assert_allclose(want[0].asnumpy(), mask, rtol=1e-12)
    np.testing.assert_allclose(want[1].asnumpy(), 2 * dy.asnumpy() * mask, rtol=1e-12)


def test_a_compiled_training_step_masks_with_relu_grad():
    net = nn.SequentialCell(nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 4))
    loss_fn = nn.MSELoss()
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, net.trainable_params())
    step = ms.jit(grad_fn)
    x, y = Tensor(RNG.standard_normal((5, 8)), ms.float32), Tensor(np.zeros((5, 4), np.float32))
    loss, grads = step(x, y)
    eager_loss, eager_grads = grad_fn(x, y)
    np.testing.assert_allclose(loss.asnumpy(), eager_loss.asnumpy(), rtol=1e-6)
    for a, b in zip(grads, eager_grads):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-6)
    text = step.variants()[0].text
    assert "relu_grad" in text and "greater" not in text
