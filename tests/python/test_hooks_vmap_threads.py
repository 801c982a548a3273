"""vmap and Cell/HookBackward hooks run concurrently from several threads give the serial
results: their state (vmap levels, running grads' hook records) is per thread."""
import threading

import numpy as np

import kiln as ms
from kiln import Tensor, nn, ops

ROUNDS = 15
THREADS = 6


def _vmapped(x, w):
    def per_row(row):
        return ops.tanh(ops.matmul(w, row)).sum() + ops.amax(row)
    return ops.vmap(per_row)(x)


def _nested(x):
    return ops.vmap(ops.vmap(lambda v: v * v + 1.0))(x)


class Scaled(nn.Cell):
    def __init__(self, factor):
        super().__init__()
        self.dense = nn.Dense(3, 2, weight_init="ones", bias_init="zeros")
        self.factor = factor
        self.dense.register_backward_hook(
            lambda cell, gi, go: tuple(g * self.factor for g in gi))

    def construct(self, x):
        return self.dense(x)


def _hooked_grad(net, x):
    return ms.grad(lambda t: (net(t) * net(t)).sum())(x)


def _hook_backward_grad(x, factor):
    hook = ops.HookBackward(lambda grads: (grads[0] * factor,))
    return ms.grad(lambda t: (hook(t * 3.0) ** 2).sum())(x)


def _work(i):
    rng = np.random.default_rng(i)
    x = Tensor(rng.standard_normal((4, 3)).astype(np.float32))
    w = Tensor(rng.standard_normal((2, 3)).astype(np.float32))
    net = Scaled(float(i % 3 + 1))
    return (_vmapped(x, w), _nested(Tensor(rng.standard_normal((2, 3, 2)).astype(np.float32))),
            _hooked_grad(net, x), _hook_backward_grad(x, float(i + 2)))


def _run_threads(fn, n):
    results, errors = [None] * n, []
    start = threading.Barrier(n)

    def body(i):
        try:
            start.wait()
            results[i] = [[t.asnumpy() for t in fn(i)] for _ in range(ROUNDS)]
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_vmap_and_hooks_concurrently_equal_serial_runs():
    serial = [[t.asnumpy() for t in _work(i)] for i in range(THREADS)]
    concurrent = _run_threads(_work, THREADS)
    for i in range(THREADS):
        for rnd in concurrent[i]:
            for got, want in zip(rnd, serial[i]):
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_serial_results_are_the_hooked_ones():
    """The serial baseline itself applies the hooks (so equality above is meaningful)."""
    x = Tensor(np.ones((4, 3), np.float32))
    np.testing.assert_allclose(_hook_backward_grad(x, 5.0).asnumpy(), np.full((4, 3), 90.0))
    net, ref = Scaled(3.0), Scaled(1.0)
    np.testing.assert_allclose(_hooked_grad(net, x).asnumpy(),
                               3 * _hooked_grad(ref, x).asnumpy(), rtol=1e-6)


def test_vmap_in_one_thread_leaves_others_eager():
    """A thread that is not inside vmap keeps plain results while another thread's vmap runs,
    and the batching hook is off again once every vmap has returned."""
    from kiln.ops import _core  # noqa: PLC0415

    inside, release = threading.Event(), threading.Event()

    def slow_row(row):
        inside.set()
        release.wait(5)
        return row * 2.0

    out = {}
    t = threading.Thread(target=lambda: out.setdefault(
        "v", ops.vmap(slow_row)(Tensor(np.ones((3, 2), np.float32)))))
    t.start()
    assert inside.wait(5)
    eager = ops.sum(Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)), 1)
    release.set()
    t.join()
    np.testing.assert_array_equal(eager.asnumpy(), [3.0, 12.0])
    np.testing.assert_array_equal(out["v"].asnumpy(), np.full((3, 2), 2.0))
    assert _core.batch_hook is None


def _interleaved(first, second):
    """first(wait) runs in a thread and calls wait() midway; second() runs in full meanwhile."""
    inside, release, out = threading.Event(), threading.Event(), {}

    def wait():
        inside.set()
        assert release.wait(5)

    t = threading.Thread(target=lambda: out.setdefault("first", first(wait)))
    t.start()
    assert inside.wait(5)
    try:
        out["second"] = second()
    finally:
        release.set()
        t.join()
    return out["first"], out["second"]


def test_a_vmap_ending_in_one_thread_keeps_another_threads_vmap_batched():
    """Thread A enters vmap first; the main thread enters one too and, inside it, lets A
    finish: the main thread's vmap must still batch afterwards."""
    x = Tensor(np.arange(6, dtype=np.float32).reshape(3, 2))
    inside, release, out = threading.Event(), threading.Event(), {}

    def row_a(v):
        inside.set()
        assert release.wait(5)
        return v + 1.0

    a = threading.Thread(target=lambda: out.setdefault("a", ops.vmap(row_a)(x).asnumpy()))
    a.start()
    assert inside.wait(5)

    def row_main(v):
        release.set()
        a.join()  # A's vmap has ended; this one goes on
        return ops.sum(v * v)

    got = ops.vmap(row_main)(x).asnumpy()
    np.testing.assert_allclose(got, [1.0, 13.0, 41.0])
    np.testing.assert_allclose(out["a"], x.asnumpy() + 1.0)


def test_a_grad_running_in_one_thread_does_not_switch_off_hooks_in_another():
    x = Tensor(np.ones((2, 3), np.float32))

    def first(wait):
        def loss(t):
            wait()
            return (t * 2.0).sum()
        return ms.grad(loss)(x).asnumpy()

    got, hooked = _interleaved(first, lambda: _hook_backward_grad(x, 5.0).asnumpy())
    np.testing.assert_allclose(got, np.full((2, 3), 2.0))
    np.testing.assert_allclose(hooked, np.full((2, 3), 90.0))
