// fuzz_ckpt.cc - libFuzzer target: bytes -> MindSpore .ckpt parser (engine/checkpoint_file.h).
//
// The checks are in checkpoint_input_check.h (shared with the ctest that replays past findings).
// Seeds: tests/fuzz/corpus_ckpt (files MindSpore 2.10 and kiln wrote). Build and run:
// `FUZZ_TARGET=ckpt scripts/fuzz_ir.sh SECONDS` (only this target and the parser are built).
#include <cstdio>
#include <exception>

#include "checkpoint_input_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    kiln::fuzz::CheckCheckpointInput(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: %s\n", e.what());
    std::abort();
  }
  return 0;
}
