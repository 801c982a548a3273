"""Declared inputs: Cell.set_inputs / get_inputs and jit(input_signature=...) compile one graph
for every call that fits the declaration (None: a dimension of any size) and check each call."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn, ops

RNG = np.random.default_rng(21)


def dense_net():
    ms.set_seed(1)
    return nn.SequentialCell(nn.Dense(3, 8), nn.ReLU(), nn.Dense(8, 4))


def compiles():
    return ms.get_jit_stats()["compiles"]


def batch(n, features=3):
    return Tensor(RNG.standard_normal((n, features)).astype(np.float32))


def test_one_graph_serves_every_batch_size_and_agrees_with_pynative():
    net = dense_net()
    net.set_inputs(Tensor(shape=[None, 3], dtype=ms.float32))
    xs = [batch(n) for n in (1, 5, 17, 2)]
    want = [net(x).asnumpy() for x in xs]  # PyNative: the declaration does not apply
    ms.set_context(mode=ms.GRAPH_MODE)
    before = compiles()
    got = [net(x).asnumpy() for x in xs]
    assert compiles() - before == 1
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


def test_get_inputs_returns_the_declaration():
    net = dense_net()
    assert net.get_inputs() is None
    spec = Tensor(shape=[None, 3], dtype=ms.float32)
    net.set_inputs(spec)
    assert net.get_inputs() == (spec,)


@pytest.mark.parametrize(
    "x,error,match",
    [
        (Tensor(np.zeros((2, 4), np.float32)), ValueError, r"shape \(2, 4\).*\(None, 3\)"),
        (Tensor(np.zeros((2, 3, 1), np.float32)), ValueError, r"shape \(2, 3, 1\)"),
        (Tensor(np.zeros((2, 3), np.float64)), TypeError, "declared Float32"),
    ],
)
def test_a_call_that_does_not_fit_the_declaration_raises(x, error, match):
    net = dense_net()
    net.set_inputs(Tensor(shape=[None, 3], dtype=ms.float32))
    ms.set_context(mode=ms.GRAPH_MODE)
    net(batch(2))
    with pytest.raises(error, match=match):
        net(x)


def test_the_number_of_inputs_must_match():
    net = dense_net()
    net.set_inputs(Tensor(shape=[None, 3], dtype=ms.float32), Tensor(shape=[None], dtype=ms.int64))
    ms.set_context(mode=ms.GRAPH_MODE)
    with pytest.raises(ValueError, match="2 inputs were declared, but the call passes 1"):
        net(batch(2))


def test_declaring_after_calls_replaces_the_graph_and_checks_from_then_on():
    net = dense_net()
    ms.set_context(mode=ms.GRAPH_MODE)
    net(batch(4))
    net(batch(4))  # the second call of one signature takes the fast path
    net.set_inputs(Tensor(np.zeros((4, 3), np.float32)))  # a concrete tensor fixes every dim
    with pytest.raises(ValueError, match=r"shape \(5, 3\).*\(4, 3\)"):
        net(batch(5))
    assert net(batch(4)).shape == (4, 4)


def test_a_training_step_over_batches_of_several_sizes():
    batches = [(batch(n), Tensor(RNG.integers(0, 4, size=n))) for n in (4, 7, 1, 9)]

    def train_step():
        net = dense_net()
        opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
        return nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()), opt)

    eager = train_step()
    want = [eager(x, y).asnumpy() for x, y in batches]
    ms.set_context(mode=ms.GRAPH_MODE)
    step = train_step()
    step.set_inputs(Tensor(shape=[None, 3], dtype=ms.float32), Tensor(shape=[None], dtype=ms.int64))
    before = compiles()
    got = [step(x, y).asnumpy() for x, y in batches]
    assert compiles() - before == 1
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_jit_input_signature_on_a_function():
    def scaled_sum(x):
        return ops.sum(x * 2.0, 1)

    f = ms.jit(scaled_sum, input_signature=Tensor(shape=[None, 5], dtype=ms.float32))
    before = compiles()
    for n in (2, 3, 8):
        x = batch(n, 5)
        np.testing.assert_allclose(f(x).asnumpy(), x.asnumpy().sum(1) * 2, rtol=1e-6)
    assert compiles() - before == 1
    with pytest.raises(ValueError, match="scaled_sum: input 0 has shape"):
        f(batch(2, 4))


def test_jit_input_signature_on_a_cell_and_as_a_list():
    net = dense_net()
    f = ms.jit(net, input_signature=[Tensor(shape=[None, 3], dtype=ms.float32)])
    x = batch(6)
    np.testing.assert_allclose(f(x).asnumpy(), net(x).asnumpy(), rtol=1e-6, atol=1e-7)


def test_input_signature_must_hold_tensors():
    with pytest.raises(TypeError, match="input 0 must be a Tensor"):
        ms.jit(lambda x: x, input_signature=(3,))
