// passes.h - graph passes and the pipeline that runs them by jit_level.
//
// A pass rewrites a Module in place and leaves it verified-valid; RunPipeline lists the passes
// of each level in order and can verify after each one (tests always do).
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace kiln::passes {

// Removes nodes whose results nobody uses and that have no side effect (print, raise, in-place
// updates, random draws, and if/while/call of functions that have one), then functions that are
// no longer called.
void DeadCodeElimination(ir::Module& module);

// Runs op nodes whose inputs are all constants at compile time (not random or mutating ones).
void FoldConstants(ir::Module& module);
// Redirects duplicate computations (same op, attributes, inputs; equal constants) to the first.
void CommonSubexpressionElimination(ir::Module& module);
// Algebraic identities (x * 1, double transposes/reshapes/casts/negations, ...) whose result keeps
// its type; uses are redirected and dead nodes are left for DCE.
void Simplify(ir::Module& module);
// Folds float32 scaled dot-product attention (matmul, scale, mask add, softmax, matmul) whose
// intermediates have a single user into one fused_attention node.
void FuseAttention(ir::Module& module);
// Folds a float32 matmul's epilogue (bias add, relu/sigmoid/tanh/tanh-gelu, or a residual add)
// into one fused_matmul node when each intermediate value has a single user.
void FuseEpilogue(ir::Module& module);
// A fused optimizer update (apply_momentum/sgd/adam) whose float32 gradient is only a cast of a
// bfloat16/float16 one reads that one directly (the update converts as it reads).
void AbsorbGradCasts(ir::Module& module);
// Outlines chains of elementwise ops of one static shape into `@fused_elementwise*` functions
// the executor runs as one chunked pass over memory.
void FuseElementwise(ir::Module& module);
// Marks float32 products by entry-function parameters the function cannot write (weights) with
// pack_weight, so their kernel reads a copy packed once into its fastest layout.
void PackWeights(ir::Module& module);

// Moves each all_reduce_start (and the pure nodes feeding it) to just after the last value it
// needs, so gradient buckets are reduced while the backward pass still runs; collectives keep
// their relative order.
void ScheduleCollectives(ir::Module& module);

struct PassInfo {
  const char* name;
  void (*run)(ir::Module&);
};

// The passes of a jit level, in order: "O0" (only what correctness needs), "O1", "O2".
std::vector<PassInfo> PipelineFor(const std::string& level);
// Runs one pass by name; throws ValueError for an unknown name.
void RunPass(ir::Module& module, const std::string& name);
// Runs the level's pipeline; with verify_each the verifier checks the module after every pass.
void RunPipeline(ir::Module& module, const std::string& level, bool verify_each);

}  // namespace kiln::passes
