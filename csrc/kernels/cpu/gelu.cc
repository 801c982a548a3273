// gelu.cc - the GELU loops of gelu.h: float math per element, bfloat16 widened and narrowed in
// chunks around it (as elementwise.h's bf16 runs), split over the thread pool.
#include "kernels/cpu/gelu.h"

#include <algorithm>

#include "core/parallel.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/normalization.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kGrain = 16384;

inline float GeluAt(float x) {
  const float z = x * 0.70710678118654752f;
  return 0.5f * x * OnePlusErfF(z, ExpNonPositiveF(-z * z));
}

inline float GeluGradAt(float dy, float x) {
  const float z = x * 0.70710678118654752f;
  const float gauss = ExpNonPositiveF(-z * z);
  const float cdf = 0.5f * OnePlusErfF(z, gauss);
  const float pdf = gauss * 0.3989422804014327f;  // phi(x) = exp(-x^2/2) / sqrt(2 pi)
  return dy * (cdf + x * pdf);
}

void GeluRun(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = GeluAt(x[i]);
}

void GeluGradRun(const float* dy, const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = GeluGradAt(dy[i], x[i]);
}

}  // namespace

void GeluErf(const float* x, float* y, int64_t n) {
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) { GeluRun(x + b, y + b, e - b); });
}

void GeluErfTile(float* c, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t i = 0; i < rows; ++i) GeluRun(c + i * ld, c + i * ld, cols);
}

void GeluErf(const BFloat16* x, BFloat16* y, int64_t n) {
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    float buf[kBf16Chunk];
    for (int64_t i = b; i < e; i += kBf16Chunk) {
      const int64_t m = std::min(kBf16Chunk, e - i);
      Bf16Widen(x + i, buf, m);
      GeluRun(buf, buf, m);
      Bf16Narrow(buf, y + i, m);
    }
  });
}

void GeluErfGrad(const float* dy, const float* x, float* out, int64_t n) {
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) { GeluGradRun(dy + b, x + b, out + b, e - b); });
}

void GeluErfGrad(const BFloat16* dy, const BFloat16* x, BFloat16* out, int64_t n) {
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    float bd[kBf16Chunk], bx[kBf16Chunk];
    for (int64_t i = b; i < e; i += kBf16Chunk) {
      const int64_t m = std::min(kBf16Chunk, e - i);
      Bf16Widen(dy + i, bd, m);
      Bf16Widen(x + i, bx, m);
      GeluGradRun(bd, bx, bd, m);
      Bf16Narrow(bd, out + i, m);
    }
  });
}

}  // namespace kiln::cpu
