// fused_elementwise.h - runs a function of elementwise ops as one pass over memory.
//
// fuse_elementwise outlines chains of elementwise ops into functions (`@fused_elementwise_N`)
// called from the graph. The executor runs such a call in chunks of a few thousand elements:
// every op of the body runs its own registry kernel on the chunk, intermediates live in small
// per-thread buffers that stay in cache, and only the final value is written to memory. The
// values are exactly those of the unfused ops (the same kernels compute them).
#pragma once

#include <memory>
#include <vector>

#include "ir/ir.h"
#include "ops/registry.h"

namespace kiln {

struct ChunkedFunc;  // a body planned for chunked runs

// The chunked plan of `f`, or null when `f` does not qualify (analysis::IsChunkableBody: one
// result, every node an elementwise op of the result's static shape or a one-element constant,
// every parameter the result's shape, one element, or a row the length of its last dim).
std::shared_ptr<const ChunkedFunc> PlanChunked(const ir::Func& f);

// Runs a qualifying body on `args` (already type-checked by the caller).
Tensor RunChunked(const ChunkedFunc& plan, const std::vector<Tensor>& args);

}  // namespace kiln
