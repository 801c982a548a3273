"""The graph executor: intermediates are released after their last use, so peak memory falls."""
import numpy as np

import kiln as ms
from kiln import Tensor, ops


def long_chain(x):
    y = x * 2.0
    for i in range(8):
        y = ops.exp(y * 0.5) + float(i)
    return y.sum()


def compiled_of(fn, *args):
    jitted = ms.jit(fn)
    jitted(*args)
    return [c for entries in jitted.cache.values() for c in entries][0].executable


def test_peak_memory_falls_with_liveness_planning():
    x = Tensor(np.ones((512, 512), np.float32))  # 1 MiB per intermediate
    exe = compiled_of(long_chain, x)
    (with_plan,) = exe.run([x])
    peak_planned = exe.last_peak_bytes
    (without,) = exe.run([x], free_dead_values=False)
    peak_unplanned = exe.last_peak_bytes
    np.testing.assert_allclose(with_plan.asnumpy(), without.asnumpy())
    np.testing.assert_allclose(with_plan.asnumpy(), long_chain(x).asnumpy(), rtol=1e-5)
    one = 512 * 512 * 4
    assert peak_planned <= 4 * one, f"planned peak {peak_planned} bytes"
    assert peak_unplanned >= 10 * one, f"unplanned peak {peak_unplanned} bytes"


def test_steady_state_runs_do_not_allocate_from_the_system():
    x = Tensor(np.ones((256, 256), np.float32))
    exe = compiled_of(long_chain, x)
    exe.run([x])
    before = ms._C.allocator_stats()["system_allocations"]
    for _ in range(5):
        exe.run([x])
    assert ms._C.allocator_stats()["system_allocations"] == before
