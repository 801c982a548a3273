// tile_kernels.cc - float32 tile kernels for fused attention (AVX-512, AVX2; plain loops
// elsewhere).
#include "kernels/cpu/tile_kernels.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/cpu/normalization.h"
#include "kernels/cpu/vec.h"

#if defined(__AVX512F__)
// GCC 12's AVX-512 intrinsics start from a self-initialized `_mm512_undefined_ps()` that its
// own -Wmaybe-uninitialized flags once inlined (GCC bug 105593); the code is correct.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#endif

namespace kiln::cpu {
namespace {

#if defined(__AVX512F__)
constexpr int64_t kCols = 64;  // columns of C per block: four 16-float registers

// Masks of the four registers of a block `width` (1..64) columns wide.
void ColumnMasks(int64_t width, __mmask16 masks[4]) {
  for (int64_t v = 0; v < 4; ++v) {
    const int64_t left = std::clamp<int64_t>(width - 16 * v, 0, 16);
    masks[v] = static_cast<__mmask16>(left == 16 ? 0xFFFF : (1u << left) - 1);
  }
}

// Stores alpha * acc (+ what is there, when accumulating) into `width` columns of one row.
inline void StoreRow(float* out, const __m512 acc[4], const __mmask16 masks[4], __m512 alpha,
                     bool accumulate) {
  for (int v = 0; v < 4; ++v) {
    __m512 x = _mm512_mul_ps(alpha, acc[v]);
    if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(masks[v], out + 16 * v));
    _mm512_mask_storeu_ps(out + 16 * v, masks[v], x);
  }
}

// C[6 rows, `width` columns]: 24 accumulators, 4 loads of B and 6 broadcasts of A per 24 FMAs
// (4 rows measured 10% slower). They are named variables, not an array: GCC keeps an array of
// vectors on the stack and stores it every iteration (2x slower).
void Block6(int64_t width, int64_t k, float alpha, const float* a, int64_t ars, int64_t acs,
            const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  __mmask16 masks[4];
  ColumnMasks(width, masks);
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00,
         c12 = c00, c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00,
         c32 = c00, c33 = c00, c40 = c00, c41 = c00, c42 = c00, c43 = c00, c50 = c00, c51 = c00,
         c52 = c00, c53 = c00;
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;
    const __m512 b0 = _mm512_maskz_loadu_ps(masks[0], bp);
    const __m512 b1 = _mm512_maskz_loadu_ps(masks[1], bp + 16);
    const __m512 b2 = _mm512_maskz_loadu_ps(masks[2], bp + 32);
    const __m512 b3 = _mm512_maskz_loadu_ps(masks[3], bp + 48);
    const float* ap = a + p * acs;
    __m512 x;
    x = _mm512_set1_ps(ap[0 * ars]);
    c00 = _mm512_fmadd_ps(x, b0, c00);
    c01 = _mm512_fmadd_ps(x, b1, c01);
    c02 = _mm512_fmadd_ps(x, b2, c02);
    c03 = _mm512_fmadd_ps(x, b3, c03);
    x = _mm512_set1_ps(ap[1 * ars]);
    c10 = _mm512_fmadd_ps(x, b0, c10);
    c11 = _mm512_fmadd_ps(x, b1, c11);
    c12 = _mm512_fmadd_ps(x, b2, c12);
    c13 = _mm512_fmadd_ps(x, b3, c13);
    x = _mm512_set1_ps(ap[2 * ars]);
    c20 = _mm512_fmadd_ps(x, b0, c20);
    c21 = _mm512_fmadd_ps(x, b1, c21);
    c22 = _mm512_fmadd_ps(x, b2, c22);
    c23 = _mm512_fmadd_ps(x, b3, c23);
    x = _mm512_set1_ps(ap[3 * ars]);
    c30 = _mm512_fmadd_ps(x, b0, c30);
    c31 = _mm512_fmadd_ps(x, b1, c31);
    c32 = _mm512_fmadd_ps(x, b2, c32);
    c33 = _mm512_fmadd_ps(x, b3, c33);
    x = _mm512_set1_ps(ap[4 * ars]);
    c40 = _mm512_fmadd_ps(x, b0, c40);
    c41 = _mm512_fmadd_ps(x, b1, c41);
    c42 = _mm512_fmadd_ps(x, b2, c42);
    c43 = _mm512_fmadd_ps(x, b3, c43);
    x = _mm512_set1_ps(ap[5 * ars]);
    c50 = _mm512_fmadd_ps(x, b0, c50);
    c51 = _mm512_fmadd_ps(x, b1, c51);
    c52 = _mm512_fmadd_ps(x, b2, c52);
    c53 = _mm512_fmadd_ps(x, b3, c53);
  }
  const __m512 scale = _mm512_set1_ps(alpha);
  const __m512 rows[6][4] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23},
                             {c30, c31, c32, c33}, {c40, c41, c42, c43}, {c50, c51, c52, c53}};
  for (int r = 0; r < 6; ++r) StoreRow(c + r * ldc, rows[r], masks, scale, accumulate);
}

