// onednn.cc - engine/stream singletons and the bounded, mutex-guarded primitive cache.
#include "kernels/cpu/onednn.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/parallel.h"

namespace kiln::cpu {

dnnl::engine& OnednnEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::primitive_attr ConcurrentAttr(dnnl::primitive_attr attr) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

namespace {

// The scratchpad a primitive made with ConcurrentAttr needs, in this thread's buffer (grown as
// needed, kept for the next call); none (the args unchanged) for one that owns its own.
const std::unordered_map<int, dnnl::memory>* WithScratchpad(
    const dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args,
    std::unordered_map<int, dnnl::memory>& storage) {
  const_dnnl_memory_desc_t md =
      dnnl_primitive_desc_query_md(prim.get_primitive_desc(), dnnl_query_scratchpad_md, 0);
  const size_t size = md ? dnnl_memory_desc_get_size(md) : 0;
  if (size == 0) return &args;
  thread_local std::vector<uint8_t> buffer;
  if (buffer.size() < size + 64) buffer.resize(size + 64);
  void* aligned = buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64;
  dnnl_memory_desc_t copy = nullptr;
  dnnl_memory_desc_clone(&copy, md);
  storage = args;
  storage[DNNL_ARG_SCRATCHPAD] = dnnl::memory(dnnl::memory::desc(copy), OnednnEngine(), aligned);
  return &storage;
}

}  // namespace

void OnednnExecute(const dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args) {
  // A stream is not thread-safe, and eager ops run from any Python thread (data loading,
  // serving): one per thread.
  thread_local dnnl::stream stream(OnednnEngine());
  std::unordered_map<int, dnnl::memory> storage;
  const auto* all = WithScratchpad(prim, args, storage);
  RunInPool([&] {
    prim.execute(stream, *all);
    stream.wait();
  });
}

dnnl::memory::data_type OnednnType(DType dtype) {
  using dt = dnnl::memory::data_type;
  switch (dtype) {
    case DType::Float32:
      return dt::f32;
    case DType::BFloat16:
      return dt::bf16;
    case DType::Float16:
      return dt::f16;
    case DType::Int32:
      return dt::s32;
    case DType::Int8:
      return dt::s8;
    case DType::UInt8:
      return dt::u8;
    default:
      return dt::undef;
  }
}

bool OnednnHasNativeBF16() {
  static const bool native = [] {
    auto isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_fp16 ||
           isa == dnnl::cpu_isa::avx512_core_amx || isa == dnnl::cpu_isa::avx512_core_amx_fp16;
  }();
  return native;
}

bool IsReferenceImpl(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
}

bool OnednnBlocksMatMulWeights(int64_t m, int64_t k, int64_t n) {
  if (m <= 0 || k <= 0 || n <= 0) return false;
  using dnnl::memory;
  const auto f32 = memory::data_type::f32;
  const memory::desc src({m, k}, f32, memory::format_tag::ab);
  const memory::desc weights({k, n}, f32, memory::format_tag::any);
  const memory::desc bias({1, n}, f32, memory::format_tag::ab);
  const memory::desc dst({m, n}, f32, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(OnednnEngine(), src, weights, bias, dst);
  return pd.weights_desc().get_inner_nblks() > 0;
}

namespace {

struct KeyHash {
  size_t operator()(const PrimitiveKey& key) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the integers
    for (int64_t v : key) {
      h ^= static_cast<uint64_t>(v);
      h *= 1099511628211ull;
    }
    return h;
  }
};

// Enough for every layer of a large network; clearing on overflow keeps memory bounded when
// shapes keep changing (e.g. variable sequence lengths) without LRU bookkeeping on the hot path.
constexpr size_t kMaxEntries = 4096;

struct Cache {
  std::mutex mutex;
  std::unordered_map<PrimitiveKey, std::shared_ptr<void>, KeyHash> entries;
  OnednnCacheStats stats;
};

Cache& GlobalCache() {
  static Cache* cache = new Cache();  // never destroyed: primitives may outlive static teardown
  return *cache;
}

}  // namespace

namespace detail {

std::shared_ptr<void> CacheLookup(const PrimitiveKey& key,
                                  const std::function<std::shared_ptr<void>()>& create) {
  Cache& cache = GlobalCache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.entries.find(key);
    if (it != cache.entries.end()) {
      cache.stats.hits++;
      return it->second;
    }
  }
  // Created outside the lock: creation is slow and may itself run parallel work.
  std::shared_ptr<void> value = create();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.stats.misses++;
  if (cache.entries.size() >= kMaxEntries) cache.entries.clear();
  cache.entries.emplace(key, value);
  return value;
}

}  // namespace detail

OnednnCacheStats GetOnednnCacheStats() {
  Cache& cache = GlobalCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  OnednnCacheStats stats = cache.stats;
  stats.size = static_cast<int64_t>(cache.entries.size());
  return stats;
}

void ClearOnednnCache() {
  Cache& cache = GlobalCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.entries.clear();
  cache.stats = OnednnCacheStats{};
}

int64_t LayoutHash(const dnnl::memory::desc& desc) {
  uint64_t fnv = 1469598103934665603ull;  // FNV-1a wraps: unsigned (signed overflow is UB)
  for (const auto& part :
       {desc.get_padded_dims(), desc.get_strides(), desc.get_inner_blks(), desc.get_inner_idxs()}) {
    for (int64_t v : part) fnv = (fnv ^ static_cast<uint64_t>(v)) * 1099511628211ull;
    fnv = (fnv ^ 0xffu) * 1099511628211ull;  // a separator, so parts cannot run together
  }
  return static_cast<int64_t>(fnv);
}

}  // namespace kiln::cpu
