// test_fuzz_regressions.cc - every input the IR, model-file and .ckpt fuzzers ever failed on,
// replayed (ir_input_check.h, model_input_check.h, checkpoint_input_check.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../fuzz/checkpoint_input_check.h"
#include "../fuzz/ir_input_check.h"
#include "../fuzz/model_input_check.h"

namespace kiln {
namespace {

TEST(FuzzRegressions, EveryPastIRCrashIsNowAnErrorOrARun) {
  const std::filesystem::path dir =
      std::filesystem::path(KILN_SOURCE_DIR) / "tests/fuzz/regressions_ir";
  int replayed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NO_THROW(fuzz::CheckIRInput(text.str())) << entry.path();
    ++replayed;
  }
  EXPECT_GT(replayed, 0) << "no inputs in " << dir;
}

TEST(FuzzRegressions, EveryPastModelFileFindingIsNowAnErrorOrARun) {
  const std::filesystem::path dir =
      std::filesystem::path(KILN_SOURCE_DIR) / "tests/fuzz/regressions_model";
  int replayed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    EXPECT_NO_THROW(fuzz::CheckModelInput(bytes.str())) << entry.path();
    ++replayed;
  }
  EXPECT_GT(replayed, 0) << "no inputs in " << dir;
}

TEST(FuzzRegressions, EveryPastCheckpointFindingIsNowAnErrorOrALoad) {
  const std::filesystem::path dir =
      std::filesystem::path(KILN_SOURCE_DIR) / "tests/fuzz/regressions_ckpt";
  int replayed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    EXPECT_NO_THROW(fuzz::CheckCheckpointInput(bytes.str())) << entry.path();
    ++replayed;
  }
  EXPECT_GT(replayed, 0) << "no inputs in " << dir;
}

}  // namespace
}  // namespace kiln
