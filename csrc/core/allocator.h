// allocator.h - 64-byte-aligned host memory with a size-bucketed cache of freed blocks.
//
// Eager mode allocates an output per op; returning blocks to the operating system and asking
// again costs more than most small kernels, so freed blocks are kept for reuse, bucketed by
// size rounded up to a power of two (or to 1 MiB steps above 1 MiB). EmptyCache() releases them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {

constexpr size_t kAlignment = 64;

struct AllocatorStats {
  int64_t allocated_bytes = 0;  // live blocks handed out, at their rounded sizes
  int64_t cached_bytes = 0;     // freed blocks kept for reuse
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;  // of allocated + cached: what the process holds
  int64_t system_allocations = 0;   // how often the cache missed
};

void* AllocateBytes(size_t nbytes, size_t* rounded_size);
void FreeBytes(void* ptr, size_t rounded_size);
void EmptyCache();
AllocatorStats GetAllocatorStats();
void ResetPeakAllocated();
void ResetPeakReserved();

}  // namespace kiln
