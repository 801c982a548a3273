// pipeline.cc - which passes each jit_level runs, in order. Read top to bottom.
#include "core/error.h"
#include "passes/passes.h"

namespace kiln::passes {

namespace {

const std::vector<PassInfo>& AllPasses() {
  static const std::vector<PassInfo> kPasses = {
      {"dce", DeadCodeElimination},
      {"fold", FoldConstants},
      {"cse", CommonSubexpressionElimination},
      {"simplify", Simplify},
      {"absorb_grad_casts", AbsorbGradCasts},
      {"fuse_attention", FuseAttention},
      {"fuse_epilogue", FuseEpilogue},
      {"fuse_elementwise", FuseElementwise},
      {"pack_weights", PackWeights},
      {"schedule_collectives", ScheduleCollectives},
  };
  return kPasses;
}

}  // namespace

std::vector<PassInfo> PipelineFor(const std::string& level) {
  KILN_CHECK(level == "O0" || level == "O1" || level == "O2", Value,
             "jit_level must be O0, O1 or O2, got '", level, "'");
  // O0: only what correctness needs. O1 (the default): the rewrites every graph gains from.
  // O2 adds fuse_attention, whose tiled kernel computes the chain it replaces in another order
  // (online softmax), so values differ from O1's by float32 rounding; it must run before
  // fuse_epilogue, which would take the mask add as a residual.
  // schedule_collectives runs at every level: without it a bucket's all-reduce would start only
  // after the whole backward pass (it moves nodes; it never changes what they compute).
  if (level == "O0")
    return {{"dce", DeadCodeElimination}, {"schedule_collectives", ScheduleCollectives}};
  std::vector<PassInfo> passes = {{"fold", FoldConstants},
                                  {"simplify", Simplify},
                                  {"cse", CommonSubexpressionElimination},
                                  {"absorb_grad_casts", AbsorbGradCasts}};
  if (level == "O2") passes.push_back({"fuse_attention", FuseAttention});
  for (const PassInfo& p : std::vector<PassInfo>{{"fuse_epilogue", FuseEpilogue},
                                                 {"fuse_elementwise", FuseElementwise},
                                                 {"pack_weights", PackWeights},
                                                 {"dce", DeadCodeElimination},
                                                 {"schedule_collectives", ScheduleCollectives}})
    passes.push_back(p);
  return passes;
}

void RunPass(ir::Module& module, const std::string& name) {
  for (const auto& p : AllPasses()) {
    if (name == p.name) {
      p.run(module);
      return;
    }
  }
  Throw(ErrorKind::Value, "unknown pass '", name, "'");
}

void RunPipeline(ir::Module& module, const std::string& level, bool verify_each) {
  for (const auto& p : PipelineFor(level)) {
    p.run(module);
    if (verify_each) ir::Verify(module);
  }
}

}  // namespace kiln::passes
