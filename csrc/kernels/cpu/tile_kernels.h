// tile_kernels.h - float32 kernels for cache-resident tiles (fused attention's score and output
// tiles): a register-blocked product, a row maximum and exp-and-sum, in AVX-512 where the build
// has it (GCC keeps plain loops over these at 256 bits or leaves them scalar).
//
// oneDNN's dnnl_sgemm costs 20-45 us per 64x128x64 call here (it packs both operands and sets
// up threads every call); the fused attention kernel makes two such products per query block,
// so it needs one whose cost is only its arithmetic: 6 rows x 64 columns of C in 24 registers,
// B read row by row (contiguous), A broadcast element by element (any strides).
#pragma once

#include <cstdint>

namespace kiln::cpu {

// c[i, j] = alpha * sum_p a[i * ars + p * acs] * b[p * ldb + j] (+ c[i, j] when accumulate),
// for i < m, j < n, p < k; c's rows are ldc apart. b's rows must be contiguous (unit stride).
void TileGemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t ars,
              int64_t acs, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);

// The largest of x[0..n), n >= 1 (a NaN may be skipped: it still reaches the softmax's sum
// through its exponential).
float TileRowMax(const float* x, int64_t n);

// x[j] = exp(x[j] - shift) for j < n, with ExpF's polynomial (x[j] - shift <= 0: shift is the
// row's maximum); returns the sum of the new values.
float TileExpSum(float* x, int64_t n, float shift);

}  // namespace kiln::cpu
