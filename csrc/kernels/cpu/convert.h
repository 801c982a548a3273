// convert.h - value conversion between any two element types, through float for 16-bit floats.
#pragma once

#include <cmath>
#include <type_traits>

#include "core/dtype.h"

namespace kiln::cpu {

// double -> float rounded to odd: a later rounding to a 16-bit float then rounds once, correctly,
// instead of twice (double -> float -> half can be off by one unit in the last place).
inline float DoubleToFloatRoundOdd(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) == d || d != d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  uint32_t bits = FloatBits(f) | 1u;
  return BitsFloat(bits);
}

template <typename To, typename From>
inline To Convert(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<compute_t<From>>(value) != compute_t<From>(0);
  } else if constexpr ((std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) &&
                       std::is_same_v<From, double>) {
    return To(DoubleToFloatRoundOdd(value));
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(static_cast<compute_t<From>>(value)));
  } else {
    return static_cast<To>(static_cast<compute_t<From>>(value));
  }
}

}  // namespace kiln::cpu
