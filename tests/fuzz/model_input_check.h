// model_input_check.h - what the model-file fuzzer checks on one input; shared with the ctest
// that replays every input it ever failed on (tests/fuzz/regressions_model).
//
// Any input may be rejected, but only with a kiln::Error. A file that loads must print as IR
// that parses back the same, save to bytes that load to the same module, and run on ones-filled
// inputs when its values are small and static (ir_input_check.h). A finding escapes as an
// exception that is not a kiln::Error (or as a crash or sanitizer report).
#pragma once

#include <stdexcept>
#include <string>

#include "engine/model_file.h"
#include "ir_input_check.h"

namespace kiln::fuzz {

inline void CheckModelInput(const std::string& bytes) {
  engine::SavedModel saved;
  try {
    saved = engine::ParseModel(bytes);
  } catch (const Error&) {
    return;  // rejected with a clear error: fine
  }
  CheckRoundTrip(saved.module);
  const std::string again = engine::SerializeModel(saved.module, saved.weights);
  if (ir::Print(engine::ParseModel(again).module) != ir::Print(saved.module))
    throw std::logic_error("a loaded model saves to a different one");
  if (!WorthRunning(saved.module)) return;
  try {
    RunOnOnes(saved.module);
  } catch (const Error&) {
  }
}

}  // namespace kiln::fuzz
