// gemm.cc - a blocked, vectorizable matmul templated over dtype (the oneDNN-less fallback).
//
// Work is split into (batch, column block, row block) items spread over ParallelFor. Each item
// packs its column block of B into a contiguous accumulator-typed panel (so any stride or
// dtype becomes a unit-stride loop) and updates kRows output rows at once, so each loaded B
// value feeds kRows multiply-adds in a loop the compiler vectorizes.
#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/convert.h"

namespace kiln::cpu {
namespace {

// Integers accumulate in uint64_t: wrap-around is defined there, and truncating the sum gives
// the same bits NumPy's wrapping int8/int16/... accumulation gives.
template <typename T>
using acc_t = std::conditional_t<std::is_integral_v<T>, uint64_t, compute_t<T>>;

constexpr int64_t kRows = 4;       // output rows updated together
constexpr int64_t kCols = 256;     // columns per block: the accumulators stay in L1
constexpr int64_t kRowBlock = 64;  // rows per work item: amortizes packing the B panel

template <typename T>
void GemmTyped(const Tensor& a, const Tensor& b, const Tensor& c) {
  using Acc = acc_t<T>;
  const int64_t nd = c.ndim();
  const int64_t M = c.dim(nd - 2), N = c.dim(nd - 1), K = a.dim(nd - 1);
  const int64_t sam = a.strides()[nd - 2], sak = a.strides()[nd - 1];
  const int64_t sbk = b.strides()[nd - 2], sbn = b.strides()[nd - 1];
  const int64_t scm = c.strides()[nd - 2], scn = c.strides()[nd - 1];

  // Element offsets of every batch matrix, walked once like an odometer.
  int64_t batch = 1;
  for (int64_t d = 0; d < nd - 2; ++d) batch *= c.dim(d);
  std::vector<int64_t> off_a(batch), off_b(batch), off_c(batch),
      index(std::max<int64_t>(nd - 2, 0));
  for (int64_t i = 0, oa = 0, ob = 0, oc = 0; i < batch; ++i) {
    off_a[i] = oa, off_b[i] = ob, off_c[i] = oc;
    for (int64_t d = nd - 3; d >= 0; --d) {
      oa += a.strides()[d], ob += b.strides()[d], oc += c.strides()[d];
      if (++index[d] < c.dim(d)) break;
      oa -= a.strides()[d] * c.dim(d), ob -= b.strides()[d] * c.dim(d),
          oc -= c.strides()[d] * c.dim(d);
      index[d] = 0;
    }
  }

  const T* A = a.data<T>();
  const T* B = b.data<T>();
  T* C = c.data<T>();
  const int64_t col_blocks = (N + kCols - 1) / kCols, row_blocks = (M + kRowBlock - 1) / kRowBlock;
  const int64_t items = batch * col_blocks * row_blocks;
  const int64_t item_flops = std::min(M, kRowBlock) * std::min(N, kCols) * K;
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(item_flops, 1));

  ParallelFor(items, grain, [&](int64_t begin, int64_t end) {
    std::vector<Acc> panel(K * kCols), rows(kRows * K);
    Acc acc[kRows][kCols];
    int64_t packed_b = -1, packed_block = -1;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t rb = item % row_blocks, cb = item / row_blocks % col_blocks;
      const int64_t bi = item / (row_blocks * col_blocks);
      const int64_t j0 = cb * kCols, jn = std::min(kCols, N - j0);
      if (packed_b != off_b[bi] || packed_block != cb) {  // broadcast B is packed once
        const T* src = B + off_b[bi] + j0 * sbn;
        for (int64_t k = 0; k < K; ++k)
          for (int64_t j = 0; j < jn; ++j)
            panel[k * kCols + j] = Convert<Acc>(src[k * sbk + j * sbn]);
        packed_b = off_b[bi], packed_block = cb;
      }
      const int64_t i_end = std::min(M, (rb + 1) * kRowBlock);
      for (int64_t i0 = rb * kRowBlock; i0 < i_end; i0 += kRows) {
        const int64_t rn = std::min(kRows, i_end - i0);
        for (int64_t r = 0; r < kRows; ++r)
          for (int64_t k = 0; k < K; ++k)
            rows[r * K + k] =
                r < rn ? Convert<Acc>(A[off_a[bi] + (i0 + r) * sam + k * sak]) : Acc(0);
        for (int64_t r = 0; r < kRows; ++r) std::fill(acc[r], acc[r] + jn, Acc(0));
        for (int64_t k = 0; k < K; ++k) {
          const Acc* brow = panel.data() + k * kCols;
          const Acc a0 = rows[k], a1 = rows[K + k], a2 = rows[2 * K + k], a3 = rows[3 * K + k];
          for (int64_t j = 0; j < jn; ++j) {
            const Acc bv = brow[j];
            acc[0][j] += a0 * bv;
            acc[1][j] += a1 * bv;
            acc[2][j] += a2 * bv;
            acc[3][j] += a3 * bv;
          }
        }
        for (int64_t r = 0; r < rn; ++r) {
          T* dst = C + off_c[bi] + (i0 + r) * scm + j0 * scn;
          for (int64_t j = 0; j < jn; ++j) dst[j * scn] = Convert<T>(acc[r][j]);
        }
      }
    }
  });
}

}  // namespace

void GemmFallback(const Tensor& a, const Tensor& b, const Tensor& c) {
  static_assert(kRows == 4, "the micro-kernel unrolls four rows");
  if (c.numel() == 0) return;
  DispatchDType(c.dtype(), [&](auto tag) { GemmTyped<decltype(tag)>(a, b, c); });
}

}  // namespace kiln::cpu
