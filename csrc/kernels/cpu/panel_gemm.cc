// panel_gemm.cc - the 16-column-panel product (see panel_gemm.h): 6 x 16 register blocks.
#include "kernels/cpu/panel_gemm.h"

#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "kernels/cpu/vec.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kWidth = 16;
// K is split into blocks this long: a panel block (64 KB) then stays in L2 while every row
// block of A passes over it; measured 64x784x512 runs 3-6% slower when blocked at 256.
constexpr int64_t kDepthBlock = 1024;
// Rows of A per work item: A's block (rows x K floats) stays in L2 across the panels.
constexpr int64_t kRowBytes = 256 * 1024;

// What a block does with its sums: add C (a later depth block), add the bias and relu (the
// last depth block), store `width` (1..16) columns.
struct Epilogue {
  bool accumulate;
  const float* bias;  // the panel's 16 bias values (zero-padded), or null
  bool relu;
  int64_t width;
};

inline void StoreRow(float* out, Vec8 lo, Vec8 hi, const Epilogue& e) {
  if (e.width == kWidth) {
    if (e.accumulate) {
      lo += Load8(out);
      hi += Load8(out + 8);
    }
  } else if (e.accumulate) {
    float old[kWidth] = {};
    std::memcpy(old, out, e.width * sizeof(float));
    lo += Load8(old);
    hi += Load8(old + 8);
  }
  if (e.bias) {
    lo += Load8(e.bias);
    hi += Load8(e.bias + 8);
  }
  if (e.relu) {  // `x < 0 ? 0 : x` keeps NaN, like the other relu kernels
    const Vec8 zero{};
    lo = lo < zero ? zero : lo;
    hi = hi < zero ? zero : hi;
  }
  if (e.width == kWidth) {
    Store8(out, lo);
    Store8(out + 8, hi);
    return;
  }
  float row[kWidth];
  Store8(row, lo);
  Store8(row + 8, hi);
  std::memcpy(out, row, e.width * sizeof(float));
}

// R rows (1..6) of C's 16 panel columns over `depth` steps: 2R accumulators, 2 panel loads and
// R broadcasts per 2R FMAs.
template <int R>
void Block(int64_t depth, const float* a, int64_t ars, int64_t acs, const float* panel, float* c,
           int64_t ldc, const Epilogue& e) {
  Vec8 lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = Vec8{};
  // Eight steps per iteration: measured 94% (none) -> 96% (four) -> 98% (eight) of the FMA peak
  // at 64x784x512, the loop's own instructions no longer competing with the FMAs.
#pragma GCC unroll 8
  for (int64_t p = 0; p < depth; ++p) {
    const Vec8 b0 = Load8(panel + p * kWidth), b1 = Load8(panel + p * kWidth + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const float x = a[r * ars + p * acs];
      lo[r] += x * b0;
      hi[r] += x * b1;
    }
  }
  for (int r = 0; r < R; ++r) StoreRow(c + r * ldc, lo[r], hi[r], e);
}

// Rows [0, m) of one panel over one depth block.
void PanelRows(int64_t m, int64_t depth, const float* a, int64_t ars, int64_t acs,
               const float* panel, float* c, int64_t ldc, const Epilogue& e) {
  int64_t i = 0;
  for (; i + 6 <= m; i += 6) Block<6>(depth, a + i * ars, ars, acs, panel, c + i * ldc, ldc, e);
  const float* rest = a + i * ars;
  float* out = c + i * ldc;
  switch (m - i) {
    case 5:
      return Block<5>(depth, rest, ars, acs, panel, out, ldc, e);
    case 4:
      return Block<4>(depth, rest, ars, acs, panel, out, ldc, e);
    case 3:
      return Block<3>(depth, rest, ars, acs, panel, out, ldc, e);
    case 2:
      return Block<2>(depth, rest, ars, acs, panel, out, ldc, e);
    case 1:
      return Block<1>(depth, rest, ars, acs, panel, out, ldc, e);
    default:
      return;
  }
}

// Rows of A per work item: all of them where A's depth block fits kRowBytes, else a multiple of
// 6 that does; fewer where there are fewer panels than threads (a 10-column output layer), so
// that every thread gets rows.
int64_t RowBlock(int64_t m, int64_t k, int64_t panel_count) {
  const int64_t row_bytes = static_cast<int64_t>(sizeof(float)) * std::min(k, kDepthBlock);
  int64_t rows =
      m * row_bytes <= kRowBytes ? m : std::max<int64_t>(6, kRowBytes / row_bytes / 6 * 6);
  const int64_t threads = GetNumThreads();
  if (panel_count < threads) {
    const int64_t share = (m + threads - 1) / threads;
    rows = std::min(rows, std::max<int64_t>(6, (share + 5) / 6 * 6));
  }
  return rows;
}

}  // namespace

