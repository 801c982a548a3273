// allocator.cc - the caching allocator behind every tensor that kiln owns.
#include "core/allocator.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

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

}  // namespace

void* AllocateBytes(size_t nbytes, size_t* rounded_size) {
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
  }
  void* ptr = std::aligned_alloc(kAlignment, size);
  if (ptr == nullptr) {
    EmptyCache();
    ptr = std::aligned_alloc(kAlignment, size);
  }
  if (ptr == nullptr) {
    std::lock_guard<std::mutex> lock(GlobalCache().mutex);
    GlobalCache().stats.allocated_bytes -= size;
    throw std::bad_alloc();
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

}  // namespace kiln
