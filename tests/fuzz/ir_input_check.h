// ir_input_check.h - what the IR fuzzer checks on one input; shared with the ctest that replays
// every input it ever crashed on (tests/fuzz/regressions_ir, tests/cpp/test_fuzz_regressions.cc).
//
// Any input may be rejected, but only with a kiln::Error (a clear Python exception for users).
// A module that verifies must print to text that parses back and prints the same, and is run on
// ones-filled inputs when every value is small and static and there is no `while` (a fuzzed loop
// need not end), so the executor and kernels are checked too; so is the O2 pass pipeline, which
// must leave a valid module. A finding escapes as an exception that is not a kiln::Error (or as
// a crash or sanitizer report).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/ir.h"
#include "kernels/cpu/copy.h"
#include "passes/passes.h"
#include "runtime/executor.h"

namespace kiln::fuzz {

// Running is bounded by sizes, not time: each value at most this many elements.
constexpr int64_t kMaxRunElements = 1 << 12;

inline bool SmallStatic(const TensorMeta& meta) {
  int64_t n = 1;
  for (int64_t d : meta.shape) {
    if (d < 0 || d > kMaxRunElements) return false;
    n *= d;
    if (n > kMaxRunElements) return false;
  }
  return true;
}

inline bool WorthRunning(const ir::Module& module) {
  for (const auto& f : module.funcs()) {
    for (const auto& p : f->params)
      if (!SmallStatic(p)) return false;
    for (const auto& node : f->nodes) {
      if (node.kind == ir::NodeKind::While) return false;
      for (const auto& out : node.outputs)
        if (!SmallStatic(out)) return false;
    }
  }
  return true;
}

// Printed IR must parse back and print the same: otherwise saved IR silently changes.
inline void CheckRoundTrip(const ir::Module& module) {
  std::string printed = ir::Print(module);
  std::string again;
  try {
    again = ir::Print(ir::Parse(printed));
  } catch (const Error& e) {
    throw std::logic_error("printed IR does not parse: " + std::string(e.what()) + "\n" + printed);
  }
  if (again != printed)
    throw std::logic_error("round trip differs:\n" + printed + "---- reprinted ----\n" + again);
}

inline void RunOnOnes(const ir::Module& module) {
  std::vector<Tensor> inputs;
  for (const auto& p : module.entry().params) {
    Tensor t = Tensor::Empty(p.shape, p.dtype);
    cpu::Fill(t, 1.0);
    inputs.push_back(t);
  }
  Run(module, inputs);
}

// The O2 pipeline on a module that verifies may reject it with an Error (folding runs kernels),
// but must leave it valid: a pass that breaks the module is a finding. The result runs too.
inline void CheckPasses(const std::string& printed, bool run) {
  ir::Module optimized = ir::Parse(printed);
  try {
    passes::RunPipeline(optimized, "O2", /*verify_each=*/false);
  } catch (const Error&) {
    return;
  }
  try {
    ir::Verify(optimized);
  } catch (const Error& e) {
    throw std::logic_error("the O2 passes left an invalid module: " + std::string(e.what()) + "\n" +
                           printed);
  }
  if (!run) return;
  try {
    RunOnOnes(optimized);
  } catch (const Error&) {
  }
}

inline void CheckIRInput(const std::string& text) {
  ir::Module module;
  try {
    module = ir::Parse(text);
    ir::Verify(module);
  } catch (const Error&) {
    return;  // rejected with a message: what bad input should get
  }
  CheckRoundTrip(module);
  const bool run = WorthRunning(module);
  if (run) {
    try {
      RunOnOnes(module);
    } catch (const Error&) {
      // a run-time error (raise nodes, value checks) is an answer too
    }
  }
  CheckPasses(ir::Print(module), run);
}

}  // namespace kiln::fuzz
