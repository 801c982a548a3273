// allocator.cc - the caching allocator behind every tensor that kiln owns.
#include "core/allocator.h"

#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace kiln {
namespace {

constexpr size_t kLargeStep = size_t{1} << 20;
// Blocks above this are returned to the system at once: caching them would pin too much memory.
constexpr size_t kMaxCachedBlock = size_t{1} << 30;

size_t RoundSize(size_t nbytes) {
  if (nbytes == 0) nbytes = 1;
  if (nbytes >= kLargeStep) return (nbytes + kLargeStep - 1) / kLargeStep * kLargeStep;
  size_t size = kAlignment;
  while (size < nbytes) size <<= 1;
  return size;
}

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  AllocatorStats stats;
};

Cache& GlobalCache() {
  static Cache* cache = new Cache();  // never destroyed: tensors may outlive static teardown
  return *cache;
}

// RAM plus nothing: with overcommit the system hands out address space it cannot back, and
// the process is killed when the pages are touched; a request past the machine's memory is
// refused up front instead, as a MemoryError the user can catch.
size_t PhysicalMemoryBytes() {
  static const size_t bytes = [] {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page)
                                 : SIZE_MAX / 2;
  }();
  return bytes;
}

[[noreturn]] void ThrowOutOfMemory(size_t nbytes, const char* why) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::ostringstream out;
  out.precision(3);
  out << "cannot allocate " << static_cast<double>(nbytes) / kGiB << " GiB (" << nbytes
      << " bytes): " << why << " (this machine has "
      << static_cast<double>(PhysicalMemoryBytes()) / kGiB << " GiB)";
  throw Error(ErrorKind::Memory, out.str());
}

}  // namespace

void* AllocateBytes(size_t nbytes, size_t* rounded_size) {
  if (nbytes > PhysicalMemoryBytes()) ThrowOutOfMemory(nbytes, "more than the machine's memory");
  size_t size = RoundSize(nbytes);
  *rounded_size = size;
  Cache& cache = GlobalCache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.free_blocks.find(size);
    cache.stats.allocated_bytes += size;
    if (cache.stats.allocated_bytes > cache.stats.peak_allocated_bytes)
      cache.stats.peak_allocated_bytes = cache.stats.allocated_bytes;
    if (it != cache.free_blocks.end() && !it->second.empty()) {
      void* ptr = it->second.back();
      it->second.pop_back();
      cache.stats.cached_bytes -= size;
      return ptr;
    }
    cache.stats.system_allocations++;
    const int64_t reserved = cache.stats.allocated_bytes + cache.stats.cached_bytes;
    if (reserved > cache.stats.peak_reserved_bytes) cache.stats.peak_reserved_bytes = reserved;
  }
  void* ptr = std::aligned_alloc(kAlignment, size);
  if (ptr == nullptr) {
    EmptyCache();
    ptr = std::aligned_alloc(kAlignment, size);
  }
  if (ptr == nullptr) {
    std::lock_guard<std::mutex> lock(GlobalCache().mutex);
    GlobalCache().stats.allocated_bytes -= size;
    ThrowOutOfMemory(nbytes, "the system refused");
  }
  return ptr;
}

void FreeBytes(void* ptr, size_t rounded_size) {
  Cache& cache = GlobalCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.stats.allocated_bytes -= rounded_size;
  if (rounded_size > kMaxCachedBlock) {
    std::free(ptr);
    return;
  }
  cache.free_blocks[rounded_size].push_back(ptr);
  cache.stats.cached_bytes += rounded_size;
}

void EmptyCache() {
  Cache& cache = GlobalCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (auto& [size, blocks] : cache.free_blocks) {
    for (void* ptr : blocks) std::free(ptr);
    blocks.clear();
  }
  cache.stats.cached_bytes = 0;
}

AllocatorStats GetAllocatorStats() {
  std::lock_guard<std::mutex> lock(GlobalCache().mutex);
  return GlobalCache().stats;
}

void ResetPeakAllocated() {
  std::lock_guard<std::mutex> lock(GlobalCache().mutex);
  GlobalCache().stats.peak_allocated_bytes = GlobalCache().stats.allocated_bytes;
}

void ResetPeakReserved() {
  std::lock_guard<std::mutex> lock(GlobalCache().mutex);
  AllocatorStats& stats = GlobalCache().stats;
  stats.peak_reserved_bytes = stats.allocated_bytes + stats.cached_bytes;
}

}  // namespace kiln
