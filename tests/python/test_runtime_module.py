"""kiln.runtime (MindSpore's mindspore.runtime): the allocator's memory figures, the resets,
empty_cache, synchronization and the host stream's Stream / Event handles."""
import time

import numpy as np
import pytest

import kiln as ms
from kiln import runtime


def test_memory_allocated_follows_live_tensors():
    runtime.empty_cache()
    runtime.reset_peak_memory_stats()
    before = runtime.memory_allocated()
    x = ms.Tensor(np.ones((1024, 1024), np.float32))  # 4 MiB each, x and y
    y = x + 1.0
    held = runtime.memory_allocated() - before
    assert held >= 2 * 4 * 1024 * 1024
    assert runtime.max_memory_allocated() >= runtime.memory_allocated()
    assert runtime.memory_reserved() >= runtime.memory_allocated()
    del x, y
    assert runtime.memory_allocated() - before < held
    assert runtime.max_memory_allocated() - before >= held  # the peak stays until a reset
    runtime.reset_max_memory_allocated()
    assert runtime.max_memory_allocated() == runtime.memory_allocated()


def test_reserved_memory_keeps_freed_blocks_until_empty_cache():
    runtime.empty_cache()
    x = ms.Tensor(np.ones((64, 64), np.float32)) * 2.0  # freed blocks are kept for reuse
    del x
    stats = runtime.memory_stats()
    assert stats["total_idle_memory"] > 0
    assert stats["total_reserved_memory"] == (stats["total_allocated_memory"]
                                              + stats["total_idle_memory"])
    assert runtime.max_memory_reserved() >= runtime.memory_reserved()
    runtime.empty_cache()
    assert runtime.memory_reserved() == runtime.memory_allocated()
    runtime.reset_max_memory_reserved()
    assert runtime.max_memory_reserved() == runtime.memory_reserved()
    assert "total_allocated_memory" in runtime.memory_summary()


def test_only_the_cpu_is_a_device_target():
    assert runtime.memory_allocated("CPU") == runtime.memory_allocated()
    with pytest.raises(ValueError, match="device_target"):
        runtime.memory_allocated("Ascend")


def test_events_time_the_work_between_them():
    start, end = runtime.Event(enable_timing=True), runtime.Event(enable_timing=True)
    start.record()
    time.sleep(0.02)
    end.record(runtime.current_stream())
    end.synchronize()
    assert start.query() and end.query()
    assert start.elapsed_time(end) >= 20.0 - 1e-6  # at least the sleep between the records
    with pytest.raises(RuntimeError, match="enable_timing"):
        runtime.Event().elapsed_time(end)
    with pytest.raises(RuntimeError, match="recorded"):
        runtime.Event(enable_timing=True).elapsed_time(end)


def test_streams_and_the_current_stream():
    default = runtime.default_stream()
    assert runtime.current_stream() == default == runtime.communication_stream()
    side = runtime.Stream(priority=1)
    assert side != default and side.query()
    with runtime.StreamCtx(side):
        assert runtime.current_stream() == side
        out = ms.ops.add(ms.Tensor([1.0]), 2.0)
        event = side.record_event()
    assert runtime.current_stream() == default
    default.wait_event(event)
    default.wait_stream(side)
    runtime.synchronize()
    runtime.launch_blocking()
    np.testing.assert_array_equal(out.asnumpy(), [3.0])
    with pytest.raises(TypeError, match="Stream"):
        runtime.set_cur_stream("stream 1")
