// fuzz_model.cc - libFuzzer target: model file bytes -> load (engine/model_file.h) -> run.
//
// Any input may be rejected, but only with a kiln::Error. A file that loads must verify (the
// loader runs ir::Verify), print as IR that parses back the same, save to bytes that load to
// the same module, and run on ones-filled inputs when its values are small and static (the
// checks of ir_input_check.h). Seeds: exports of tiny networks (make_model_corpus.py).
// Build and run: `make fuzz-model-short` (scripts/fuzz_ir.sh with FUZZ_TARGET=model).
#include <cstdio>
#include <exception>
#include <stdexcept>

#include "core/parallel.h"
#include "engine/model_file.h"
#include "ir_input_check.h"

namespace {

void CheckModelInput(const std::string& bytes) {
  kiln::engine::SavedModel saved;
  try {
    saved = kiln::engine::ParseModel(bytes);
  } catch (const kiln::Error&) {
    return;  // rejected with a clear error: fine
  }
  kiln::fuzz::CheckRoundTrip(saved.module);
  const std::string again = kiln::engine::SerializeModel(saved.module, saved.weights);
  if (kiln::ir::Print(kiln::engine::ParseModel(again).module) != kiln::ir::Print(saved.module))
    throw std::logic_error("a loaded model saves to a different one");
  if (!kiln::fuzz::WorthRunning(saved.module)) return;
  try {
    kiln::fuzz::RunOnOnes(saved.module);
  } catch (const kiln::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::SetNumThreads(1);  // one thread: reproducible runs
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    CheckModelInput(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: %s\n", e.what());
    std::abort();
  }
  return 0;
}
