"""The graph executor: intermediates are released after their last use and elementwise ops
reuse dying buffers, so peak memory falls."""
import numpy as np

import kiln as ms
from kiln import Tensor, ops


def long_chain(x):
    y = x * 2.0
    for i in range(8):
        y = ops.exp(y * 0.5) + float(i)
    return y.sum()


def compiled_of(fn, *args, level="O0"):
    """The executable of fn; O0 by default, so that fusion leaves the intermediates to plan."""
    jitted = ms.jit(fn, jit_level=level)
    jitted(*args)
    return jitted.variants()[0].executable


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


def chain_of_adds(x):
    for _ in range(20):
        x = x + 1.0
    return x


def test_elementwise_chain_runs_in_one_buffer():
    x = Tensor(np.ones((256, 256), np.float32))
    exe = compiled_of(chain_of_adds, x)
    (out,) = exe.run([x])
    np.testing.assert_array_equal(out.asnumpy(), 21.0)
    np.testing.assert_array_equal(x.asnumpy(), 1.0)  # the input is never written
    assert exe.last_peak_bytes <= 256 * 256 * 4 * 1.01


def reuse_traps(x):
    a = x * 2.0  # used again below: must not be overwritten by b
    b = ops.exp(a)
    c = a + b
    v = ops.reshape(c, (-1,))  # a live view of c: c's buffer is shared
    d = c * 3.0  # c dies here, but its bytes are still v's
    k = ops.ones_like(x) * 5.0
    e = k + 1.0  # k is a graph value; the constant 5.0 must survive every call
    return v, d, e


def test_in_place_reuse_never_clobbers_live_values_views_inputs_or_constants():
    values = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    x = Tensor(values.copy())
    jitted = ms.jit(reuse_traps)
    eager = [t.asnumpy() for t in reuse_traps(x)]
    for _ in range(3):  # constants written in place would show on the second call
        got = [t.asnumpy() for t in jitted(x)]
        for g, want in zip(got, eager):
            np.testing.assert_allclose(g, want, rtol=1e-6)
    np.testing.assert_array_equal(x.asnumpy(), values)



def test_profile_lists_each_node_with_its_time():
    x = Tensor(np.ones((64, 64), np.float32))
    exe = compiled_of(long_chain, x)
    exe.run([x])
    assert exe.last_profile == []  # only profiled runs record
    exe.run([x], profile=True)
    profile = exe.last_profile
    assert len(profile) == exe.num_nodes
    kinds = [what.split(" ")[0] for what, _ in profile]
    assert kinds.count("exp") == 8 and "reduce_sum" in kinds
    assert all(seconds >= 0 for _, seconds in profile)
    assert "f32[64,64]" in profile[kinds.index("exp")][0]
