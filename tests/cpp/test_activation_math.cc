// test_activation_math.cc - the vectorizable float tanh, sigmoid and expm1 against double libm.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>

#include "kernels/cpu/activation_math.h"

namespace kiln {
namespace {

// |got - want| in units of the float spacing at want.
double UlpError(float got, double want) {
  const float at = static_cast<float>(std::fabs(want));
  const double spacing = std::nextafter(at, std::numeric_limits<float>::infinity()) - at;
  return std::fabs(static_cast<double>(got) - want) / spacing;
}

// The largest UlpError of f against the double reference over [lo, hi] in steps of `step`,
// with the x where it occurs.
template <typename F, typename Ref>
std::pair<double, float> WorstUlp(F f, Ref ref, double lo, double hi, double step) {
  std::pair<double, float> worst{0.0, 0.0f};
  for (double v = lo; v <= hi; v += step) {
    const float x = static_cast<float>(v);
    const double error = UlpError(f(x), ref(static_cast<double>(x)));
    if (error > worst.first) worst = {error, x};
  }
  return worst;
}

TEST(ActivationMath, TanhWithinFourUlpAcrossTheRange) {
  const auto [worst, at] =
      WorstUlp(cpu::TanhF, [](double x) { return std::tanh(x); }, -12.0, 12.0, 1e-5);
  EXPECT_LE(worst, 4.0) << "at x = " << at;
}

TEST(ActivationMath, TanhNearZeroKeepsRelativeAccuracy) {
  for (float x = 1e-30f; x < 0.7f; x *= 1.37f) {
    EXPECT_LE(UlpError(cpu::TanhF(x), std::tanh(static_cast<double>(x))), 4.0) << x;
    EXPECT_EQ(cpu::TanhF(-x), -cpu::TanhF(x)) << x;
  }
  EXPECT_EQ(cpu::TanhF(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(cpu::TanhF(-0.0f)));
}

TEST(ActivationMath, TanhSaturatesAndKeepsNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(cpu::TanhF(9.5f), 1.0f);
  EXPECT_EQ(cpu::TanhF(-50.0f), -1.0f);
  EXPECT_EQ(cpu::TanhF(inf), 1.0f);
  EXPECT_EQ(cpu::TanhF(-inf), -1.0f);
  EXPECT_TRUE(std::isnan(cpu::TanhF(std::numeric_limits<float>::quiet_NaN())));
}

TEST(ActivationMath, SigmoidWithinFourUlpAndSaturates) {
  const auto [worst, at] = WorstUlp(
      cpu::SigmoidF, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, -80.0, 30.0, 1e-4);
  EXPECT_LE(worst, 4.0) << "at x = " << at;
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(cpu::SigmoidF(inf), 1.0f);
  EXPECT_EQ(cpu::SigmoidF(-inf), 0.0f);
  EXPECT_EQ(cpu::SigmoidF(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(cpu::SigmoidF(std::numeric_limits<float>::quiet_NaN())));
}

TEST(ActivationMath, Expm1WithinSixUlpKeepsTinyValuesAndSaturates) {
  const auto [worst, at] =
      WorstUlp(cpu::ExpM1F, [](double x) { return std::expm1(x); }, -20.0, 20.0, 1e-5);
  EXPECT_LE(worst, 6.0) << "at x = " << at;
  for (float x = 1e-30f; x < 1.0f; x *= 1.37f) {  // relative accuracy near zero, both signs
    EXPECT_LE(UlpError(cpu::ExpM1F(x), std::expm1(static_cast<double>(x))), 6.0) << x;
    EXPECT_LE(UlpError(cpu::ExpM1F(-x), std::expm1(-static_cast<double>(x))), 6.0) << -x;
  }
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(cpu::ExpM1F(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(cpu::ExpM1F(-0.0f)));
  EXPECT_EQ(cpu::ExpM1F(-100.0f), -1.0f);
  EXPECT_EQ(cpu::ExpM1F(-inf), -1.0f);
  EXPECT_EQ(cpu::ExpM1F(100.0f), inf);
  EXPECT_TRUE(std::isnan(cpu::ExpM1F(std::numeric_limits<float>::quiet_NaN())));
}

TEST(ActivationMath, DoubleVersionsAreTheLibrarys) {
  EXPECT_EQ(cpu::Tanh(0.3), std::tanh(0.3));
  EXPECT_EQ(cpu::Sigmoid(-2.0), 1.0 / (1.0 + std::exp(2.0)));
}

}  // namespace
}  // namespace kiln
