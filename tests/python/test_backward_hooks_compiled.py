"""Cell backward hooks in compiled code (a grad inside ms.jit / GRAPH_MODE) run each time the
gradient is computed and give PyNative's (and MindSpore 2.10's Graph mode) gradients;
ops.HookBackward is eliminated there with a warning, as MindSpore does."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn, ops


def _times10(cell, grad_input, grad_output):
    return (grad_input[0] * 10,)


def _times3(cell, grad_output):
    return (grad_output[0] * 3,)


class _Net(nn.Cell):
    """d2(d(x) * x) with all-ones weights: a backward hook on d, a backward pre-hook on d2."""

    def __init__(self, hooked=True):
        super().__init__()
        self.d = nn.Dense(2, 2, weight_init="ones", bias_init="zeros")
        self.d2 = nn.Dense(2, 1, weight_init="ones", bias_init="zeros")
        self.handles = []
        if hooked:
            self.handles = [self.d.register_backward_hook(_times10),
                            self.d2.register_backward_pre_hook(_times3)]

    def construct(self, x):
        return self.d2(self.d(x) * x)


def _expected(x, hooked=True):
    """d loss / dx of sum(d2(d(x) * x)) by hand: s = x1 + x2, h = (s, s), z = h * x."""
    scale_out, scale_in = (3.0, 10.0) if hooked else (1.0, 1.0)
    dz = np.full_like(x, scale_out)              # d2's grad_output (x3 by the pre-hook)
    dh = dz * x                                  # through z = h * x
    through_d = dh.sum(1, keepdims=True) * np.ones_like(x) * scale_in  # d's grad_input, x10
    return through_d + dz * x.sum(1, keepdims=True)


@pytest.mark.parametrize("row", [[1.0, 2.0], [3.0, -1.0]])
def test_jit_grad_runs_cell_backward_hooks(row):
    net = _Net()
    x = np.array([row], np.float32)

    def loss(t):
        return net(t).sum()

    compiled = ms.jit(ms.grad(loss))
    got = compiled(Tensor(x)).asnumpy()
    np.testing.assert_allclose(got, _expected(x))  # MindSpore 2.10: 99 and 66
    np.testing.assert_allclose(got, ms.grad(loss)(Tensor(x)).asnumpy())


def test_hooks_run_on_every_call_of_the_compiled_gradient():
    net = _Net()
    compiled = ms.jit(ms.grad(lambda t: net(t).sum()))
    for row in ([1.0, 2.0], [3.0, -1.0], [0.5, 0.25]):
        x = np.array([row], np.float32)
        np.testing.assert_allclose(compiled(Tensor(x)).asnumpy(), _expected(x))


def test_weight_gradients_with_hooks_match_pynative():
    net = _Net()
    x = Tensor(np.array([[1.0, 2.0]], np.float32))

    def loss(t):
        return net(t).sum()

    fn = ms.grad(loss, None, net.trainable_params())
    eager = [g.asnumpy() for g in fn(x)]
    compiled = [g.asnumpy() for g in ms.jit(fn)(x)]
    for e, c in zip(eager, compiled):
        np.testing.assert_allclose(c, e)
    np.testing.assert_allclose(compiled[0], [[3, 6], [6, 12]])  # MindSpore 2.10's values
    np.testing.assert_allclose(compiled[2], [[9, 18]])


def test_graph_mode_train_cell_runs_hooks():
    net = _Net()

    class Step(nn.Cell):
        def __init__(self):
            super().__init__()
            self.net = net

        def construct(self, x):
            return ms.grad(lambda t: self.net(t).sum())(x)

    x = np.array([[1.0, 2.0]], np.float32)
    step = Step()
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        got = step(Tensor(x)).asnumpy()
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_allclose(got, _expected(x))


def test_removing_hooks_recompiles_without_them():
    net = _Net()
    compiled = ms.jit(ms.grad(lambda t: net(t).sum()))
    x = np.array([[1.0, 2.0]], np.float32)
    np.testing.assert_allclose(compiled(Tensor(x)).asnumpy(), _expected(x))
    for h in net.handles:
        h.remove()
    np.testing.assert_allclose(compiled(Tensor(x)).asnumpy(), _expected(x, hooked=False))
    net.d.register_backward_hook(_times10)
    net.d2.register_backward_pre_hook(_times3)
    np.testing.assert_allclose(compiled(Tensor(x)).asnumpy(), _expected(x))


def test_hooks_do_not_change_the_forward_or_compiled_code_without_grad():
    net, plain = _Net(), _Net(hooked=False)
    x = Tensor(np.array([[1.0, 2.0]], np.float32))
    np.testing.assert_allclose(ms.jit(lambda t: net(t))(x).asnumpy(), plain(x).asnumpy())


def test_hook_with_tensor_control_flow_is_compiled():
    def clip(cell, grad_input, grad_output):
        g = grad_input[0]
        if g.sum() > 5:  # a tensor condition: decided when the graph runs
            g = g * 0
        return (g,)

    net = _Net(hooked=False)
    net.d.register_backward_hook(clip)
    compiled = ms.jit(ms.grad(lambda t: net(t).sum()))
    small = np.array([[0.1, 0.2]], np.float32)   # d's grad_input sums to 1.2: kept
    big = np.array([[3.0, 4.0]], np.float32)     # 28: zeroed, only the direct path stays
    np.testing.assert_allclose(compiled(Tensor(small)).asnumpy(), _expected(small, False),
                               rtol=1e-6)
    np.testing.assert_allclose(compiled(Tensor(big)).asnumpy(), big.sum() * np.ones((1, 2)))


def test_hook_backward_is_eliminated_in_compiled_code_with_a_warning(monkeypatch):
    hook = ops.HookBackward(lambda grads: (grads[0] * 5,))

    def f(x):
        return hook(x * 2) * 3

    x = Tensor(np.array([[1.0, 2.0]], np.float32))
    np.testing.assert_allclose(ms.grad(f)(x).asnumpy(), [[30, 30]])  # PyNative runs it
    warnings = []
    monkeypatch.setattr(ms.log, "warning", lambda msg, *a, **k: warnings.append(msg))
    np.testing.assert_allclose(ms.jit(ms.grad(f))(x).asnumpy(), [[6, 6]])
    assert any("HookBackward" in w and "compiled" in w for w in warnings)


def test_top_level_hooked_cell_under_jit_and_graph_mode():
    """grad of the hooked cell itself: MindSpore 2.10 gives 20 (2 scaled by the hook's 10)."""
    net = nn.Dense(2, 2, weight_init="ones", bias_init="zeros")
    net.register_backward_hook(_times10)
    x = Tensor(np.array([[1.0, 2.0]], np.float32))
    np.testing.assert_allclose(ms.jit(ms.grad(net))(x).asnumpy(), [[20, 20]])
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        np.testing.assert_allclose(ms.grad(net)(x).asnumpy(), [[20, 20]])
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


def test_grad_of_grad_with_hooks_matches_pynative():
    class Cube(nn.Cell):
        def construct(self, x):
            return x * x * x

    net = Cube()
    net.register_backward_hook(_times10)

    def f(t):
        return net(t).sum()

    def df(t):
        return ms.grad(f)(t).sum()

    x = Tensor(np.array([[1.0, 2.0]], np.float32))
    np.testing.assert_allclose(ms.jit(ms.grad(f))(x).asnumpy(), [[30, 120]])
    np.testing.assert_allclose(ms.jit(ms.grad(df))(x).asnumpy(), ms.grad(df)(x).asnumpy())
