// chunking.h - which elementwise work may run chunk by chunk, or in the buffer of its input.
//
// The contract between fuse_elementwise, which outlines groups of elementwise ops into bodies,
// and the executor, which runs a qualifying body as one pass over memory in chunks
// (runtime/fused_elementwise.cc) and lets a single elementwise op write over a dying input.
// Both sides ask these functions, so what the pass builds is what the runner accepts.
#pragma once

#include "ir/ir.h"

namespace kiln::analysis {

// An operand of a chunked body may be the result's shape, one element, or a row as long as the
// result's last dim (leading 1s allowed); all static.
bool FitsElementwiseChunks(const Shape& operand, const Shape& result);

// An op node one chunk of a body can run: an elementwise op (each output element from the
// inputs' elements at the same index) with one output of static shape, whose kernel fills a
// buffer it is given (not a view, not a value-dependent shape), and without effects (an in-place
// write, or a random draw, which chunking would reorder).
bool IsChunkableOp(const ir::Node& node);

// A constant a body may hold: one element, read as a scalar by every chunk.
bool IsChunkableConst(const ir::Node& node);

// `f` may run as one chunked pass: one result, made by its last op node; every node a chunkable
// op of the result's shape or a chunkable constant, with no absent operand; every parameter fits
// the result (FitsElementwiseChunks).
bool IsChunkableBody(const ir::Func& f);

// The executor may give the output of `node` the buffer of an input of the same type that dies
// there: an elementwise op whose kernel fills one given output of static shape.
bool MayWriteOutputOverInput(const ir::Node& node);

}  // namespace kiln::analysis
