"""Gradients through compiled `while` loops whose trip count is a tensor, against PyNative's tape.

The compiled backward keeps checkpoints of the carried values in a fixed number of slots (64, or
fewer when the carried values are large) on two levels (csrc/autodiff/while_grad.cc). The trip
counts below cross each boundary of that scheme: no iteration, fewer iterations than slots,
exactly as many, one more (a last segment of one iteration), many segments, more than 64 * 64
(segments recomputed in steps of two), and large carried values that leave fewer slots; then
gradients of those gradients."""

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn, ops

RNG = np.random.default_rng(5)


def _t(*shape):
    return Tensor((RNG.standard_normal(shape) * 0.5).astype(np.float32))


def recurrence(x, w, n):
    i = 0
    h = x
    while i < n:
        h = ops.tanh(h * w + x)
        i = i + 1
    return ops.sum(h * h)


def _check(fn, args, argnums, rtol=1e-4, atol=1e-5):
    def as_tuple(grads):
        return grads if isinstance(grads, tuple) else (grads,)

    eager = as_tuple(ms.grad(fn, argnums)(*args))
    compiled = ms.jit(lambda *a: ms.grad(fn, argnums)(*a))
    for call in range(2):  # the slots are written in place: a second call must start clean
        graph = as_tuple(compiled(*args))
        assert len(graph) == len(eager)
        for e, g in zip(eager, graph):
            np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=rtol, atol=atol,
                                       err_msg=f"call {call}")


@pytest.mark.parametrize("trips", [0, 2, 63, 64, 65, 200, 4100])
def test_gradient_of_a_long_recurrence(trips):
    _check(recurrence, (_t(3), _t(3), Tensor(np.array(trips))), (0, 1))


def carries_a_large_value(big, w, n):
    # 2**20 floats carried through every iteration: 8 slots per level instead of 64, so 100
    # iterations make segments of 13, each recomputed from every second state.
    i = 0
    h = big[:3]
    while i < n:
        h = ops.tanh(h * w + big[3:6])
        big = big * 0.999
        i = i + 1
    return ops.sum(h) + big[:10].sum()


@pytest.mark.parametrize("trips", [7, 100])
def test_gradient_when_the_carried_values_are_large(trips):
    _check(carries_a_large_value, (_t(1 << 20), _t(3), Tensor(np.array(trips))), (0, 1))


def writes_rows_in_place(x, w):
    t = Tensor(0, ms.int32)
    out = ops.zeros((90, 3), ms.float32)
    h = x
    while t < 90:
        h = ops.tanh(h * w + x)
        out[t] = h * (t.astype(ms.float32) * 0.01 + 1)
        t = t + 1
    return (out * out).sum()


def test_gradient_when_the_body_writes_a_carried_buffer_in_place():
    # The body writes `out` in place: recomputing an iteration from a checkpoint must start
    # from the checkpoint's copy of `out`, not from a buffer a later iteration already wrote.
    _check(writes_rows_in_place, (_t(3), _t(3)), (0, 1))


def test_lstm_gradients_over_a_long_sequence_match_pynative():
    # With seq_length an LSTM runs its cell in a graph loop (without, one lstm_sequence op).
    ms.set_seed(0)
    lstm = nn.LSTM(8, 16, batch_first=True)
    x = _t(4, 80, 8)
    lengths = Tensor(np.array([80, 80, 61, 7], np.int32))
    weights = lstm.trainable_params()

    def loss(inputs):
        out, _ = lstm(inputs, seq_length=lengths)
        return (out * out).mean()

    grad_fn = ms.value_and_grad(loss, None, weights)
    want_loss, want = grad_fn(x)
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        got_loss, got = ms.jit(grad_fn)(x)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_allclose(got_loss.asnumpy(), want_loss.asnumpy(), rtol=1e-5)
    for p, g, e in zip(weights, got, want):
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-4, atol=1e-6, err_msg=p.name)


def _gradient_of_weight_gradient(x, w, n):
    return ms.grad(recurrence, (0, 1))(x, w, n)[1].sum()


@pytest.mark.parametrize("trips", [0, 1, 3, 70, 300])
def test_second_order_gradient_through_a_loop(trips):
    # The first backward is itself loops that call the body and its gradient: differentiating it
    # again goes through those calls and through the checkpoints' in-place writes.
    _check(_gradient_of_weight_gradient, (_t(3), _t(3), Tensor(np.array(trips))), (0, 1))


def nested_loops(x, n):
    i = 0
    h = x
    while i < n:
        j = 0
        while j < i + 1:  # the inner loop's trip count changes with the outer iteration
            h = ops.sin(h) + x * 0.1
            j = j + 1
        i = i + 1
    return h.sum()


def loop_in_a_branch(x, n):
    h = x
    if x.sum() > 0:
        i = 0
        while i < n:
            h = h * 0.9 + ops.cos(h)
            i = i + 1
    return h.sum()


def carries_a_flag_and_an_empty_tensor(x, n):
    i = 0
    h = x
    done = Tensor(False)
    empty = ops.zeros((0, 3), ms.float32)
    while i < n:
        h = ops.where(done, h, ops.tanh(h * 1.5))
        done = h.sum() > 100.0
        empty = empty * 2
        i = i + 1
    return h.sum() + empty.sum()


@pytest.mark.parametrize("fn", [nested_loops, loop_in_a_branch,
                                carries_a_flag_and_an_empty_tensor])
@pytest.mark.parametrize("trips", [0, 3, 12])
def test_loops_in_loops_branches_and_carried_flags(fn, trips):
    x = Tensor(np.array([0.3, -0.2, 0.5], np.float32))
    _check(fn, (x, Tensor(np.array(trips))), 0)


def test_float64_recurrence_over_many_segments():
    x = Tensor(np.array([0.3, -0.2], np.float64))
    w = Tensor(np.array([0.8, 1.1], np.float64))
    _check(recurrence, (x, w, Tensor(np.array(240))), (0, 1), rtol=1e-10, atol=1e-12)
