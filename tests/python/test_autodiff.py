"""grad / value_and_grad / GradOperation / stop_gradient in PyNative mode."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, ops


def t(*values):
    return Tensor(np.array(values, np.float32))


def test_grad_position_forms():
    x, y = t(1.0, 2.0), t(3.0, 4.0)
    f = lambda a, b: a * a * b  # noqa: E731
    np.testing.assert_allclose(ms.grad(f)(x, y).asnumpy(), [6.0, 16.0])
    np.testing.assert_allclose(ms.grad(f, 1)(x, y).asnumpy(), [1.0, 4.0])
    gx, gy = ms.grad(f, (0, 1))(x, y)
    np.testing.assert_allclose(gx.asnumpy(), [6.0, 16.0])
    np.testing.assert_allclose(gy.asnumpy(), [1.0, 4.0])
    (only,) = ms.grad(f, (1,))(x, y)
    np.testing.assert_allclose(only.asnumpy(), [1.0, 4.0])


def test_weights_and_grad_position_none():
    w = Tensor(np.array([2.0, 3.0], np.float32))
    b = Tensor(np.array([1.0], np.float32))
    f = lambda x: ops.mul(x, w) + b  # noqa: E731
    gw, gb = ms.grad(f, None, (w, b))(t(5.0, 7.0))
    np.testing.assert_allclose(gw.asnumpy(), [5.0, 7.0])
    np.testing.assert_allclose(gb.asnumpy(), [2.0])
    gx, (gw2,) = ms.grad(f, 0, [w])(t(5.0, 7.0))
    np.testing.assert_allclose(gx.asnumpy(), [2.0, 3.0])
    np.testing.assert_allclose(gw2.asnumpy(), [5.0, 7.0])


def test_value_and_grad_returns_the_full_output():
    f = lambda x: ops.exp(x)  # noqa: E731
    value, g = ms.value_and_grad(f)(t(0.0, 1.0))
    np.testing.assert_allclose(value.asnumpy(), np.exp([0.0, 1.0]), rtol=1e-6)
    np.testing.assert_allclose(g.asnumpy(), np.exp([0.0, 1.0]), rtol=1e-6)


def test_has_aux_differentiates_the_first_output_only():
    f = lambda x: (x * x, x + 100.0, "tag")  # noqa: E731
    g, aux = ms.grad(f, has_aux=True)(t(3.0))
    np.testing.assert_allclose(g.asnumpy(), [6.0])
    assert aux[1] == "tag"
    (loss, extra, _), g2 = ms.value_and_grad(f, has_aux=True)(t(3.0))
    np.testing.assert_allclose(extra.asnumpy(), [103.0])
    with pytest.raises(TypeError, match="has_aux"):
        ms.grad(lambda x: x, has_aux=True)(t(1.0))


def test_tuple_outputs_sum_their_gradients():
    g = ms.grad(lambda x: (x * 2.0, x * 3.0))(t(1.0))
    np.testing.assert_allclose(g.asnumpy(), [5.0])


def test_stop_gradient_blocks_flow():
    g = ms.grad(lambda x: ops.stop_gradient(x * x) + x)(t(4.0))
    np.testing.assert_allclose(g.asnumpy(), [1.0])
    assert ops.stop_gradient(3) == 3


def test_unused_input_gets_zeros_and_integer_results_do_not_break():
    gx, gy = ms.grad(lambda a, b: a * 2.0, (0, 1))(t(1.0), t(5.0))
    np.testing.assert_allclose(gy.asnumpy(), [0.0])
    g = ms.grad(lambda a: a * ops.cast(a > 0, ms.float32))(t(-1.0, 2.0))
    np.testing.assert_allclose(g.asnumpy(), [0.0, 1.0])


def test_higher_order_gradients():
    x = t(1.0, 2.0)
    d2 = ms.grad(ms.grad(lambda a: a * a * a))(x)
    np.testing.assert_allclose(d2.asnumpy(), [6.0, 12.0])
    d3 = ms.grad(ms.grad(ms.grad(lambda a: ops.sin(a))))(x)
    np.testing.assert_allclose(d3.asnumpy(), -np.cos([1.0, 2.0]), rtol=1e-5)


def test_same_tensor_at_two_positions_gets_two_gradients():
    x = t(2.0)
    ga, gb = ms.grad(lambda a, b: a * 3.0 + b * 5.0, (0, 1))(x, x)
    assert ga.item() == 3.0 and gb.item() == 5.0


def test_grad_operation():
    w = Tensor(np.array([2.0], np.float32))
    f = lambda x, y: x * y * w  # noqa: E731
    x, y = t(3.0), t(4.0)
    assert ops.GradOperation()(f)(x, y).item() == 8.0
    gx, gy = ops.GradOperation(get_all=True)(f)(x, y)
    assert (gx.item(), gy.item()) == (8.0, 6.0)
    (gw,) = ops.GradOperation(get_by_list=True)(f, [w])(x, y)
    assert gw.item() == 12.0
    sens = ops.GradOperation(sens_param=True)(f)(x, y, t(10.0))
    assert sens.item() == 80.0


def test_bad_arguments():
    with pytest.raises(TypeError, match="grad_position"):
        ms.grad(lambda x: x, "0")(t(1.0))
    with pytest.raises(IndexError, match="grad_position"):
        ms.grad(lambda x: x, 3)(t(1.0))
    with pytest.raises(TypeError, match="argument 0"):
        ms.grad(lambda x: x)(1.0)
    with pytest.raises(ValueError, match="no weights"):
        ms.grad(lambda x: x, None)(t(1.0))
    with pytest.raises(TypeError, match="weights"):
        ms.grad(lambda x: x, 0, weights=5)
    with pytest.raises(TypeError, match="return Tensors"):
        ms.grad(lambda x: "nope")(t(1.0))