// C[1 row, `width` columns], for the rows left over.
void Block1(int64_t width, int64_t k, float alpha, const float* a, int64_t acs, const float* b,
            int64_t ldb, float* c, bool accumulate) {
  __mmask16 masks[4];
  ColumnMasks(width, masks);
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;
    const __m512 x = _mm512_set1_ps(a[p * acs]);
    c0 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(masks[0], bp), c0);
    c1 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(masks[1], bp + 16), c1);
    c2 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(masks[2], bp + 32), c2);
    c3 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(masks[3], bp + 48), c3);
  }
  const __m512 row[4] = {c0, c1, c2, c3};
  StoreRow(c, row, masks, _mm512_set1_ps(alpha), accumulate);
}
// ExpF for x <= 0 (or NaN), 16 lanes at a time: the same range reduction and polynomial.
__m512 ExpNonPositive(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3365447505531f), round = _mm512_set1_ps(12582912.0f);
  const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  const __m512 xc = _mm512_max_ps(lo, x);  // max_ps returns its second operand for a NaN
  const __m512 shifted = _mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), round);
  const __m512 n = _mm512_sub_ps(shifted, round);
  const __m512i n_int =
      _mm512_sub_epi32(_mm512_castps_si512(shifted), _mm512_set1_epi32(0x4B400000));
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  const __m512 scale =
      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n_int, _mm512_set1_epi32(127)), 23));
  return _mm512_mask_mov_ps(_mm512_mul_ps(y, scale), under, _mm512_setzero_ps());
}

__mmask16 TailMask(int64_t left) {
  return static_cast<__mmask16>(left >= 16 ? 0xFFFF : (1u << left) - 1);
}
#elif defined(__AVX2__) && defined(__FMA__)
// AVX2: 8-float vectors as GCC/Clang vector types (the compiler emits FMAs: the file is built
// with -ffp-contract=fast). A block is 6 rows x 16 columns: 12 accumulators, 2 loads of B and
// 6 broadcasts of A per 12 FMAs, 14 of the 16 ymm registers. Columns past the last full block
// take the plain loop.
constexpr int64_t kCols = 16;

inline void StoreRow(float* out, Vec8 lo, Vec8 hi, float alpha, bool accumulate) {
  lo *= alpha;
  hi *= alpha;
  if (accumulate) {
    lo += Load8(out);
    hi += Load8(out + 8);
  }
  Store8(out, lo);
  Store8(out + 8, hi);
}

// Named accumulators, not an array, for the reason given for the AVX-512 block.
void Block6(int64_t k, float alpha, const float* a, int64_t ars, int64_t acs, const float* b,
            int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  Vec8 c00{}, c01{}, c10{}, c11{}, c20{}, c21{}, c30{}, c31{}, c40{}, c41{}, c50{}, c51{};
  for (int64_t p = 0; p < k; ++p) {
    const Vec8 b0 = Load8(b + p * ldb), b1 = Load8(b + p * ldb + 8);
    const float* ap = a + p * acs;
    const float x0 = ap[0], x1 = ap[ars], x2 = ap[2 * ars], x3 = ap[3 * ars], x4 = ap[4 * ars],
                x5 = ap[5 * ars];
    c00 += x0 * b0;
    c01 += x0 * b1;
    c10 += x1 * b0;
    c11 += x1 * b1;
    c20 += x2 * b0;
    c21 += x2 * b1;
    c30 += x3 * b0;
    c31 += x3 * b1;
    c40 += x4 * b0;
    c41 += x4 * b1;
    c50 += x5 * b0;
    c51 += x5 * b1;
  }
  StoreRow(c, c00, c01, alpha, accumulate);
  StoreRow(c + ldc, c10, c11, alpha, accumulate);
  StoreRow(c + 2 * ldc, c20, c21, alpha, accumulate);
  StoreRow(c + 3 * ldc, c30, c31, alpha, accumulate);
  StoreRow(c + 4 * ldc, c40, c41, alpha, accumulate);
  StoreRow(c + 5 * ldc, c50, c51, alpha, accumulate);
}

