// normalization.h - a vectorizable exp for the softmax family's inner loops.
//
// std::exp is a library call the compiler cannot vectorize, and softmax spends most of its time
// in it. ExpF is Cephes' expf (range reduction to [-ln2/2, ln2/2], a degree-6 polynomial, the
// exponent set through the bits): branch-free straight-line code, within 2 ulp of std::exp,
// that GCC and Clang vectorize. Results below FLT_MIN (exp(x) for x < -87.3) flush to zero;
// results up to FLT_MAX (x <= 88.72) stay finite, as std::exp's do.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/vector_libm.h"

namespace kiln::cpu {

inline float ExpF(float x) {
  constexpr float kHi = 88.72283935546875f, kLo = -87.3365447505531f;  // ln FLT_MAX, ln FLT_MIN
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float xc = x > kHi ? kHi : x;
  xc = xc < kLo ? kLo : xc;  // NaN fails both comparisons and stays NaN
  const float shifted = xc * kLog2e + kRound;
  const float n = shifted - kRound;
  int32_t n_int;
  std::memcpy(&n_int, &shifted, sizeof n_int);
  n_int -= 0x4B400000;              // the bits of kRound: what is left is n
  float r = xc - n * 0.693359375f;  // ln 2 in two parts, so r is exact
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // 2^n as bits; n reaches 128 near the top, beyond float's exponent: then 2^127 times 2.
  const int32_t top = n_int > 127 ? 1 : 0;
  // Shifted as unsigned: for a NaN x, n_int is garbage and may be negative (a signed left shift
  // of a negative value is undefined; the result is NaN through y either way).
  const uint32_t bits = static_cast<uint32_t>(n_int - top + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const float result = (y * scale) * (top ? 2.0f : 1.0f);
  if (x < kLo) return 0.0f;
  return x > kHi ? std::numeric_limits<float>::infinity() : result;
}

// ExpF for x <= 0 (and NaN), as GELU's exp(-z^2) is: without the overflow side's clamp and
// selects, a third fewer instructions per element. Same polynomial, same results.
inline float ExpNonPositiveF(float x) {
  constexpr float kLo = -87.3365447505531f;  // ln FLT_MIN
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  const float xc = x < kLo ? kLo : x;
  const float shifted = xc * kLog2e + kRound;
  const float n = shifted - kRound;
  int32_t n_int;
  std::memcpy(&n_int, &shifted, sizeof n_int);
  n_int -= 0x4B400000;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(n_int + 127) << 23;  // n <= 0: no 2^128
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x < kLo ? 0.0f : y * scale;
}

// 1 + erf(z) in float without a library call, so loops over it vectorize (GELU and its
// gradient), from one formula for every z: erfc(|z|) = exp(-z^2) * t * Q(t) with
// t = 1 / (1 + |z|/2), which maps [0, inf) onto (0, 1] where exp(z^2) erfc(z) / t is smooth; then
// 1 + erf(z) = 2 - erfc(z) for z > 0 and erfc(-z) otherwise. Q (degree 9) is a least-squares fit
// of the relative error on Chebyshev nodes for |z| <= 10 (beyond, exp(-z^2) is 0 in float), made
// for kiln: 1 + erf within 3.2e-7 (relative) evaluated in float, against 7.8e-7 for the two
// polynomials (one near 0, one beyond 1) and the select between them that it replaced, at half
// the arithmetic. Returning 1 + erf rather than erf keeps the negative tail accurate:
// 1 + erf(-5) = 1.5e-12 comes from erfc, not from 1 - 0.99999....
// `exp_neg_z2` is ExpF(-z * z), passed in because GELU's gradient needs the same exponential
// (one ExpF per element instead of two keeps the kernels small enough to inline and vectorize).
inline float OnePlusErfF(float z, float exp_neg_z2) {
  const float t = 1.0f / (1.0f + 0.5f * std::fabs(z));
  float q = 1.353464915e-02f;
  q = q * t - 1.296140478e-01f;
  q = q * t + 4.428111326e-01f;
  q = q * t - 6.870457959e-01f;
  q = q * t + 4.341518784e-01f;
  q = q * t - 1.045284799e-01f;
  q = q * t + 2.274455202e-01f;
  q = q * t + 2.382882296e-01f;
  q = q * t + 2.828940154e-01f;
  q = q * t + 2.820628826e-01f;
  const float erfc_a = exp_neg_z2 * t * q;
  const float far = z > 0.0f ? 2.0f - erfc_a : erfc_a;
  return z != z ? z : far;  // NaN stays NaN
}

// exp in the compute type: the fast path for float, glibc's vector exp for double.
inline float Exp(float x) { return ExpF(x); }
inline double Exp(double x) { return VecExp(x); }

// exp of x - max(row), never above 0 (softmax's shifted scores): no overflow side to handle.
inline float ExpShifted(float x) { return ExpNonPositiveF(x); }
inline double ExpShifted(double x) { return VecExp(x); }

}  // namespace kiln::cpu
