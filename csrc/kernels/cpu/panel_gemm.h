// panel_gemm.h - float32 products by a right operand packed into 16-column panels (AVX2 builds).
//
// Without AVX-512, oneDNN's matmul picks a plain layout for weights and its jit sgemm ran a
// batch-64 dense layer at 83-88% of the FMA peak here (45-65% on a row-major operand at a
// 32-byte boundary); with the operand packed into K x 16 panels that the inner loop reads front
// to back, a 6 x 16 register block reaches 98% in isolation (docs/benchmarks_log.md, "Packed
// panels"). Weights that stay the same between calls keep their panels in the derived cache
// (ops/linalg_fused.cc); other operands are packed for the call (ops/linalg.cc).
#pragma once

#include <cstdint>
#include <functional>

#include "core/tensor.h"

namespace kiln::cpu {

// Whether this build has the panel kernel (AVX2 + FMA without AVX-512, where oneDNN keeps
// weights plain).
bool PanelGemmAvailable();

// Floats in b (K x N) packed into panels: ceil(N / 16) panels of K x 16.
int64_t PanelPackedSize(int64_t k, int64_t n);

// Packs the 2-D float32 view b (K x N, any strides) into `out` (PanelPackedSize floats): panel p
// holds columns [16p, 16p + 16) row after row, columns past N zero.
void PackPanels(const Tensor& b, float* out);

// b (2-D float32, any strides) packed by PackPanels into a new tensor of PanelPackedSize floats.
Tensor PackedPanelsOf(const Tensor& b);

// The rest of an epilogue, run on each finished block of C after its bias and relu, by the
// thread that computed it, while the block is still in cache: `tile` is C's element
// (row0, col0), the block `rows` x `width` with rows ldc apart. A GELU or a residual add there
// saves a separate pass over C.
using PanelTileFn =
    std::function<void(float* tile, int64_t row0, int64_t rows, int64_t col0, int64_t width)>;

// c = a @ b (+ bias) (relu'd when `relu`) for a (M x K, element (i, p) at a[i * ars + p * acs]),
// b packed by PackPanels, bias null or N floats, c (M x N, rows ldc apart); K >= 1. Relu keeps
// NaN. `finish`, when given, then runs on every block of C. Runs on kiln's pool.
void PanelGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs,
               const float* panels, const float* bias, bool relu, float* c, int64_t ldc,
               const PanelTileFn& finish = nullptr);

}  // namespace kiln::cpu