bool PanelGemmAvailable() {
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
  return true;
#else
  return false;
#endif
}

int64_t PanelPackedSize(int64_t k, int64_t n) { return (n + kWidth - 1) / kWidth * kWidth * k; }

namespace {

// One full panel of a b whose columns are contiguous (a dense layer's transposed weight:
// column n of b at src + n * sn): 8 x 8 blocks transposed in registers. Element by element it
// read one cache line per float and took 2.2-2.6x as long (one thread: a 512 x 784 weight
// 127 -> 47-58 us, 512 x 512 85 -> 33-36 us).
void PackContiguousColumns(const float* src, int64_t sn, int64_t k, float* to) {
  int64_t row = 0;
  for (; row + 8 <= k; row += 8)
    for (int64_t half = 0; half < kWidth; half += 8)
      TransposeBlock8(src + half * sn + row, sn, to + row * kWidth + half, kWidth);
  for (; row < k; ++row)
    for (int64_t j = 0; j < kWidth; ++j) to[row * kWidth + j] = src[j * sn + row];
}

}  // namespace

void PackPanels(const Tensor& b, float* out) {
  const int64_t k = b.dim(0), n = b.dim(1);
  const int64_t sk = b.strides()[0], sn = b.strides()[1];
  const float* src = b.data<float>();
  const int64_t panels = (n + kWidth - 1) / kWidth;
  const auto pack = [&](int64_t p, int64_t row) {
    const int64_t width = std::min(kWidth, n - p * kWidth);
    const float* from = src + row * sk + p * kWidth * sn;
    float* to = out + p * k * kWidth + row * kWidth;
    for (int64_t j = 0; j < width; ++j) to[j] = from[j * sn];
    std::fill(to + width, to + kWidth, 0.f);
  };
  // Read b in its own order: a row-major b row by row (its panel strips are one cache line
  // each, 2 KB apart at 512 columns, which streamed 3x slower panel by panel), a transposed
  // one (a dense weight) panel by panel, 16 rows of the weight at a time.
  if (sn == 1) {
    ParallelFor(k, 64, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row)
        for (int64_t p = 0; p < panels; ++p) pack(p, row);
    });
    return;
  }
  ParallelFor(panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      if (sk == 1 && n - p * kWidth >= kWidth) {
        PackContiguousColumns(src + p * kWidth * sn, sn, k, out + p * k * kWidth);
        continue;
      }
      for (int64_t row = 0; row < k; ++row) pack(p, row);
    }
  });
}

Tensor PackedPanelsOf(const Tensor& b) {
  Tensor panels = Tensor::Empty({PanelPackedSize(b.dim(0), b.dim(1))}, DType::Float32);
  PackPanels(b, panels.data<float>());
  return panels;
}

void PanelGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs,
               const float* panels, const float* bias, bool relu, float* c, int64_t ldc,
               const PanelTileFn& finish) {
  const int64_t panel_count = (n + kWidth - 1) / kWidth;
  const int64_t row_block = RowBlock(m, k, panel_count);
  const int64_t row_blocks = (m + row_block - 1) / row_block;
  // Items are (row block, panel), panels fastest: a thread's run of items shares A's block.
  const int64_t flops_per_item = 2 * std::min(m, row_block) * k * kWidth;
  const int64_t grain = std::max<int64_t>(1, (1 << 20) / std::max<int64_t>(1, flops_per_item));
  ParallelFor(row_blocks * panel_count, grain, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t rb = item / panel_count, p = item % panel_count;
      const int64_t row0 = rb * row_block, rows = std::min(row_block, m - row0);
      const int64_t col0 = p * kWidth, width = std::min(kWidth, n - col0);
      float padded_bias[kWidth] = {};
      if (bias) std::memcpy(padded_bias, bias + col0, width * sizeof(float));
      for (int64_t d0 = 0; d0 < k; d0 += kDepthBlock) {
        const int64_t depth = std::min(kDepthBlock, k - d0);
        const bool last = d0 + depth == k;
        const Epilogue e{d0 > 0, last && bias ? padded_bias : nullptr, last && relu, width};
        PanelRows(rows, depth, a + row0 * ars + d0 * acs, ars, acs,
                  panels + p * k * kWidth + d0 * kWidth, c + row0 * ldc + col0, ldc, e);
      }
      if (finish) finish(c + row0 * ldc + col0, row0, rows, col0, width);
    }
  });
}

}  // namespace kiln::cpu
