// narrow_gemm.cc - products with few output columns as register-blocked dot products.
#include "kernels/cpu/narrow_gemm.h"

#include <algorithm>
#include <array>
#include <utility>

#include "core/parallel.h"
#include "kernels/cpu/vec.h"

namespace kiln::cpu {
namespace {

using V = FloatVec<kNativeVecBytes>;
constexpr int64_t kLanes = kNativeVecBytes / sizeof(float);
// Vector registers of the build's target: a block's accumulators, its weight vectors and one
// row's vector must fit in them.
constexpr int kRegisters = kNativeVecBytes == 64 ? 32 : 16;
// The most columns one pass over A takes (more are split into passes).
constexpr int64_t kMaxGroup = kNativeVecBytes == 64 ? 12 : 4;
// Rows split over threads only in blocks of at least this many multiply-adds: below it, waking
// a thread costs more than the block.
constexpr int64_t kMinParallelMacs = 1 << 19;

// The sum of v's lanes, in shuffles (going through memory made GCC spill the accumulators).
inline float SumLanes(V v) {
#if defined(__AVX512F__)
  const Vec8 s8 = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                  __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
#elif defined(__AVX__)
  const __m256 s8 = v;
#endif
#if defined(__AVX__)
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
#else
  return (v[0] + v[2]) + (v[1] + v[3]);
#endif
}

// c[r, j] for kRows rows from `row` and kCols columns from `col`: vector lanes over k, then one
// sum of lanes per output and a scalar tail for k's remainder.
template <int kRows, int kCols>
void Block(int64_t row, int64_t col, int64_t k, const float* a, int64_t lda, const float* w,
           int64_t ldw, float* c, int64_t ldc) {
  // Fully unrolled, so that the accumulators live in registers (GCC spilled them otherwise).
  V acc[kRows][kCols] = {};
  const float* arow[kRows];
  const float* wrow[kCols];
  for (int r = 0; r < kRows; ++r) arow[r] = a + (row + r) * lda;
  for (int j = 0; j < kCols; ++j) wrow[j] = w + (col + j) * ldw;
  int64_t p = 0;
  for (; p + kLanes <= k; p += kLanes) {
    V y[kCols];
#pragma GCC unroll 16
    for (int j = 0; j < kCols; ++j) y[j] = LoadVec<V>(wrow[j] + p);
#pragma GCC unroll 24
    for (int r = 0; r < kRows; ++r) {
      const V x = LoadVec<V>(arow[r] + p);
#pragma GCC unroll 16
      for (int j = 0; j < kCols; ++j) acc[r][j] += x * y[j];
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int j = 0; j < kCols; ++j) {
      float sum = SumLanes(acc[r][j]);
      for (int64_t q = p; q < k; ++q) sum += arow[r][q] * wrow[j][q];
      c[(row + r) * ldc + col + j] = sum;
    }
  }
}

// Rows [begin, end) with kCols columns from `col`: blocks of as many rows as the registers
// allow, then single rows.
template <int kCols>
void Rows(int64_t begin, int64_t end, int64_t col, int64_t k, const float* a, int64_t lda,
          const float* w, int64_t ldw, float* c, int64_t ldc) {
  constexpr int kRows = std::max(1, (kRegisters - 1 - kCols) / kCols);
  int64_t i = begin;
  for (; i + kRows <= end; i += kRows) Block<kRows, kCols>(i, col, k, a, lda, w, ldw, c, ldc);
  for (; i < end; ++i) Block<1, kCols>(i, col, k, a, lda, w, ldw, c, ldc);
}

using RowsFn = void (*)(int64_t, int64_t, int64_t, int64_t, const float*, int64_t, const float*,
                        int64_t, float*, int64_t);

template <size_t... kCols>
constexpr std::array<RowsFn, sizeof...(kCols)> RowsTable(std::index_sequence<kCols...>) {
  return {&Rows<static_cast<int>(kCols) + 1>...};
}
// kRowsFor[w - 1]: Rows for a pass of w columns.
constexpr auto kRowsFor = RowsTable(std::make_index_sequence<kMaxGroup>());

// Columns in as few passes over A as the registers allow, as even as can be (16 as 8 + 8).
void AllColumns(int64_t begin, int64_t end, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* w, int64_t ldw, float* c, int64_t ldc) {
  const int64_t passes = (n + kMaxGroup - 1) / kMaxGroup;
  for (int64_t pass = 0, col = 0; pass < passes; ++pass) {
    const int64_t width = (n - col) / (passes - pass);
    kRowsFor[width - 1](begin, end, col, k, a, lda, w, ldw, c, ldc);
    col += width;
  }
}

}  // namespace

void NarrowGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* w,
                int64_t ldw, float* c, int64_t ldc) {
  const int64_t macs_per_row = std::max<int64_t>(1, n * k);
  const int64_t grain = std::max<int64_t>(1, kMinParallelMacs / macs_per_row);
  ParallelFor(m, grain, [&](int64_t begin, int64_t end) {
    AllColumns(begin, end, n, k, a, lda, w, ldw, c, ldc);
  });
}

}  // namespace kiln::cpu
