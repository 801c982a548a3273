"""The intra-op thread count and oneDNN from several Python threads at once."""

import threading

import numpy as np
import pytest

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
    assert set(stats) == {"checks", "contended_checks", "last_fraction", "contended", "crowded",
                          "available"}
    assert stats["available"]  # Linux exposes every thread's run-queue wait
    try:
        for forced in (1, 0):
            ms._C.set_contention_override(forced)
            stats = ms._C.contention_stats()
            assert stats["contended"] is stats["crowded"] is bool(forced)
    finally:
        ms._C.set_contention_override(-1)


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


def test_large_products_split_into_row_blocks_on_a_contended_machine():
    """Contended, products of 1e8 FLOPs or more run in blocks over kiln's helpers (a matrix's
    rows, a batch's leading dim), each block its own oneDNN call: plain, batched with b batched
    or broadcast, with a transposed left operand (a weight gradient's dy^T), fused with bias and
    residual or bias and activation, and with packed weights in Graph mode. The values match the
    quiet machine's one call; the last block is shorter than the rest."""
    from kiln.ops._core import call  # noqa: PLC0415

    rng = np.random.default_rng(2)
    a = rng.standard_normal((1000, 320)).astype(np.float32)
    at = np.ascontiguousarray(a.T)
    b = rng.standard_normal((320, 200)).astype(np.float32)
    bias = rng.standard_normal(200).astype(np.float32)
    res = rng.standard_normal((1000, 200)).astype(np.float32)
    qa = rng.standard_normal((6, 3, 200, 64)).astype(np.float32)
    kb = rng.standard_normal((6, 3, 64, 300)).astype(np.float32)
    dense = ms.nn.Dense(320, 200)
    compiled = ms.jit(lambda x: dense(x))

    def run():
        return (ops.matmul(ms.Tensor(a), ms.Tensor(b)).asnumpy(),
                call("matmul", (ms.Tensor(at), ms.Tensor(b)), (True, False)).asnumpy(),
                call("fused_matmul", (ms.Tensor(a), ms.Tensor(b), ms.Tensor(bias),
                                      ms.Tensor(res)), (False, False, "none")).asnumpy(),
                call("fused_matmul", (ms.Tensor(a), ms.Tensor(b), ms.Tensor(bias), None),
                     (False, False, "relu")).asnumpy(),
                compiled(ms.Tensor(a)).asnumpy(), compiled(ms.Tensor(a)).asnumpy(),
                ops.matmul(ms.Tensor(qa), ms.Tensor(kb)).asnumpy(),  # blocks of the batch
                ops.matmul(ms.Tensor(qa), ms.Tensor(kb[:1])).asnumpy())  # b broadcast

    try:
        ms._C.set_contention_override(0)
        quiet = run()
        ms._C.set_contention_override(1)
        contended = run()
    finally:
        ms._C.set_contention_override(-1)
    want = a.astype(np.float64) @ b
    np.testing.assert_allclose(quiet[0], want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(quiet[2], want + bias + res, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(quiet[3], np.maximum(want + bias, 0), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(quiet[7], qa @ kb[:1], rtol=1e-4, atol=1e-3)
    for q, c in zip(quiet, contended):
        np.testing.assert_allclose(c, q, rtol=1e-5, atol=1e-4)


_SLICE_PROBE = """
import ctypes, json, os, struct, sys
import numpy as np
import kiln as ms
from kiln import ops

libc = ctypes.CDLL(None, use_errno=True)

def sched_attr():  # sched_getattr(2): (policy, nice, runtime in ns) of the calling thread
    buf = ctypes.create_string_buffer(56)
    assert libc.syscall(GETATTR, 0, buf, 56, 0) == 0, ctypes.get_errno()
    fields = struct.unpack("IIQiIQQQII", buf.raw)
    return fields[1], fields[3], fields[5]

before = sched_attr()
ms.set_num_threads(2)
a = ms.Tensor(np.ones((256, 256), np.float32))
ops.matmul(a, a).asnumpy()
ops.sum(ops.exp(ms.Tensor(np.ones(300_000, np.float32)))).asnumpy()
print(json.dumps({"before": before, "after": sched_attr(), "stats": ms._C.thread_slice_stats(),
                  "nice": os.nice(0)}))
"""


# sched_getattr's system call number, by machine.
_SCHED_GETATTR = {"x86_64": 315, "aarch64": 275}


_CROWDED_SLICE_PROBE = """
import ctypes, json, struct
import numpy as np
import kiln as ms

libc = ctypes.CDLL(None, use_errno=True)

def slice_ns():  # sched_getattr(2)'s runtime of the calling thread
    buf = ctypes.create_string_buffer(56)
    assert libc.syscall(GETATTR, 0, buf, 56, 0) == 0, ctypes.get_errno()
    return struct.unpack("IIQiIQQQII", buf.raw)[5]

ms.set_num_threads(2)
step = ms.jit(lambda x: ms.ops.matmul(x, x) + ms.ops.matmul(x * 2.0, x))  # independent nodes
x = ms.Tensor(np.ones((64, 64), np.float32))
step(x).asnumpy()
quiet = slice_ns()
teams = ms._C.contended_pool_stats()["teams"]
ms._C.set_contention_override(1)  # contended and crowded: the graph runs as a team
step(x).asnumpy()
crowded = slice_ns()
ran_as_team = ms._C.contended_pool_stats()["teams"] > teams
ms._C.set_contention_override(0)
step(x).asnumpy()  # in order again: the short slice back
print(json.dumps({"quiet": quiet, "crowded": crowded, "after": slice_ns(), "team": ran_as_team,
                  "stats": ms._C.thread_slice_stats()}))
"""


def _crowded_slice_probe(env_value, folder):
    import json  # noqa: PLC0415
    import os  # noqa: PLC0415
    import platform  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    env = dict(os.environ)
    env.pop("KILN_THREAD_SLICE_US", None)
    env.pop("KILN_CROWDED_SLICE_US", None)
    if env_value is not None:
        env["KILN_CROWDED_SLICE_US"] = env_value
    script = folder / "crowded_slice_probe.py"  # a file: ms.jit reads the function's source
    script.write_text(f"GETATTR = {_SCHED_GETATTR[platform.machine()]}\n" + _CROWDED_SLICE_PROBE)
    cmd = [sys.executable, str(script)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _kernel_keeps_fair_slices():
    import platform  # noqa: PLC0415

    major, minor = (int(part) for part in platform.release().split(".")[:2])
    return (major, minor) >= (6, 12)


@pytest.mark.parametrize("env_value,crowded_us", [(None, 3000), ("0", 100), ("2000", 2000)])
def test_a_team_on_a_crowded_machine_takes_the_long_slice_and_gives_it_back(env_value,
                                                                            crowded_us, tmp_path):
    probe = _crowded_slice_probe(env_value, tmp_path)
    assert probe["team"]
    assert probe["stats"]["crowded_slice_us"] == (3000 if env_value is None else int(env_value))
    if probe["stats"]["applied"] and _kernel_keeps_fair_slices():
        assert probe["quiet"] == probe["after"] == 100_000
        assert probe["crowded"] == crowded_us * 1000
    else:  # no short slice given (an older kernel, not Linux): the crowded one is not either
        assert probe["quiet"] == probe["crowded"] == probe["after"]


def _slice_probe(env_value, nice=0):
    import json  # noqa: PLC0415
    import os  # noqa: PLC0415
    import platform  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    env = dict(os.environ)
    env.pop("KILN_THREAD_SLICE_US", None)
    if env_value is not None:
        env["KILN_THREAD_SLICE_US"] = env_value
    getattr_number = _SCHED_GETATTR[platform.machine()]
    cmd = [sys.executable, "-c", f"GETATTR = {getattr_number}\n" + _SLICE_PROBE]
    if nice:
        cmd = ["nice", "-n", str(nice)] + cmd
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_kernel_threads_ask_for_a_short_scheduler_slice_keeping_their_nice():
    probe = _slice_probe(None, nice=5)
    assert probe["stats"]["slice_us"] == 100
    assert probe["stats"]["applied"] + probe["stats"]["refused"] >= 1
    policy, nice, _ = probe["after"]
    assert (policy, nice) == tuple(probe["before"][:2]) and nice == 5 and probe["nice"] == 5
    if probe["stats"]["applied"]:
        # A kernel that keeps sched_runtime for fair threads (Linux 6.12+) reads it back; an
        # older one accepts and ignores it (0).
        import platform  # noqa: PLC0415

        major, minor = (int(part) for part in platform.release().split(".")[:2])
        wanted = (100_000,) if (major, minor) >= (6, 12) else (100_000, 0)
        assert probe["after"][2] in wanted


def test_the_slice_can_be_turned_off():
    probe = _slice_probe("0")
    assert probe["stats"] == {"slice_us": 0, "crowded_slice_us": 3000, "applied": 0, "refused": 0}
    assert probe["after"] == probe["before"]
