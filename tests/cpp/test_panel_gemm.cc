// test_panel_gemm.cc - the 16-column-panel product against a double-precision loop, on every
// machine (the kernel builds everywhere; only whether products take it depends on the CPU).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/panel_gemm.h"

namespace kiln {
namespace {

struct Case {
  int64_t m, k, n;
  bool bias, relu;
};

// a (m x k, element (i, p) at a[i * ars + p * acs]) @ b (a 2-D view), through the panels.
std::vector<float> PanelProduct(const Case& s, const std::vector<float>& a, int64_t ars,
                                int64_t acs, const Tensor& b, const std::vector<float>& bias,
                                int64_t ldc) {
  std::vector<float> panels(cpu::PanelPackedSize(s.k, s.n), -1.f);
  cpu::PackPanels(b, panels.data());
  std::vector<float> c(s.m * ldc, 7.f);  // 7: columns past n must keep it
  cpu::PanelGemm(s.m, s.n, s.k, a.data(), ars, acs, panels.data(), s.bias ? bias.data() : nullptr,
                 s.relu, c.data(), ldc);
  return c;
}

// transposed: a stored column-major (a weight gradient's dy^T) and b the transposed view of a
// row-major (n, k) dense weight; else both row-major.
void CheckCase(const Case& s, bool transposed) {
  const bool transposed_b = transposed;
  std::mt19937 rng(static_cast<unsigned>(s.m * 131 + s.k * 7 + s.n));
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  // Padded rows and columns: strides are honoured.
  const int64_t ars = transposed ? 1 : s.k + 3, acs = transposed ? s.m + 3 : 1, ldc = s.n + 5;
  std::vector<float> a(transposed ? s.k * acs : s.m * ars), bias(s.n);
  for (float& v : a) v = dist(rng);
  for (float& v : bias) v = dist(rng);
  // b as stored: row-major (k, n), or the transposed view of a row-major (n, k) dense weight.
  Tensor stored = transposed_b ? Tensor::Empty({s.n, s.k}, DType::Float32)
                               : Tensor::Empty({s.k, s.n}, DType::Float32);
  for (int64_t i = 0; i < stored.numel(); ++i) stored.data<float>()[i] = dist(rng);
  const Tensor b = transposed_b ? stored.AsStrided({s.k, s.n}, {1, s.k}, 0) : stored;
  const std::vector<float> c = PanelProduct(s, a, ars, acs, b, bias, ldc);
  const float* pb = stored.data<float>();
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      double want = s.bias ? bias[j] : 0.0;
      for (int64_t p = 0; p < s.k; ++p)
        want += double(a[i * ars + p * acs]) * (transposed_b ? pb[j * s.k + p] : pb[p * s.n + j]);
      if (s.relu && want < 0) want = 0;
      ASSERT_NEAR(c[i * ldc + j], want, 1e-4 * (1 + std::sqrt(double(s.k))))
          << "m=" << s.m << " k=" << s.k << " n=" << s.n << " at " << i << "," << j;
    }
    for (int64_t j = s.n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], 7.f) << "wrote past n";
  }
}

TEST(PanelGemm, MatchesLoopsAcrossBlockEdges) {
  // Rows: every remainder of the 6-row block; columns: within, at and past a 16-wide panel;
  // depth: one step, and past the 1024-step depth block (accumulating into C).
  for (int64_t m : {1, 2, 5, 6, 7, 12, 13, 64})
    for (int64_t n : {1, 10, 16, 17, 40})
      for (int64_t k : {1, 9, 1030}) {
        CheckCase({m, k, n, false, false}, false);
        CheckCase({m, k, n, true, true}, true);
      }
}

