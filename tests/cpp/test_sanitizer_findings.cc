// test_sanitizer_findings.cc - what `make asan` (ASan + UBSan) found, so it stays fixed there.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/ir.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/normalization.h"
#include "runtime/executor.h"

namespace kiln {
namespace {

// GELU's ExpF built 2^n by shifting a signed int that is negative for NaN: undefined behaviour
// UBSan stopped on (gelu of a NaN in the Python suite).
TEST(SanitizerFindings, ExpFOfNaNIsNaNWithoutUndefinedShifts) {
  EXPECT_TRUE(std::isnan(cpu::ExpF(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(cpu::ExpF(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_FLOAT_EQ(cpu::ExpF(1.0f), std::exp(1.0f));
}

// The packed-weight cache key hashed oneDNN's layout with FNV-1a in a signed int64, which
// overflows (undefined behaviour; the Python suite's packed dense layers hit it).
TEST(SanitizerFindings, PackedWeightKeyHashHasNoSignedOverflow) {
  const std::string text =
      "func @main(%0: f32[32,64], %1: f32[8,64], %2: f32[8]) -> (f32[32,8]) {\n"
      "  %3 = fused_matmul(%0, %1, %2) {transpose_a=False, transpose_b=True, activation=\"relu\", "
      "pack_weight=True} : f32[32,8]\n"
      "  return %3\n}\n";
  ir::Module m = ir::Parse(text);
  std::vector<Tensor> args = {Tensor::Empty({32, 64}, DType::Float32),
                              Tensor::Empty({8, 64}, DType::Float32),
                              Tensor::Empty({8}, DType::Float32)};
  for (auto& t : args) cpu::Fill(t, 0.5);
  for (int run = 0; run < 2; ++run) {  // the second run finds the packed copy in the cache
    Tensor out = kiln::Run(m, args)[0];
    EXPECT_FLOAT_EQ(out.data<float>()[0], 64 * 0.25f + 0.5f);
  }
}

}  // namespace
}  // namespace kiln
