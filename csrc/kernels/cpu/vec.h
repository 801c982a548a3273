// vec.h - float vectors as GCC/Clang vector types: unaligned loads and stores, an 8 x 8 transpose.
//
// The hand-blocked kernels (panel_gemm.cc, tile_kernels.cc, conv_direct.cc, copy.cc) write their
// inner loops on these types: the compiler maps them to the widest registers the build targets
// (AVX2, or SSE pairs) and, built with -ffp-contract=fast, turns `acc += x * b` into one FMA. Loads
// and stores go through memcpy, which compiles to one unaligned vector move and is not undefined
// behaviour on a float pointer.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace kiln::cpu {

// A typedef inside a class: GCC drops vector_size from an alias template (plain float results).
template <int kBytes>
struct FloatVecOf {
  typedef float type __attribute__((vector_size(kBytes)));
};
template <int kBytes>
using FloatVec = typename FloatVecOf<kBytes>::type;
using Vec8 = FloatVec<32>;  // 8 floats

// The bytes of one native vector register of the build's target: generic vectors wider than the
// target's registers are split poorly (GCC lowered a 64-byte vector to four 16-byte ones on
// AVX2).
#if defined(__AVX512F__)
constexpr int kNativeVecBytes = 64;
#elif defined(__AVX__)
constexpr int kNativeVecBytes = 32;
#else
constexpr int kNativeVecBytes = 16;
#endif
static_assert(sizeof(Vec8) == 32, "the vector type lost its vector_size");

template <typename V>
inline V LoadVec(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename V>
inline void StoreVec(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

inline Vec8 Load8(const float* p) { return LoadVec<Vec8>(p); }

inline void Store8(float* p, Vec8 v) { StoreVec(p, v); }

// dst[0, n) = src[0, n) in native vectors, the last partial one masked: for rows of a few dozen
// floats (the convolutions' padded rows, seven in MobileNet's last layers), where a libc call or
// a scalar tail per row cost more than the arithmetic on them.
inline void CopyRow(float* dst, const float* src, int64_t n) {
  using V = FloatVec<kNativeVecBytes>;
  constexpr int64_t kLanes = kNativeVecBytes / sizeof(float);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) StoreVec(dst + i, LoadVec<V>(src + i));
  const int64_t rest = n - i;
  if (rest == 0) return;
#if defined(__AVX512F__)
  const __mmask16 mask = static_cast<__mmask16>((1u << rest) - 1);
  _mm512_mask_storeu_ps(dst + i, mask, _mm512_maskz_loadu_ps(mask, src + i));
#elif defined(__AVX2__)
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rest)),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  _mm256_maskstore_ps(dst + i, mask, _mm256_maskload_ps(src + i, mask));
#else
  for (; i < n; ++i) dst[i] = src[i];
#endif
}

// r[0..8) transposed in place: row i becomes what column i was (unpacks, then 128-bit halves).
// Shuffles move bits, so 4-byte integers loaded as floats transpose too (copy.cc).
inline void Transpose8x8(Vec8 r[8]) {
  Vec8 t[8], s[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4)
    for (int j = 0; j < 2; ++j) {
      s[i + 2 * j] = __builtin_shufflevector(t[i + j], t[i + j + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      s[i + 2 * j + 1] =
          __builtin_shufflevector(t[i + j], t[i + j + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int i = 0; i < 4; ++i) {
    r[i] = __builtin_shufflevector(s[i], s[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    r[i + 4] = __builtin_shufflevector(s[i], s[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

// dst[i * ld + j] = src[i + j * stride] for i, j < 8, elements of 4 bytes (floats, or integers
// moved as bits): eight loads along src's columns, one Transpose8x8, eight stores along dst's
// rows. The transposed copies of copy.cc and the panel packing of panel_gemm.cc go through it.
template <typename T>
inline void TransposeBlock8(const T* src, int64_t stride, T* dst, int64_t ld) {
  static_assert(sizeof(T) == sizeof(float), "eight elements fill one float vector");
  Vec8 v[8];
  for (int64_t j = 0; j < 8; ++j) v[j] = Load8(reinterpret_cast<const float*>(src + j * stride));
  Transpose8x8(v);
  for (int64_t i = 0; i < 8; ++i) Store8(reinterpret_cast<float*>(dst + i * ld), v[i]);
}

}  // namespace kiln::cpu
