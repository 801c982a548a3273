// vec.h - float vectors as GCC/Clang vector types, with unaligned loads and stores.
//
// The hand-blocked kernels (panel_gemm.cc, tile_kernels.cc, conv_direct.cc) write their inner
// loops on these types: the compiler maps them to the widest registers the build targets (AVX2,
// or SSE pairs) and, built with -ffp-contract=fast, turns `acc += x * b` into one FMA. Loads and
// stores go through memcpy, which compiles to one unaligned vector move and is not undefined
// behaviour on a float pointer.
#pragma once

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

}  // namespace kiln::cpu
