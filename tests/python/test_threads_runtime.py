"""The intra-op thread count and oneDNN from several Python threads at once."""

import threading

import numpy as np

import kiln as ms
from kiln import ops


def in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_set_num_threads_reaches_threads_started_before_and_after():
    original = ms.get_num_threads()
    ready, go, seen = threading.Event(), threading.Event(), []

    def early_thread():
        ms.get_num_threads()  # this thread has used kiln before the setting changes
        ready.set()
        go.wait()
        seen.append(ms.get_num_threads())

    early = threading.Thread(target=early_thread)
    early.start()
    ready.wait()
    try:
        ms.set_num_threads(1)
        go.set()
        early.join()
        assert seen == [1]
        assert in_thread(ms.get_num_threads) == 1
    finally:
        ms.set_num_threads(original)
    assert in_thread(ms.get_num_threads) == original


def test_concurrent_onednn_products_from_many_threads_agree_with_numpy():
    rng = np.random.default_rng(0)
    cases = [(rng.standard_normal((n, 64)).astype(np.float32),
              rng.standard_normal((64, 48)).astype(np.float32)) for n in (1, 3, 32, 96)]
    errors = []

    def work(a, b):
        try:
            x, w = ms.Tensor(a), ms.Tensor(b)
            for _ in range(30):
                np.testing.assert_allclose(ops.matmul(x, w).asnumpy(), a @ b, rtol=1e-4,
                                           atol=1e-4)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=case) for case in cases * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []


def test_contention_monitor_reports_its_readings():
    stats = ms._C.contention_stats()
    assert set(stats) == {"checks", "contended_checks", "last_fraction", "contended", "available"}
    assert stats["available"]  # Linux exposes every thread's run-queue wait


def test_kernels_agree_when_a_contended_machine_runs_them_on_one_thread():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((96, 200)).astype(np.float32)
    b = rng.standard_normal((200, 64)).astype(np.float32)
    x = rng.standard_normal((4, 3, 16, 16)).astype(np.float32)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    big = rng.standard_normal(300_000).astype(np.float32)

    def run():
        return (ops.matmul(ms.Tensor(a), ms.Tensor(b)).asnumpy(),
                ops.conv2d(ms.Tensor(x), ms.Tensor(w), pad_mode="pad", padding=1).asnumpy(),
                ops.sum(ops.exp(ms.Tensor(big) * 0.01)).asnumpy())

    try:
        ms._C.set_contention_override(0)
        quiet = run()
        ms._C.set_contention_override(1)
        assert ms._C.contention_stats()["contended"]
        contended = run()
    finally:
        ms._C.set_contention_override(-1)
    np.testing.assert_allclose(quiet[0], a @ b, rtol=1e-4, atol=1e-4)
    for q, c in zip(quiet, contended):
        np.testing.assert_allclose(c, q, rtol=1e-5, atol=1e-4)
