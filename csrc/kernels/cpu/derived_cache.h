// derived_cache.h - values computed from a tensor's bytes (packed weights), kept on its storage.
//
// A compiled graph that multiplies by the same weight on every call packs it once into the
// layout its kernel reads fastest, instead of on every call. The packed copy lives on the
// weight's Storage (it dies with the bytes) and is tagged with the storage's write version, so
// an in-place write (an optimizer step, set_data, a loaded checkpoint) makes it stale.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace kiln::cpu {

// What the value is (a tag, then whatever else distinguishes it, e.g. a layout hash).
using DerivedKey = std::vector<int64_t>;

// The value derived from the view `t` under `key`, made by `make()` when missing or stale; null
// when the caller should compute without it. A value is made only on the second request for
// the same bytes at the same write version — a tensor that is new on every call (an input) or
// written between calls (a weight being trained) never pays for packing — and never for
// storage a writable NumPy array aliases, whose writes kiln cannot see.
std::shared_ptr<void> DerivedLookup(const Tensor& t, const DerivedKey& key,
                                    const std::function<std::shared_ptr<void>()>& make);

// The first integer of every DerivedKey: what the value is. One list, so two kinds of value never
// share a key. kPackRowMajorTag through kConvWeightsTag are a weight packed into a kernel's
// layout (what ForgetPackedCopies forgets): a new packing tag goes inside that range.
constexpr int64_t kPackRowMajorTag = 1;       // a matmul weight copied row-major: {tag}
constexpr int64_t kPackOnednnTag = 2;         // in oneDNN's matmul layout: {tag, LayoutHash}
constexpr int64_t kPackPanelsTag = 3;         // in panel_gemm's panels: {tag}
constexpr int64_t kConvWeightsTag = 4;        // in a convolution's layout: {tag, LayoutHash}
constexpr int64_t kLowPrecisionCopyTag = 16;  // a weight's low-precision copy: {tag, dtype}

// The keys (as callers passed them, without the view part) under `tag` that requests for the
// view `t` have used since its bytes were last replaced: which derived values of t are read.
std::vector<DerivedKey> DerivedKeysFor(const Tensor& t, int64_t tag);

// Stores `value` as the value derived from the view `t` under `key`, made from the bytes the
// storage holds at write version `version`. An update kernel that computes new bytes and their
// derived value in one pass passes the version its own write is about to give (RunKernel marks
// each mutated input written once, after the kernel). Nothing is stored for storage a writable
// NumPy array aliases.
void DerivedStore(const Tensor& t, const DerivedKey& key, uint64_t version,
                  std::shared_ptr<void> value);

// Forgets the packed copies (the pack tags above, not a low-precision copy) of t's storage,
// their sightings included, so that the next request counts as a first one. The executor calls
// it when a graph that writes t starts: such a graph never reads a pack of t after its first
// run, and an evaluation's packs would otherwise stay alive through its first run.
void ForgetPackedCopies(const Tensor& t);

struct DerivedCacheStats {
  int64_t hits = 0;       // requests served by a cached value
  int64_t makes = 0;      // values made (first packs and repacks after writes)
  int64_t skips = 0;      // requests answered with null (first sighting, aliased storage)
  int64_t forgotten = 0;  // packed copies freed by ForgetPackedCopies
};
DerivedCacheStats GetDerivedCacheStats();

}  // namespace kiln::cpu
