// gelu.h - exact (erf) GELU and its gradient over contiguous float32 and bfloat16 runs.
//
// The activation of transformer MLPs, so a large tensor in every step: these loops are compiled
// on their own (gelu.cc) with 512-bit vectors preferred where the build targets the machine.
#pragma once

#include <cstdint>

#include "core/half.h"

namespace kiln::cpu {

// y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
void GeluErf(const float* x, float* y, int64_t n);
void GeluErf(const BFloat16* x, BFloat16* y, int64_t n);
// The same in place over a rows x cols block whose rows are ld floats apart, on the calling
// thread (a fused epilogue's tile).
void GeluErfTile(float* c, int64_t rows, int64_t cols, int64_t ld);
// out = dy * (Phi(x) + x phi(x))
void GeluErfGrad(const float* dy, const float* x, float* out, int64_t n);
void GeluErfGrad(const BFloat16* dy, const BFloat16* x, BFloat16* out, int64_t n);

}  // namespace kiln::cpu
