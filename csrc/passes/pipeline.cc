// pipeline.cc - which passes each jit_level runs, in order. Read top to bottom.
#include "core/error.h"
#include "passes/passes.h"

namespace kiln::passes {

namespace {

const std::vector<PassInfo>& AllPasses() {
  static const std::vector<PassInfo> kPasses = {
      {"dce", DeadCodeElimination},
  };
  return kPasses;
}

}  // namespace

std::vector<PassInfo> PipelineFor(const std::string& level) {
  KILN_CHECK(level == "O0" || level == "O1" || level == "O2", Value,
             "jit_level must be O0, O1 or O2, got '", level, "'");
  // O0: only what correctness needs. O1 and O2 add optimizations as they are written
  // (CSE, folding, fusion, memory planning: the optimizer issue).
  return {{"dce", DeadCodeElimination}};
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
