"""Graph mode and threads: compiling in one thread never captures another thread's ops."""
import sys
import threading

import numpy as np

import kiln as ms
from kiln import ops

ROUNDS = 12


def _body(x, k):
    y = x * 2.0 + 1.0
    if k > 1:
        y = ops.relu(y - 3.0)
    for _ in range(k):
        y = y * 0.5 + x
    return y.sum(), y


def _loss(x):
    return (ops.tanh(x) * x).sum()


def _eager_work(x, i):
    return ops.exp(x * 0.25) - ops.add(x, float(i))


def _shared_body(x):
    return (x * x + 1.0).sum(axis=-1)


_SHARED = ms.jit(_shared_body)


def _inputs(i):
    return np.linspace(-2.0, 2.0, 6 + i % 4, dtype=np.float32).reshape(1, -1)


def _run(kind, i):
    """One unit of work of a thread; a tuple of NumPy results."""
    x = ms.Tensor(_inputs(i))
    if kind == "compile":  # a fresh JitFunction each time: every call compiles
        total, y = ms.jit(_body)(x, i % 3)
        return total.asnumpy(), y.asnumpy()
    if kind == "eager":
        return (_eager_work(x, i).asnumpy(),)
    if kind == "grad":
        return (ms.grad(_loss)(x).asnumpy(),)
    return (_SHARED(ms.Tensor(np.repeat(_inputs(i), 1 + i % 3, axis=0))).asnumpy(),)


KINDS = ("compile", "eager", "grad", "shared")


def _reference():
    return {(kind, i): _run(kind, i) for kind in KINDS for i in range(ROUNDS)}


def _worker(kind, start, results, errors):
    try:
        for n in range(ROUNDS):
            i = (start + n) % ROUNDS
            results.append(((kind, i), _run(kind, i)))
    except BaseException as e:  # noqa: BLE001 - reported by the main thread
        errors.append(f"{kind} thread: {type(e).__name__}: {e}")


def run_interleaved(threads, timeout):
    """Starts and joins `threads` while Python switches between them as often as it can."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=timeout)
    finally:
        sys.setswitchinterval(old)


def test_compile_eager_and_grad_threads_never_mix():
    expected = _reference()
    results, errors = [], []
    threads = [
        threading.Thread(target=_worker, args=(kind, copy * 5, results, errors))
        for copy in range(2)
        for kind in KINDS
    ]
    run_interleaved(threads, timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert errors == []
    assert len(results) == len(threads) * ROUNDS
    for key, got in results:
        for g, e in zip(got, expected[key]):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=str(key))


def test_threads_calling_one_jitted_function_compile_each_variant_once():
    shapes = [(2, 5), (3, 5), (4, 7)]
    fn = ms.jit(_shared_body)
    barrier = threading.Barrier(6)
    errors = []

    def call(shape):
        try:
            barrier.wait()
            x = np.ones(shape, np.float32)
            for _ in range(20):
                np.testing.assert_allclose(fn(ms.Tensor(x)).asnumpy(), (x * x + 1).sum(-1))
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=call, args=(shapes[i % 3],)) for i in range(6)]
    compiles = ms.get_jit_stats()["compiles"]
    run_interleaved(threads, timeout=120)
    assert errors == []
    assert ms.get_jit_stats()["compiles"] - compiles == len(shapes)  # each compiled once
    assert len(fn.variants()) == len(shapes)


def test_eager_ops_run_while_another_thread_is_inside_a_compile():
    """The compile is held open (a graph op waits on an event); eager work in this thread
    must neither wait for it nor land in its graph."""
    inside, release = threading.Event(), threading.Event()

    def slow_scale():
        inside.set()
        release.wait(timeout=60)
        return 3.0

    def compiled(x):
        return x * slow_scale()

    errors = []

    def compile_thread():
        try:
            out = ms.jit(compiled)(ms.Tensor([1.0, 2.0]))
            np.testing.assert_allclose(out.asnumpy(), [3.0, 6.0])
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    t = threading.Thread(target=compile_thread)
    t.start()
    try:
        assert inside.wait(timeout=60)
        x = ms.Tensor([1.0, 4.0])
        np.testing.assert_allclose((ops.sqrt(x) + x * 2.0).asnumpy(), [3.0, 10.0])
        np.testing.assert_allclose(ms.grad(_loss)(x).asnumpy(),
                                   np.tanh([1.0, 4.0]) + [1.0, 4.0] / np.cosh([1.0, 4.0]) ** 2,
                                   rtol=1e-5)
    finally:
        release.set()
        t.join(timeout=60)
    assert errors == []
