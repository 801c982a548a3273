// fuzz_ir.cc - libFuzzer target: IR text -> parse -> verify -> print round trip -> run.
//
// Any input may be rejected, but only with a kiln::Error (a clear Python exception for users);
// a crash, a sanitizer report, another exception type or a print that does not parse back the
// same is a finding. Modules that verify are run on ones-filled inputs when every value is small
// and static and there is no `while` (a fuzzed loop need not end), so the executor and kernels
// are fuzzed too. Build and run: `make fuzz-ir-short` (docs/reliability.md).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/ir.h"
#include "kernels/cpu/copy.h"
#include "runtime/executor.h"

namespace {

using kiln::ir::Module;

// Running is bounded by sizes, not time: each value at most this many elements.
constexpr int64_t kMaxRunElements = 1 << 12;

bool SmallStatic(const kiln::TensorMeta& meta) {
  int64_t n = 1;
  for (int64_t d : meta.shape) {
    if (d < 0 || d > kMaxRunElements) return false;
    n *= d;
    if (n > kMaxRunElements) return false;
  }
  return true;
}

bool WorthRunning(const Module& module) {
  for (const auto& f : module.funcs()) {
    for (const auto& p : f->params)
      if (!SmallStatic(p)) return false;
    for (const auto& node : f->nodes) {
      if (node.kind == kiln::ir::NodeKind::While) return false;
      for (const auto& out : node.outputs)
        if (!SmallStatic(out)) return false;
    }
  }
  return true;
}

void RunOnOnes(const Module& module) {
  std::vector<kiln::Tensor> inputs;
  for (const auto& p : module.entry().params) {
    kiln::Tensor t = kiln::Tensor::Empty(p.shape, p.dtype);
    kiln::cpu::Fill(t, 1.0);
    inputs.push_back(t);
  }
  kiln::Run(module, inputs);
}

// A printed module must parse back and print the same: otherwise saved IR silently changes.
void CheckRoundTrip(const Module& module) {
  std::string printed = kiln::ir::Print(module);
  std::string again = kiln::ir::Print(kiln::ir::Parse(printed));
  if (again != printed) {
    std::fprintf(stderr, "round trip differs:\n%s\n---- reprinted ----\n%s\n", printed.c_str(),
                 again.c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("OMP_NUM_THREADS", "1", 0);  // one thread: reproducible runs, no pool start-up per run
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  Module module;
  try {
    module = kiln::ir::Parse(text);
    kiln::ir::Verify(module);
  } catch (const kiln::Error&) {
    return 0;  // rejected with a message: what bad input should get
  }
  CheckRoundTrip(module);
  if (!WorthRunning(module)) return 0;
  try {
    RunOnOnes(module);
  } catch (const kiln::Error&) {
    // a run-time error (raise nodes, value checks) is an answer too
  }
  return 0;
}
