"""The compile cache: Cells held weakly, a bounded number of variants, hashed guard lookup."""
import gc
import warnings
import weakref

import numpy as np
import pytest

import kiln as ms
from kiln import nn
from kiln.jit import guards as guards_module
from kiln.jit.api import JitCacheLimitWarning


class JitNet(nn.Cell):
    def __init__(self, scale):
        super().__init__()
        self.dense = nn.Dense(8, 8)
        self.scale = scale

    @ms.jit
    def construct(self, x):
        return self.dense(x) * self.scale


def _x():
    return ms.Tensor(np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8))


def test_cells_with_a_jitted_construct_die_with_their_last_reference():
    refs = []
    for i in range(40):
        net = JitNet(float(i))
        net(_x())
        net(_x())
        refs.append(weakref.ref(net))
    del net
    gc.collect()
    assert [r for r in refs if r() is not None] == []
    jitted = JitNet.construct
    assert jitted.variants() == []  # nothing of the dead instances is left in the cache
    assert jitted.cache._strong == {}
    assert jitted._fast is None  # the fast path dropped the last instance's graph with it


def test_cells_compiled_in_graph_mode_die_with_their_last_reference():
    class Plain(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(8, 8)

        def construct(self, x):
            return self.dense(x)

    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        refs = []
        for _ in range(20):
            net = Plain()
            net(_x())
            refs.append(weakref.ref(net))
        del net
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    gc.collect()
    assert [r for r in refs if r() is not None] == []


def test_an_instance_never_runs_the_graph_of_a_dead_one_with_its_id():
    for i in range(30):  # ids of freed instances are reused: each must get its own graph
        net = JitNet(float(i))
        eager = net.dense(_x()).asnumpy() * float(i)
        np.testing.assert_allclose(net(_x()).asnumpy(), eager, rtol=1e-6)
        del net
        gc.collect()


def test_an_instance_copy_compiles_its_own_graph():
    import copy  # noqa: PLC0415

    net = JitNet(2.0)
    net(_x())
    twin = copy.deepcopy(net)
    twin.scale = 3.0
    np.testing.assert_allclose(twin(_x()).asnumpy(), twin.dense(_x()).asnumpy() * 3.0, rtol=1e-6)
    np.testing.assert_allclose(net(_x()).asnumpy(), net.dense(_x()).asnumpy() * 2.0, rtol=1e-6)


# ---- a bounded number of variants ----
step = 0


def _reads_step(x):
    return x + step


def _call_with_steps(fn, steps):
    """Calls fn with the global `step` set to each value; returns (results, warnings)."""
    global step
    results = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for s in steps:
            step = s
            results.append(fn(ms.Tensor([1.0])).asnumpy()[0])
    step = 0
    return results, [w for w in caught if issubclass(w.category, JitCacheLimitWarning)]


def test_a_global_that_changes_every_call_stops_compiling_at_the_limit():
    assert ms.get_context("jit_cache_limit") == 64
    fn = ms.jit(_reads_step)
    before = ms.get_jit_stats()
    results, caught = _call_with_steps(fn, range(100))
    after = ms.get_jit_stats()
    assert results == [1.0 + s for s in range(100)]  # past the limit it runs in PyNative
    assert after["compiles"] - before["compiles"] == 64
    assert after["eager_fallbacks"] - before["eager_fallbacks"] == 36
    assert len(caught) == 1  # one warning, naming the function and the changing global
    message = str(caught[0].message)
    assert "_reads_step" in message and "global 'step'" in message and "64" in message
    assert caught[0].filename == __file__  # pointing at the user's call
    results, caught = _call_with_steps(fn, [3, 63, 70])
    assert results == [4.0, 64.0, 71.0] and caught == []  # cached variants still run


def test_jit_cache_limit_is_a_context_option():
    ms.set_context(jit_cache_limit=3)
    try:
        fn = ms.jit(_reads_step)
        before = ms.get_jit_stats()["compiles"]
        results, caught = _call_with_steps(fn, range(6))
        assert ms.get_jit_stats()["compiles"] - before == 3
        assert results == [1.0 + s for s in range(6)] and len(caught) == 1
    finally:
        ms.set_context(jit_cache_limit=64)
    for bad, error in ((0, ValueError), (-1, ValueError), (2.5, TypeError), (True, TypeError),
                       ("8", TypeError)):
        with pytest.raises(error, match="jit_cache_limit"):
            ms.set_context(jit_cache_limit=bad)
    assert ms.get_context("jit_cache_limit") == 64


def test_a_cached_variant_is_found_by_hashing_not_by_a_scan(monkeypatch):
    fn = ms.jit(_reads_step)
    _call_with_steps(fn, range(40))
    reads = []
    original = guards_module._Guard.read

    def counting_read(self):
        reads.append(self.description)
        return original(self)

    monkeypatch.setattr(guards_module._Guard, "read", counting_read)
    results, _ = _call_with_steps(fn, [7, 31, 2])
    assert results == [8.0, 32.0, 3.0]
    assert len(reads) <= 3 * 3  # a few reads per call, not one per cached variant (40)


def test_a_number_guard_tells_int_from_float():
    global step
    fn = ms.jit(_reads_step)
    x = ms.Tensor(np.array([1], np.int32))
    step = 2
    assert fn(x).dtype == ms.int32
    step = 2.0  # == 2, but int32 + 2.0 is float32
    try:
        assert fn(x).dtype == ms.float32
    finally:
        step = 0


class Slotted:
    __slots__ = ("scale",)

    def __init__(self, scale):
        self.scale = scale

    @ms.jit
    def apply(self, x):
        return x * self.scale


class WithClassMethod:
    factor = 3.0

    @classmethod
    def scaled(cls, x):
        return cls._scaled(cls, x)

    @ms.jit
    def _scaled(cls, x):
        return x * cls.factor


def test_owners_without_an_instance_dict_keep_their_own_variants():
    for scale in (2.0, 5.0):
        np.testing.assert_allclose(Slotted(scale).apply(ms.Tensor([1.0])).asnumpy(), [scale])
    np.testing.assert_allclose(WithClassMethod.scaled(ms.Tensor([1.0])).asnumpy(), [3.0])
