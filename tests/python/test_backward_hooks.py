"""Backward hooks in PyNative: ops.HookBackward, Cell backward (pre-)hooks, Tensor.register_hook
(values as MindSpore 2.10 gives them), removal, and their pass-through in compiled code."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn, ops

X = Tensor(np.array([[1.0, 2.0]], np.float32))
Y = Tensor(np.array([[0.5, -1.0]], np.float32))


class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.d = nn.Dense(2, 2, weight_init="ones", bias_init="zeros")

    def construct(self, x, y):
        return self.d(x) * 2 + y


def test_cell_backward_hooks_see_and_replace_gradients():
    net, seen = _Net(), []

    def pre(cell, grad_output):
        seen.append(("pre", grad_output[0].asnumpy().tolist()))
        return (grad_output[0] * 3,)

    def post(cell, grad_input, grad_output):
        seen.append(("post", [g.asnumpy().tolist() for g in grad_input],
                     grad_output[0].asnumpy().tolist()))
        return (grad_input[0] * 10, grad_input[1])

    h1 = net.register_backward_pre_hook(pre)
    h2 = net.register_backward_hook(post)
    gx, gy = ms.grad(net, grad_position=(0, 1))(X, Y)
    np.testing.assert_allclose(gx.asnumpy(), [[120, 120]])
    np.testing.assert_allclose(gy.asnumpy(), [[3, 3]])
    assert seen == [("pre", [[1, 1]]), ("post", [[[12, 12]], [[3, 3]]], [[3, 3]])]
    h1.remove()
    h2.remove()
    gx, gy = ms.grad(net, grad_position=(0, 1))(X, Y)
    np.testing.assert_allclose(gx.asnumpy(), [[4, 4]])
    assert len(seen) == 2


def test_hooks_of_nested_cells_run_inner_last_to_outer_first():
    order = []

    class Outer(nn.Cell):
        def __init__(self):
            super().__init__()
            self.inner = _Net()

        def construct(self, x, y):
            return self.inner(x * 2, y).sum()

    outer = Outer()
    outer.register_backward_hook(lambda c, gi, go: order.append("outer"))
    outer.inner.register_backward_hook(lambda c, gi, go: order.append("inner"))
    g = ms.grad(outer)(X, Y)
    assert order == ["inner", "outer"]
    np.testing.assert_allclose(g.asnumpy(), [[8, 8]])


def test_hook_backward_primitive():
    got = []
    hook = ops.HookBackward(lambda grads: (got.append(grads), (grads[0] * 5,))[1])

    def f(x):
        return hook(x * 2) * 3

    np.testing.assert_allclose(ms.grad(f)(X).asnumpy(), [[30, 30]])
    assert isinstance(got[0], tuple) and got[0][0].asnumpy().tolist() == [[3, 3]]
    assert hook(X) is not None  # without grad: the input, unchanged
    np.testing.assert_allclose(hook(X).asnumpy(), X.asnumpy())


def test_tensor_register_hook_on_intermediate_and_argument():
    def f(x):
        z = x * 2
        z.register_hook(lambda g: g * 7)
        return z * 3

    def h(x):
        x.register_hook(lambda g: g * 7)
        return x * 3 + x

    np.testing.assert_allclose(ms.grad(f)(X).asnumpy(), [[42, 42]])
    np.testing.assert_allclose(ms.grad(h)(X).asnumpy(), [[28, 28]])

    def removed(x):
        z = x * 2
        z.register_hook(lambda g: g * 7).remove()
        return z * 3

    np.testing.assert_allclose(ms.grad(removed)(X).asnumpy(), [[6, 6]])


def test_hooks_pass_through_in_compiled_code():
    hook = ops.HookBackward(lambda grads: (grads[0] * 5,))

    def f(x):
        return hook(x * 2) * 3

    np.testing.assert_allclose(ms.jit(ms.grad(f))(X).asnumpy(), [[6, 6]])


def test_bad_hooks_raise():
    with pytest.raises(TypeError):
        ops.HookBackward(3)
    with pytest.raises(TypeError):
        X.register_hook("not a function")
    net = _Net()
    net.register_backward_hook(lambda c, gi, go: (gi[0],))  # one gradient for two inputs
    with pytest.raises(ValueError, match="backward hook"):
        ms.grad(net, grad_position=(0, 1))(X, Y)
