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
  const int32_t bits = (n_int - top + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const float result = (y * scale) * (top ? 2.0f : 1.0f);
  if (x < kLo) return 0.0f;
  return x > kHi ? std::numeric_limits<float>::infinity() : result;
}

// exp in the compute type: the fast path for float, the library's for double.
inline float Exp(float x) { return ExpF(x); }
inline double Exp(double x) { return std::exp(x); }

}  // namespace kiln::cpu