// Panel p holds b's columns [16p, 16p + 16) row after row, zeros past N: checked element by
// element for a row-major b and for the transposed view of a weight whose rows are padded (the
// 8 x 8 register transposes, their depth tail, and a last panel narrower than 16).
TEST(PanelGemm, PacksEveryLayoutIntoPanels) {
  for (bool transposed : {false, true})
    for (int64_t k : {1, 7, 8, 9, 17, 784})
      for (int64_t n : {5, 16, 33}) {
        const int64_t pad = 5;
        Tensor stored = transposed ? Tensor::Empty({n, k + pad}, DType::Float32)
                                   : Tensor::Empty({k, n + pad}, DType::Float32);
        for (int64_t i = 0; i < stored.numel(); ++i) stored.data<float>()[i] = float(i + 1);
        const Tensor b = transposed ? stored.AsStrided({k, n}, {1, k + pad}, 0)
                                    : stored.AsStrided({k, n}, {n + pad, 1}, 0);
        std::vector<float> panels(cpu::PanelPackedSize(k, n), -1.f);
        cpu::PackPanels(b, panels.data());
        const float* src = stored.data<float>();
        for (int64_t col = 0; col < (n + 15) / 16 * 16; ++col)
          for (int64_t row = 0; row < k; ++row) {
            const float want = col >= n     ? 0.f
                               : transposed ? src[col * (k + pad) + row]
                                            : src[row * (n + pad) + col];
            ASSERT_EQ(panels[(col / 16) * k * 16 + row * 16 + col % 16], want)
                << (transposed ? "transposed" : "row-major") << " k=" << k << " n=" << n << " at "
                << row << "," << col;
          }
      }
}

TEST(PanelGemm, BiasWithoutReluAndReluWithoutBias) {
  CheckCase({9, 33, 21, true, false}, false);
  CheckCase({9, 33, 21, false, true}, true);
}

TEST(PanelGemm, ReluKeepsNaN) {
  const Case s{2, 3, 17, false, true};
  std::vector<float> a(6, 1.f);
  a[4] = std::numeric_limits<float>::quiet_NaN();  // row 1
  Tensor b = Tensor::Empty({3, 17}, DType::Float32);
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = -1.f;
  const std::vector<float> c = PanelProduct(s, a, 3, 1, b, {}, 17);
  for (int64_t j = 0; j < 17; ++j) {
    EXPECT_EQ(c[j], 0.f);                // -3 relu'd
    EXPECT_TRUE(std::isnan(c[17 + j]));  // NaN passes relu
  }
}

// The finishing callback sees every element of C exactly once, after the last depth block (the
// full sum), with the block's own coordinates: here it negates each block and counts visits.
TEST(PanelGemm, FinishRunsOnceOnEveryFinishedBlock) {
  for (int64_t m : {5, 300})
    for (int64_t n : {17, 64})
      for (int64_t k : {3, 1030}) {
        std::vector<float> a(m * k, 1.f), panels(cpu::PanelPackedSize(k, n));
        Tensor b = Tensor::Empty({k, n}, DType::Float32);
        for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = 1.f;
        cpu::PackPanels(b, panels.data());
        std::vector<float> c(m * n, 0.f);
        std::vector<int> visits(m * n, 0);
        cpu::PanelGemm(m, n, k, a.data(), k, 1, panels.data(), nullptr, false, c.data(), n,
                       [&](float* tile, int64_t row0, int64_t rows, int64_t col0, int64_t width) {
                         ASSERT_EQ(tile, c.data() + row0 * n + col0);
                         for (int64_t i = 0; i < rows; ++i)
                           for (int64_t j = 0; j < width; ++j) {
                             tile[i * n + j] = -tile[i * n + j];
                             ++visits[(row0 + i) * n + col0 + j];
                           }
                       });
        for (int64_t i = 0; i < m * n; ++i) {
          ASSERT_EQ(visits[i], 1) << "m=" << m << " n=" << n << " k=" << k << " at " << i;
          ASSERT_EQ(c[i], -static_cast<float>(k)) << "m=" << m << " n=" << n << " k=" << k;
        }
      }
}

}  // namespace
}  // namespace kiln
