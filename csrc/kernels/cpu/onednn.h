// onednn.h - the oneDNN engine and stream, and the primitive cache every oneDNN-backed op uses.
//
// Creating a oneDNN primitive costs ~200 us (descriptor checks, JIT code selection); running a
// small one costs a few. Eager calls therefore key each primitive by everything that shaped it
// (op, dims, strides, dtypes, attributes) and build it once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"

namespace kiln::cpu {

dnnl::engine& OnednnEngine();

// Runs `prim` to completion on this thread's stream, in kiln's pool (core/parallel.h).
void OnednnExecute(const dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args);
// Attributes for a primitive that is cached and so may run on several threads at once: its
// scratchpad is the caller's (OnednnExecute passes a per-thread one) instead of one buffer the
// primitive owns, which concurrent runs would share (a crash found by running one loaded model
// from several threads). `attr` is modified and returned.
dnnl::primitive_attr ConcurrentAttr(dnnl::primitive_attr attr = {});

// The oneDNN data type of `dtype`; memory::data_type::undef when oneDNN has none.
dnnl::memory::data_type OnednnType(DType dtype);
// True when this CPU runs bfloat16 primitives natively (avx512_bf16 / AMX); otherwise kiln
// computes bfloat16 in float32 rather than take oneDNN's slow emulation.
bool OnednnHasNativeBF16();

// A cache key: a flat list of integers (a PrimitiveTag, then dims/strides/flags), cheap to hash.
using PrimitiveKey = std::vector<int64_t>;

// The first integer of every PrimitiveKey: the kind of entry the key is for. One list, so keys of
// two kinds never compare equal (the cache hands an entry back cast to its kind's type; conv and
// fused matmul keys once both began with 2 and could have matched at the same length).
enum class PrimitiveTag : int64_t {
  MatMul = 1,
  FusedMatMul,
  Conv,
  ConvBackwardData,
  ConvBackwardWeights,
};

struct OnednnCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t size = 0;
};
OnednnCacheStats GetOnednnCacheStats();
void ClearOnednnCache();

namespace detail {
// Returns the cached object for `key`, calling `create` on a miss; thread-safe.
std::shared_ptr<void> CacheLookup(const PrimitiveKey& key,
                                  const std::function<std::shared_ptr<void>()>& create);
}  // namespace detail

// The cached `Entry` for `key`, made by `create()` (returning an Entry) on the first use.
template <typename Entry, typename Create>
std::shared_ptr<Entry> CachedPrimitive(const PrimitiveKey& key, Create&& create) {
  return std::static_pointer_cast<Entry>(detail::CacheLookup(
      key, [&]() -> std::shared_ptr<void> { return std::make_shared<Entry>(create()); }));
}

// A hash of the blocking that defines a layout (padded dims, outer strides, inner blocks and
// their dims): part of the key of a copy cached in that layout (derived_cache.h).
int64_t LayoutHash(const dnnl::memory::desc& desc);

// True when oneDNN picked its reference (scalar, unblocked) implementation: a layout it cannot
// run fast, so the caller should make the operands contiguous instead.
bool IsReferenceImpl(const dnnl::primitive_desc_base& pd);

// True when, free to choose (format_tag::any), oneDNN's float32 matmul with bias for (m, k) x
// (k, n) reads its weights in a blocked layout. Without AVX-512 it picks a plain one, which is
// no faster than the weights as given, so a packed copy would only cost memory (and, measured
// on AVX2, a plain row-major copy reads slower than a dense layer's transposed view).
bool OnednnBlocksMatMulWeights(int64_t m, int64_t k, int64_t n);

}  // namespace kiln::cpu
