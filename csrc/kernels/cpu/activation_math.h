// activation_math.h - vectorizable float sigmoid, tanh and expm1.
//
// For the recurrent ops' gate passes and the tanh and expm1 ops. libm's tanhf (through expm1f) and
// expf are calls the compiler cannot vectorize; in the LSTM op's gate passes they took over half of
// a training step's time (perf, LSTM(64, 64), 200 steps). These are branch-free straight-line code
// over ExpF (normalization.h), which GCC and Clang vectorize. Measured against tanh in double over
// every float in [-12, 12] spaced 1e-5 apart (tests/cpp/test_activation_math.cc): within 4 ulp,
// odd, and exactly +-1 from |x| = 9.1.
#pragma once

#include <cmath>

#include "kernels/cpu/normalization.h"
#include "kernels/cpu/vector_libm.h"

namespace kiln::cpu {

inline float SigmoidF(float x) { return 1.0f / (1.0f + ExpF(-x)); }

// Below kTanhSmall, tanh(x) = x * q(x^2) with q a degree-5 polynomial fitted (least squares on
// Chebyshev nodes, relative error) to tanh(x)/x on [0, 0.625]: there the exponential form
// below loses digits to the cancellation in 1 - e. Above it, (1 - e) / (1 + e) with
// e = exp(-2|x|) <= 0.29, where that cancellation costs under half an ulp.
inline float TanhF(float x) {
  constexpr float kTanhSmall = 0.625f;
  const float a = std::fabs(x);
  const float u = x * x;
  float q = -5.691985599696636e-3f;
  q = q * u + 2.0626291632652283e-2f;
  q = q * u + -5.373531952500343e-2f;
  q = q * u + 1.3331381976604462e-1f;
  q = q * u + -3.333328068256378e-1f;
  const float small = a + a * (q * u);
  const float e = ExpNonPositiveF(-2.0f * a);  // NaN stays NaN
  const float large = (1.0f - e) / (1.0f + e);
  return std::copysign(a < kTanhSmall ? small : large, x);  // -0 stays -0
}

// exp(x) - 1. Below kExpm1Small in magnitude, its Taylor series to degree 11 (the first term
// left out is under 3e-11 of the result there): exp(x) - 1 would lose the low bits of x to the
// cancellation. Above it, ExpF(x) - 1, where exp(x) - 1 is at least half of exp(x) in
// magnitude and the subtraction costs about an ulp. libm's expm1f, a call per element, made
// ELU take 22 ms for 2^20 floats.
inline float ExpM1F(float x) {
  constexpr float kExpm1Small = 0.7f;
  float p = 2.5052108385441720e-08f;  // 1/11!
  p = p * x + 2.7557319223985893e-07f;
  p = p * x + 2.7557319223985888e-06f;
  p = p * x + 2.4801587301587302e-05f;
  p = p * x + 1.9841269841269841e-04f;
  p = p * x + 1.3888888888888889e-03f;
  p = p * x + 8.3333333333333332e-03f;
  p = p * x + 4.1666666666666664e-02f;
  p = p * x + 1.6666666666666666e-01f;
  p = p * x + 0.5f;
  const float small = x * (1.0f + x * p);  // -0 stays -0
  const float large = ExpF(x) - 1.0f;
  return std::fabs(x) < kExpm1Small ? small : large;
}

// The compute type's version: the fast one for float, glibc's vector one for double.
inline float Sigmoid(float x) { return SigmoidF(x); }
inline double Sigmoid(double x) { return 1.0 / (1.0 + VecExp(-x)); }
inline float Tanh(float x) { return TanhF(x); }
inline double Tanh(double x) { return VecTanh(x); }
inline float Expm1(float x) { return ExpM1F(x); }
inline double Expm1(double x) { return VecExpm1(x); }

}  // namespace kiln::cpu
