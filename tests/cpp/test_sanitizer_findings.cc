// test_sanitizer_findings.cc - what `make asan` (ASan + UBSan) found, so it stays fixed there.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/cpu/normalization.h"

namespace kiln {
namespace {

// GELU's ExpF built 2^n by shifting a signed int that is negative for NaN: undefined behaviour
// UBSan stopped on (gelu of a NaN in the Python suite).
TEST(SanitizerFindings, ExpFOfNaNIsNaNWithoutUndefinedShifts) {
  EXPECT_TRUE(std::isnan(cpu::ExpF(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(cpu::ExpF(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_FLOAT_EQ(cpu::ExpF(1.0f), std::exp(1.0f));
}

}  // namespace
}  // namespace kiln
