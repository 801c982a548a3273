// fuzz_ir.cc - libFuzzer target: IR text -> parse -> verify -> print round trip -> run.
//
// The checks are in ir_input_check.h (shared with the ctest that replays past crashes). Anything
// but a kiln::Error escaping them aborts, which libFuzzer reports as a crash with its input.
// Build and run: `make fuzz-ir-short` (scripts/fuzz_ir.sh).
#include <cstdio>
#include <exception>

#include "core/parallel.h"
#include "ir_input_check.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::SetNumThreads(1);  // one thread: reproducible runs
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    kiln::fuzz::CheckIRInput(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: %s\n", e.what());
    std::abort();
  }
  return 0;
}
