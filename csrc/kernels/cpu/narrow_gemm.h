// narrow_gemm.h - float32 products with a handful of output columns (a classifier's last layer).
//
// oneDNN ran the seed network's 64x512 @ 512x10 layer in 11 us on 2 threads (21 us inside the
// forward, 5% of it, for 0.1% of its FLOPs): its blocked kernels pack and tile for wide outputs.
// With few columns each output is one dot product of a row of A with a row of the weight, which
// sits in L1 for every row, so this kernel computes a few rows' dot products at once.
#pragma once

#include <cstdint>

namespace kiln::cpu {

// The most output columns NarrowGemm takes.
constexpr int64_t kNarrowMaxColumns = 16;

// c[i, j] = sum_p a[i * lda + p] * w[j * ldw + p] for i < m, j < n <= kNarrowMaxColumns, p < k:
// c = a @ w^T with w a row-major [n, k] weight (a Dense layer's). c's rows are ldc apart. Rows
// split over kiln's threads (core/parallel.h) where there are enough of them.
void NarrowGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* w,
                int64_t ldw, float* c, int64_t ldc);

}  // namespace kiln::cpu
