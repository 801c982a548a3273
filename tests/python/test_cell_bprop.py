"""A Cell's custom bprop(self, *inputs, out, dout) replaces the gradient of its construct, in
PyNative and in compiled code; expected values were checked against MindSpore 2.10."""
import numpy as np
import pytest

import kiln as ms
from kiln import Parameter, Tensor, nn


def T(values):
    return Tensor(np.array(values, np.float32))


class Scaled(nn.Cell):
    """construct squares; bprop claims the gradient is 100 * dout (so it cannot be mistaken
    for autodiff of construct)."""

    def construct(self, x):
        return x * x

    def bprop(self, x, out, dout):
        return (dout * 100.0,)


class TwoInTwoOut(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(T([3.0, 4.0]), name="w")

    def construct(self, x, y):
        return x * self.w + y, x - y

    def bprop(self, x, y, out, dout):
        a, _ = out
        da, db = dout
        return (da * 10 + db, a * db)


class Outer(nn.Cell):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def construct(self, x, *rest):
        out = self.inner(x, *rest)
        if isinstance(out, tuple):
            return (out[0] * out[1]).sum()
        return (out * 2).sum()


def modes():
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode)
        yield mode
    ms.set_context(mode=ms.PYNATIVE_MODE)


def test_bprop_replaces_the_gradient_of_construct_in_both_modes():
    x = T([1.0, 2.0])
    for _ in modes():
        np.testing.assert_allclose(ms.grad(Outer(Scaled()))(x).asnumpy(), [200.0, 200.0])
        # the forward value is construct's
        np.testing.assert_allclose(Outer(Scaled())(x).asnumpy(), 10.0)


def test_bprop_sees_inputs_output_and_dout_as_tuples_and_parameters_get_zero():
    x, y = T([1.0, 2.0]), T([0.5, -1.0])
    for _ in modes():
        net = Outer(TwoInTwoOut())
        (dx, dy), (dw,) = ms.grad(net, grad_position=(0, 1), weights=net.trainable_params())(x, y)
        np.testing.assert_allclose(dx.asnumpy(), [8.5, 37.0])
        np.testing.assert_allclose(dy.asnumpy(), [12.25, 49.0])
        np.testing.assert_allclose(dw.asnumpy(), [0.0, 0.0])


def test_bprop_inside_jit_and_under_value_and_grad():
    x = T([1.0, -3.0])
    net = Outer(Scaled())

    @ms.jit
    def step(x):
        return ms.value_and_grad(net)(x)

    loss, dx = step(x)
    np.testing.assert_allclose(loss.asnumpy(), 20.0)
    np.testing.assert_allclose(dx.asnumpy(), [200.0, 200.0])


def test_bprop_of_the_top_level_cell():
    for _ in modes():
        np.testing.assert_allclose(ms.grad(Scaled())(T([2.0])).asnumpy(), [100.0])


def test_bprop_returning_the_wrong_count_is_a_type_error_naming_the_cell():
    class Bad(nn.Cell):
        def construct(self, x, y):
            return x + y

        def bprop(self, x, y, out, dout):
            return (dout,)

    with pytest.raises(TypeError, match="Bad.bprop must return a tuple of 2"):
        ms.grad(Outer(Bad()))(T([1.0]), T([2.0]))


def test_a_python_number_input_keeps_its_place_in_bprop():
    class Scale(nn.Cell):
        def construct(self, x, k):
            return x * k

        def bprop(self, x, k, out, dout):
            return (dout * k * 3, 0)

    for _ in modes():
        np.testing.assert_allclose(ms.grad(Outer(Scale()))(T([1.0, 2.0]), 2.0).asnumpy(),
                                   [12.0, 12.0])
