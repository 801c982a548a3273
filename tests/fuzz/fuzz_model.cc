// fuzz_model.cc - libFuzzer target: model file bytes -> load (engine/model_file.h) -> run.
//
// The checks are in model_input_check.h (shared with the ctest that replays past findings).
// Seeds: exports of tiny networks (make_model_corpus.py) and a file MindSpore wrote.
// Build and run: `make fuzz-model-short` (scripts/fuzz_ir.sh with FUZZ_TARGET=model).
#include <cstdio>
#include <exception>

#include "core/parallel.h"
#include "model_input_check.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::SetNumThreads(1);  // one thread: reproducible runs
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    kiln::fuzz::CheckModelInput(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: %s\n", e.what());
    std::abort();
  }
  return 0;
}