void Block1(int64_t k, float alpha, const float* a, int64_t acs, const float* b, int64_t ldb,
            float* c, bool accumulate) {
  Vec8 c0{}, c1{};
  for (int64_t p = 0; p < k; ++p) {
    const float x = a[p * acs];
    c0 += x * Load8(b + p * ldb);
    c1 += x * Load8(b + p * ldb + 8);
  }
  StoreRow(c, c0, c1, alpha, accumulate);
}
#endif

// Row by row, the j loop innermost so the compiler vectorizes it: builds without AVX2, and the
// columns past AVX2's last full block.
[[maybe_unused]] void PlainColumns(int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                                   int64_t ars, int64_t acs, const float* b, int64_t ldb, float* c,
                                   int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (!accumulate) std::fill(row, row + n, 0.f);
    for (int64_t p = 0; p < k; ++p) {
      const float ap = alpha * a[i * ars + p * acs];
      const float* bp = b + p * ldb;
      for (int64_t j = 0; j < n; ++j) row[j] += ap * bp[j];
    }
  }
}

}  // namespace

float TileRowMax(const float* x, int64_t n) {
#if defined(__AVX512F__)
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = TailMask(n - j);
    m = _mm512_mask_max_ps(m, k, m, _mm512_maskz_loadu_ps(k, x + j));
  }
  return _mm512_reduce_max_ps(m);
#elif defined(__AVX2__) && defined(__FMA__)
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  Vec8 lanes = Vec8{} + kLowest;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const Vec8 v = Load8(x + j);
    lanes = lanes > v ? lanes : v;
  }
  float m = kLowest;
  for (int l = 0; l < 8; ++l) m = m > lanes[l] ? m : lanes[l];
  for (; j < n; ++j) m = m > x[j] ? m : x[j];
  return m;
#else
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) m = m > x[j] ? m : x[j];
  return m;
#endif
}

float TileExpSum(float* x, int64_t n, float shift) {
#if defined(__AVX512F__)
  const __m512 s = _mm512_set1_ps(shift);
  __m512 total = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = TailMask(n - j);
    const __m512 e = ExpNonPositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), s));
    _mm512_mask_storeu_ps(x + j, k, e);
    total = _mm512_mask_add_ps(total, k, total, e);
  }
  return _mm512_reduce_add_ps(total);
#elif defined(__AVX2__) && defined(__FMA__)
  for (int64_t j = 0; j < n; ++j) x[j] = ExpNonPositiveF(x[j] - shift);  // vectorized
  Vec8 t0{}, t1{};  // the sum in 16 lanes, as the compiler will not reorder a float sum
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    t0 += Load8(x + j);
    t1 += Load8(x + j + 8);
  }
  const Vec8 t = t0 + t1;
  float total = 0.f;
  for (int l = 0; l < 8; ++l) total += t[l];
  for (; j < n; ++j) total += x[j];
  return total;
#else
  float total = 0.f;
  for (int64_t j = 0; j < n; ++j) total += x[j] = ExpF(x[j] - shift);
  return total;
#endif
}

void TileGemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t ars,
              int64_t acs, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
#if defined(__AVX512F__)
  for (int64_t j = 0; j < n; j += kCols) {
    const int64_t width = std::min(kCols, n - j);
    int64_t i = 0;
    for (; i + 6 <= m; i += 6)
      Block6(width, k, alpha, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, accumulate);
    for (; i < m; ++i)
      Block1(width, k, alpha, a + i * ars, acs, b + j, ldb, c + i * ldc + j, accumulate);
  }
#elif defined(__AVX2__) && defined(__FMA__)
  const int64_t full = n / kCols * kCols;
  for (int64_t j = 0; j < full; j += kCols) {
    int64_t i = 0;
    for (; i + 6 <= m; i += 6)
      Block6(k, alpha, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, accumulate);
    for (; i < m; ++i) Block1(k, alpha, a + i * ars, acs, b + j, ldb, c + i * ldc + j, accumulate);
  }
  if (full < n)
    PlainColumns(m, n - full, k, alpha, a, ars, acs, b + full, ldb, c + full, ldc, accumulate);
#else
  PlainColumns(m, n, k, alpha, a, ars, acs, b, ldb, c, ldc, accumulate);
#endif
}

}  // namespace kiln::cpu
