"""A compiled function answers the same on every call, and its in-place writes land where they
do in PyNative. Its constants are shared by all calls, so one that the graph writes in place
(zeros an index assignment or a gather's gradient fills) or hands back to the caller is copied
on each run, and a value written through a view is never folded into a constant of its own;
each case runs several times in GRAPH mode and is compared with PyNative."""

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn, ops

RNG = np.random.default_rng(11)
X = RNG.standard_normal((4, 3)).astype(np.float32)
W = RNG.standard_normal((4, 3)).astype(np.float32)


def _gather_twice(x, i):
    return (ops.gather(x, i, 0) * 2).sum()


def _gather_in_loop(x):
    t = Tensor(0, ms.int32)
    s = ops.zeros((3,), ms.float32)
    while t < 4:
        s = s + ops.gather(x, t, 0) * (t.astype(ms.float32) + 1)
        t = t + 1
    return s.sum()


def _assign_in_loop(x, w):
    t = Tensor(0, ms.int32)
    out = ops.zeros((4, 3), ms.float32)
    h = x
    while t < 4:
        h = ops.tanh(h) * 2
        out[t] = h * (t.astype(ms.float32) + 1)
        t = t + 1
    return (out * w).sum()


def _grad_pairs():
    i = Tensor(np.array([1, 3, 1], np.int32))
    return {
        "gather": (ms.grad(_gather_twice), (Tensor(X), i)),
        "gather in a while loop": (ms.grad(_gather_in_loop), (Tensor(X),)),
        "index assignment in a while loop": (ms.grad(_assign_in_loop),
                                             (Tensor(X[0]), Tensor(W))),
    }


@pytest.mark.parametrize("case", ["gather", "gather in a while loop",
                                  "index assignment in a while loop"])
def test_gradients_are_the_same_on_every_call(case):
    grad_fn, args = _grad_pairs()[case]
    want = grad_fn(*args).asnumpy()
    compiled = ms.jit(grad_fn)
    for call in range(3):
        got = compiled(*args).asnumpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"call {call}")


def test_gather_gradient_counts_each_row_once_per_use():
    # d/dx of sum(gather(x, [1, 3, 1]) * 2): row 1 twice, row 3 once
    got = ms.jit(ms.grad(_gather_twice))(Tensor(X), Tensor(np.array([1, 3, 1], np.int32)))
    want = np.zeros_like(X)
    want[1], want[3] = 4.0, 2.0
    np.testing.assert_array_equal(got.asnumpy(), want)


@ms.jit
def _row_of_zeros(h, t):
    out = ops.zeros((4, 3), ms.float32)
    out[t] = h
    return out


@ms.jit
def _row_added_to_zeros(h, t):
    out = ops.zeros((4, 3), ms.float32)
    out[t] += h
    return out


@pytest.mark.parametrize("fn", [_row_of_zeros, _row_added_to_zeros])
def test_index_assignment_into_new_zeros_starts_from_zeros_each_call(fn):
    for call, row in enumerate([1, 2, 1, 0]):
        got = fn(Tensor(np.full(3, call + 1.0, np.float32)), Tensor(row, ms.int32)).asnumpy()
        want = np.zeros((4, 3), np.float32)
        want[row] = call + 1.0
        np.testing.assert_array_equal(got, want, err_msg=f"call {call}")


def test_a_returned_constant_is_the_callers_own():
    @ms.jit
    def zeros_and_double(x):
        return ops.zeros((2, 3), ms.float32), x * 2

    first, _ = zeros_and_double(Tensor(X[0]))
    first[0] = 7.0  # the caller writes what it got
    second, doubled = zeros_and_double(Tensor(X[0]))
    np.testing.assert_array_equal(second.asnumpy(), np.zeros((2, 3), np.float32))
    np.testing.assert_allclose(doubled.asnumpy(), X[0] * 2, rtol=1e-6)
    assert first.asnumpy()[0, 0] == 7.0


class _Lookup(nn.Cell):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(6, 3)

    def construct(self, ids):
        return (self.embedding(ids) ** 2).sum()


def test_embedding_gradients_match_pynative_on_every_step():
    ms.set_seed(3)
    net = _Lookup()
    ids = Tensor(np.array([[0, 2, 2], [5, 0, 1]], np.int32))
    grad_fn = ms.grad(net, None, net.trainable_params())
    want = grad_fn(ids)[0].asnumpy()
    compiled = ms.jit(grad_fn)
    for step in range(3):
        np.testing.assert_allclose(compiled(ids)[0].asnumpy(), want, rtol=1e-5, atol=1e-6,
                                   err_msg=f"step {step}")


def _powers(x):
    buf = ops.zeros((4,), ms.float32)
    buf[0] = x
    t = Tensor(1, ms.int32)
    while t < 4:
        buf[t] = buf[t - 1] * x
        t = t + 1
    return buf.sum()


def test_a_write_through_a_view_of_new_zeros_reaches_them():
    x = Tensor(np.float32(1.5))
    compiled = ms.jit(_powers)
    for _ in range(2):
        assert float(compiled(x).asnumpy()) == pytest.approx(1.5 + 1.5**2 + 1.5**3 + 1.5**4)
    assert float(ms.jit(ms.grad(_powers))(x).asnumpy()) == pytest.approx(
        1 + 2 * 1.5 + 3 * 1.5**2 + 4 * 1.5**3)
    assert float(_powers(x).asnumpy()) == pytest.approx(float(compiled(x).asnumpy()))
