// half.h - 16-bit float storage types (IEEE float16, bfloat16); arithmetic happens in float.
#pragma once

#include <cstdint>
#include <cstring>

namespace kiln {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bfloat16: the top half of a float32, rounded to nearest even; NaN stays NaN.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) {  // NOLINT: implicit like the builtin float types
    uint32_t u = FloatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<uint16_t>((u >> 16) | 0x40);
      return;
    }
    bits = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  operator float() const { return BitsFloat(static_cast<uint32_t>(bits) << 16); }
};

// IEEE 754 binary16 with round-to-nearest-even, subnormals, inf and NaN.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(FromFloat(f)) {}  // NOLINT
  operator float() const { return ToFloat(bits); }

  static uint16_t FromFloat(float f) {
    uint32_t u = FloatBits(f);
    uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
    if (abs >= 0x477ff000u) return sign | 0x7c00u;  // overflow to inf (>= 65520)
    if (abs < 0x38800000u) {                        // subnormal or zero in half
      float magnitude = BitsFloat(abs) + 0.5f;      // shifts mantissa into the low bits
      return sign | static_cast<uint16_t>(FloatBits(magnitude) - FloatBits(0.5f));
    }
    uint32_t mant_odd = (abs >> 13) & 1u;
    abs += 0xc8000fffu + mant_odd;  // rebias exponent and round to even
    return sign | static_cast<uint16_t>(abs >> 13);
  }
  static float ToFloat(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return BitsFloat(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
      float value = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
      return sign ? -value : value;
    }
    return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
  }
};

}  // namespace kiln
