"""MindSpore's mindspore.runtime on kiln's CPU runtime: memory statistics of kiln's allocator,
synchronization, and the stream and event handles (docs/runtime.md).

kiln runs every op on the host as it is called, so the one stream there is always finished:
synchronizing returns at once, and an event records the moment the work before it ended.
"""
from kiln.runtime.executor import launch_blocking, synchronize
from kiln.runtime.memory import (
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_max_memory_allocated,
    reset_max_memory_reserved,
    reset_peak_memory_stats,
)
from kiln.runtime.stream import (
    Event,
    Stream,
    StreamCtx,
    communication_stream,
    current_stream,
    default_stream,
    set_cur_stream,
)

__all__ = [
    "launch_blocking", "synchronize", "empty_cache", "max_memory_allocated",
    "max_memory_reserved", "memory_allocated", "memory_reserved", "memory_stats",
    "memory_summary", "reset_max_memory_allocated", "reset_max_memory_reserved",
    "reset_peak_memory_stats", "Event", "Stream", "StreamCtx", "communication_stream",
    "current_stream", "default_stream", "set_cur_stream",
]
