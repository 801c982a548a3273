// test_vector_libm.cc - the vector math functions (glibc's libmvec) against double libm.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/vector_libm.h"

namespace kiln {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// |got - want| in units of the float spacing at want (0 when both are the same non-finite).
double UlpError(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0.0 : kInf;
  if (std::isinf(want)) return static_cast<double>(got) == want ? 0.0 : kInf;
  const float at = static_cast<float>(std::fabs(want));
  const double spacing = std::nextafter(at, kInf) - at;
  return std::fabs(static_cast<double>(got) - want) / spacing;
}

// Evaluates f over `x` in one plain loop, the shape the kernels' loops have, so the vector
// versions run (all but the tail), and returns the worst error against ref in double.
template <typename F, typename Ref>
double WorstOver(const std::vector<float>& x, F f, Ref ref, float* worst_at) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double error = UlpError(y[i], ref(static_cast<double>(x[i])));
    if (error > worst) {
      worst = error;
      *worst_at = x[i];
    }
  }
  return worst;
}

std::vector<float> Linspace(float lo, float hi, int n) {
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = lo + (hi - lo) * static_cast<float>(i) / (n - 1);
  return x;
}

// Magnitudes from 1e-30 to 1e30 and their negatives, then the special values.
std::vector<float> Spread() {
  std::vector<float> x;
  for (float v = 1e-30f; v < 1e30f; v *= 1.1f) {
    x.push_back(v);
    x.push_back(-v);
  }
  for (float v : {0.0f, -0.0f, kInf, -kInf, kNaN, 1e-40f, -1e-40f, 1.0f, -1.0f}) x.push_back(v);
  return x;
}

#define EXPECT_WITHIN_ULP(x, kiln_fn, std_fn, bound)                                               \
  do {                                                                                             \
    float at = 0.0f;                                                                               \
    const double worst = WorstOver(                                                                \
        x, [](float v) { return cpu::kiln_fn(v); }, [](double v) { return std::std_fn(v); }, &at); \
    EXPECT_LE(worst, bound) << #kiln_fn << " at x = " << at;                                       \
  } while (0)

TEST(VectorLibm, TrigonometricWithinFourUlp) {
  const std::vector<float> x = Linspace(-100.0f, 100.0f, 200001);
  EXPECT_WITHIN_ULP(x, VecSin, sin, 4.0);
  EXPECT_WITHIN_ULP(x, VecCos, cos, 4.0);
  EXPECT_WITHIN_ULP(x, VecTan, tan, 4.0);
  EXPECT_WITHIN_ULP(x, VecAtan, atan, 4.0);
  const std::vector<float> unit = Linspace(-1.0f, 1.0f, 200001);
  EXPECT_WITHIN_ULP(unit, VecAsin, asin, 4.0);
  EXPECT_WITHIN_ULP(unit, VecAcos, acos, 4.0);
  EXPECT_WITHIN_ULP(unit, VecAtanh, atanh, 4.0);
}

TEST(VectorLibm, HyperbolicWithinFourUlp) {
  const std::vector<float> x = Linspace(-20.0f, 20.0f, 200001);
  EXPECT_WITHIN_ULP(x, VecSinh, sinh, 4.0);
  EXPECT_WITHIN_ULP(x, VecCosh, cosh, 4.0);
  EXPECT_WITHIN_ULP(x, VecAsinh, asinh, 4.0);
  EXPECT_WITHIN_ULP(Linspace(1.0f, 1000.0f, 200001), VecAcosh, acosh, 4.0);
}

TEST(VectorLibm, ErrorFunctionsWithinFourUlp) {
  const std::vector<float> x = Linspace(-10.0f, 10.0f, 200001);
  EXPECT_WITHIN_ULP(x, VecErf, erf, 4.0);
  EXPECT_WITHIN_ULP(x, VecErfc, erfc, 4.0);
}

TEST(VectorLibm, LogarithmsWithinFourUlpOnEveryScale) {
  std::vector<float> x = Linspace(0.0f, 100.0f, 200001);
  for (float v = 1e-38f; v < 3e38f; v *= 1.01f) x.push_back(v);
  EXPECT_WITHIN_ULP(x, VecLog, log, 4.0);
  EXPECT_WITHIN_ULP(x, VecLog1p, log1p, 4.0);
  EXPECT_WITHIN_ULP(Linspace(-0.999f, 0.0f, 100001), VecLog1p, log1p, 4.0);
}

TEST(VectorLibm, SpecialValuesAsLibm) {
  const std::vector<float> x = Spread();
  EXPECT_WITHIN_ULP(x, VecSin, sin, 4.0);  // NaN for +-inf
  EXPECT_WITHIN_ULP(x, VecAtan, atan, 4.0);
  EXPECT_WITHIN_ULP(x, VecErf, erf, 4.0);  // +-1 at +-inf
  EXPECT_WITHIN_ULP(x, VecLog, log, 4.0);  // NaN below 0, -inf at 0
  EXPECT_WITHIN_ULP(x, VecLog1p, log1p, 4.0);
  EXPECT_WITHIN_ULP(x, VecTanh, tanh, 4.0);
  EXPECT_WITHIN_ULP(x, VecSinh, sinh, 4.0);  // overflow to +-inf
}

TEST(VectorLibm, PowWithinFourUlp) {
  const std::vector<float> base = Linspace(0.0f, 50.0f, 100001);
  std::vector<float> exponent(base.size()), y(base.size());
  for (size_t i = 0; i < base.size(); ++i) exponent[i] = 2.5f - 0.01f * static_cast<float>(i % 500);
  for (size_t i = 0; i < base.size(); ++i) y[i] = cpu::VecPow(base[i], exponent[i]);
  for (size_t i = 0; i < base.size(); ++i) {
    const double want = std::pow(static_cast<double>(base[i]), static_cast<double>(exponent[i]));
    ASSERT_LE(UlpError(y[i], want), 4.0) << base[i] << " ** " << exponent[i];
  }
  EXPECT_TRUE(std::isnan(cpu::VecPow(-2.0f, 0.5f)));
  EXPECT_EQ(cpu::VecPow(-2.0f, 3.0f), -8.0f);
  EXPECT_EQ(cpu::VecPow(0.0f, 0.0f), 1.0f);
  EXPECT_EQ(cpu::VecPow(0.0f, -1.0f), kInf);
}

TEST(VectorLibm, DoubleVersionsAgreeWithLibm) {
  std::vector<double> x(4096), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = -8.0 + 16.0 * static_cast<double>(i) / 4095;
  for (size_t i = 0; i < x.size(); ++i) y[i] = cpu::VecErf(x[i]) + cpu::VecSin(x[i]);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(y[i], std::erf(x[i]) + std::sin(x[i]), 1e-14) << x[i];
}

}  // namespace
}  // namespace kiln
