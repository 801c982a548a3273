// test_narrow_gemm.cc - the few-column product kernel (kernels/cpu/narrow_gemm.h) against double
// sums, at every width, with padded leading dimensions and on split rows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/narrow_gemm.h"

namespace kiln::cpu {
namespace {

// Runs NarrowGemm on random m x k and n x k operands with padded rows and checks every output
// and that the padding of c stays as it was.
void CheckProduct(int64_t m, int64_t n, int64_t k) {
  std::mt19937 gen(static_cast<unsigned>(m * 1000 + n * 10 + k));
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  const int64_t lda = k + 3, ldw = k + 1, ldc = n + 2;
  std::vector<float> a(m * lda), w(n * ldw), c(m * ldc, -7.f);
  for (float& x : a) x = dist(gen);
  for (float& x : w) x = dist(gen);
  NarrowGemm(m, n, k, a.data(), lda, w.data(), ldw, c.data(), ldc);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = c[i * ldc + j];
      if (j >= n) {
        ASSERT_EQ(got, -7.f) << "padding written at (" << i << ", " << j << ")";
        continue;
      }
      double want = 0;
      for (int64_t p = 0; p < k; ++p) want += double(a[i * lda + p]) * w[j * ldw + p];
      ASSERT_NEAR(got, want, 1e-5 * (1 + std::sqrt(double(k))))
          << "m " << m << " n " << n << " k " << k << " at (" << i << ", " << j << ")";
    }
  }
}

TEST(NarrowGemm, EveryWidthAgainstDoubleSums) {
  for (int64_t n = 1; n <= kNarrowMaxColumns; ++n)
    for (int64_t m : {1, 2, 3, 7, 31, 64})
      for (int64_t k : {1, 5, 16, 17, 512}) CheckProduct(m, n, k);
}

TEST(NarrowGemm, RowsSplitOverThreads) {
  const int before = GetNumThreads();
  SetNumThreads(2);
  CheckProduct(4099, 10, 300);  // 12 M multiply-adds: split
  SetNumThreads(before);
}

}  // namespace
}  // namespace kiln::cpu
