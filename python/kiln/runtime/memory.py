"""Memory statistics of kiln's tensor allocator (core/allocator.h): tensors' blocks in use
("allocated"), and those plus the freed blocks kept for reuse ("reserved")."""
from kiln import _C

_GIB = 1024.0 ** 3


def _check_device(device_target, who):
    if device_target not in (None, "CPU"):
        raise ValueError(f"{who}: kiln runs on the CPU; device_target must be None or 'CPU', "
                         f"got {device_target!r}")


def memory_allocated(device_target=None):
    """Bytes held by live tensors now (at the allocator's rounded block sizes)."""
    _check_device(device_target, "memory_allocated")
    return _C.allocator_stats()["allocated_bytes"]


def max_memory_allocated(device_target=None):
    """The most bytes live tensors held since the start or the last reset."""
    _check_device(device_target, "max_memory_allocated")
    return _C.allocator_stats()["peak_allocated_bytes"]


def memory_reserved(device_target=None):
    """Bytes the allocator holds now: live tensors' blocks and freed ones kept for reuse."""
    _check_device(device_target, "memory_reserved")
    stats = _C.allocator_stats()
    return stats["allocated_bytes"] + stats["cached_bytes"]


def max_memory_reserved(device_target=None):
    """The most bytes the allocator held since the start or the last reset."""
    _check_device(device_target, "max_memory_reserved")
    return _C.allocator_stats()["peak_reserved_bytes"]


def memory_stats(device_target=None):
    """The allocator's figures as a dict, under MindSpore's names where one exists."""
    _check_device(device_target, "memory_stats")
    stats = _C.allocator_stats()
    reserved = stats["allocated_bytes"] + stats["cached_bytes"]
    return {
        "total_reserved_memory": reserved,
        "total_allocated_memory": stats["allocated_bytes"],
        "total_idle_memory": stats["cached_bytes"],
        "max_reserved_memory": stats["peak_reserved_bytes"],
        "max_allocated_memory": stats["peak_allocated_bytes"],
        "system_allocations": stats["system_allocations"],
    }


def memory_summary(device_target=None):
    """memory_stats as readable lines."""
    _check_device(device_target, "memory_summary")
    stats = memory_stats()
    lines = ["kiln CPU allocator"]
    for key, value in stats.items():
        shown = f"{value / _GIB:.3f} GiB ({value} bytes)" if key.endswith("memory") else value
        lines.append(f"  {key}: {shown}")
    return "\n".join(lines)


def reset_max_memory_allocated(device_target=None):
    """Starts max_memory_allocated again from the bytes live tensors hold now."""
    _check_device(device_target, "reset_max_memory_allocated")
    _C.reset_peak_allocated()


def reset_max_memory_reserved(device_target=None):
    """Starts max_memory_reserved again from the bytes the allocator holds now."""
    _check_device(device_target, "reset_max_memory_reserved")
    _C.reset_peak_reserved()


def reset_peak_memory_stats(device_target=None):
    """Both resets at once."""
    _check_device(device_target, "reset_peak_memory_stats")
    _C.reset_peak_allocated()
    _C.reset_peak_reserved()


def empty_cache():
    """Returns the freed blocks kept for reuse to the system (memory_reserved drops to
    memory_allocated)."""
    _C.empty_cache()
