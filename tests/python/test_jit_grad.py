"""Gradients in Graph mode: grad inside jit, jit(grad(f)), grad(jit(f)), a compiled train step."""

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn, ops

RNG = np.random.default_rng(7)


def t(*shape):
    return Tensor(RNG.standard_normal(shape).astype(np.float32))


def smooth(x, w):
    h = ops.tanh(ops.matmul(x, w))
    return ops.sum(ops.softmax(h, axis=-1) * h) + ops.mean(x * x)


def layer_norm_loss(x, w):
    y = ops.layer_norm(ops.matmul(x, w), (w.shape[1],))
    return ops.sum(ops.gelu(y) ** 2)


def broadcast_and_reduce(x, w):
    return ops.sum(
        ops.maximum(x[:, :1] * w[0], 0.1) / (1.0 + ops.exp(-x.sum(axis=1, keepdims=True)))
    )


@pytest.mark.parametrize(
    "fn", [smooth, layer_norm_loss, broadcast_and_reduce], ids=lambda f: f.__name__
)
def test_grad_inside_jit_matches_pynative(fn):
    x, w = t(4, 3), t(3, 5)
    eager = ms.grad(fn, (0, 1))(x, w)

    def compiled(a, b):
        return ms.grad(fn, (0, 1))(a, b)

    graph = ms.jit(compiled)(x, w)
    for e, g in zip(eager, graph):
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-5, atol=1e-6)


def test_jit_of_grad_and_value_and_grad():
    x, w = t(2, 3), t(3, 3)
    value, grads = ms.jit(ms.value_and_grad(smooth, (0, 1)))(x, w)
    ev, eg = ms.value_and_grad(smooth, (0, 1))(x, w)
    np.testing.assert_allclose(value.asnumpy(), ev.asnumpy(), rtol=1e-6)
    for e, g in zip(eg, grads):
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-5, atol=1e-6)


def test_grad_of_a_jitted_function():
    x, w = t(2, 3), t(3, 3)
    jitted = ms.jit(smooth)
    g = ms.grad(jitted, (0, 1))(x, w)
    e = ms.grad(smooth, (0, 1))(x, w)
    for a, b in zip(g, e):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-6)


def test_weights_gradients_inside_jit():
    ms.set_seed(0)
    net = nn.Dense(3, 2)
    x = t(5, 3)

    def loss(inp):
        return ops.sum(net(inp) ** 2)

    eager = ms.grad(loss, None, net.trainable_params())(x)
    graph = ms.jit(lambda inp: ms.grad(loss, None, net.trainable_params())(inp))(x)
    for e, g in zip(eager, graph):
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-5, atol=1e-6)


def tensor_branch(x):
    if x.sum() > 0:
        return ops.sum(x * x)
    return ops.sum(x)


def nested_branches(x, w):
    y = x * w
    if y.sum() > 0:
        if x.mean() > 0.5:
            z = ops.exp(y) * w
        else:
            z = ops.sin(y) + x
    else:
        z = y * y * 3.0
    return ops.sum(z * w)


def branch_on_value(x, w):
    s = ops.sum(x * w)
    return ops.sum(ops.tanh(x) * w) if s > 0 else ops.sum(w * w * x)


@pytest.mark.parametrize("fn", [tensor_branch], ids=["tensor_branch"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_gradient_through_tensor_if_matches_pynative(fn, sign):
    x = Tensor(np.abs(RNG.standard_normal(3)).astype(np.float32) * sign)
    eager = ms.grad(fn)(x)
    graph = ms.jit(lambda a: ms.grad(fn)(a))(x)
    np.testing.assert_allclose(graph.asnumpy(), eager.asnumpy(), rtol=1e-6)


@pytest.mark.parametrize("fn", [nested_branches, branch_on_value], ids=lambda f: f.__name__)
@pytest.mark.parametrize("scale", [0.2, 1.0, -1.0])
def test_gradients_through_nested_branches(fn, scale):
    x = Tensor((np.abs(RNG.standard_normal(4)) * scale).astype(np.float32))
    w = Tensor(np.abs(RNG.standard_normal(4)).astype(np.float32))
    eager = ms.grad(fn, (0, 1))(x, w)
    graph = ms.jit(lambda a, b: ms.grad(fn, (0, 1))(a, b))(x, w)
    for e, g in zip(eager, graph):
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-5, atol=1e-6)


def tensor_loop(x):
    while x.sum() < 10.0:
        x = x * 2.0
    return ops.sum(x)


def loop_with_weights(x, w, n):
    i = 0
    h = x
    while i < n:
        h = ops.tanh(h * w + x)
        i = i + 1
    return ops.sum(h * h)


def loop_with_break(x, w):
    h = x
    for _i in range(6):
        h = h * w + 0.1
        if h.sum() > 4.0:
            break
    return ops.sum(h)


@pytest.mark.parametrize("start", [0.1, 1.0, 20.0])
def test_gradient_through_a_data_dependent_while_loop(start):
    x = Tensor(np.full(3, start, np.float32))
    eager = ms.grad(tensor_loop)(x)
    graph = ms.jit(lambda a: ms.grad(tensor_loop)(a))(x)
    np.testing.assert_allclose(graph.asnumpy(), eager.asnumpy(), rtol=1e-6)


@pytest.mark.parametrize("trips", [0, 1, 4])
def test_gradient_through_a_counted_loop_with_captured_weights(trips):
    x, w = t(3), t(3)
    n = Tensor(np.array(trips))
    eager = ms.grad(loop_with_weights, (0, 1))(x, w, n)
    graph = ms.jit(lambda a, b, k: ms.grad(loop_with_weights, (0, 1))(a, b, k))(x, w, n)
    for e, g in zip(eager, graph):
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_gradient_through_break_under_a_tensor_condition(scale):
    x = Tensor(np.full(2, 0.5, np.float32))
    w = Tensor(np.full(2, scale, np.float32))
    eager = ms.grad(loop_with_break, (0, 1))(x, w)
    graph = ms.jit(lambda a, b: ms.grad(loop_with_break, (0, 1))(a, b))(x, w)
    for e, g in zip(eager, graph):
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-5, atol=1e-6)
