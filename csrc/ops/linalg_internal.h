// linalg_internal.h - what MatMul (linalg.cc) and FusedMatMul (linalg_fused.cc) share: shape
// planning, operand views, oneDNN descriptors and the small-product sgemm path.
#pragma once

#include <functional>
#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/onednn.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln::linalg {

constexpr int kOnednnMaxDims = 12;  // DNNL_MAX_NDIMS

struct MatMulDims {
  Shape batch;      // broadcast batch dims
  int64_t m, k, n;  // after 1-D promotion and transposes
  Shape out_shape;  // batch + (m, n) less the dims 1-D operands added
};

// Shapes of both operands after promotion; throws ValueError naming the op and both shapes.
MatMulDims PlanMatMul(const Shape& a, const Shape& b, bool ta, bool tb, const char* op);
// A matrix operand as a (rank)-D view: 1-D promoted, transposed if asked, batch dims padded
// in front with size-1 dims.
Tensor AsMatrix(Tensor t, bool vector_is_row, bool transpose, size_t rank);
// oneDNN's fast kernels need each matrix row- or column-major (one unit stride).
bool HasUnitInnerStride(const Tensor& t);
// Strides oneDNN accepts for `t` (size-1 dims get the stride a dense layout would give them).
dnnl::memory::desc StridedDesc(const Tensor& t, dnnl::memory::data_type type);

struct MatMulEntry {
  dnnl::matmul prim;
  bool reference = false;      // oneDNN fell back to its slow reference code for these strides
  dnnl::memory::desc weights;  // the weights layout the primitive reads (packed ones differ)
  // Set when the primitive computes c^T = b^T a^T into scratch that this reorder transposes
  // into c (OnednnMatMul).
  std::shared_ptr<dnnl::reorder> transpose_out;
  // float32 on oneDNN's jit gemm (CPUs without AVX-512) with a transposed a, which it reads at
  // about half speed: OnednnMatMul copies a into row-major first.
  bool copy_transposed_a = false;
  // float32 on the jit gemm of a CPU without AVX-512, a row-major b and at least
  // kMisalignMinRows rows: a 32-byte-aligned b is copied 16 bytes off that boundary first.
  bool misalign_b = false;
};

void AppendLayout(cpu::PrimitiveKey& key, const Tensor& t);

// While the machine is contended (core/contention.h) oneDNN runs on the calling thread alone
// (core/parallel.h: its own threads spin against the busy processes). A product c = a @ b (+ r)
// of at least kContendedSplitMinFlops then splits into blocks over kiln's sleeping helpers, each
// block its own oneDNN call fn(a, b, c, r) on views: a 2-D product's rows (b whole), a batched
// one's leading dim (b's too, unless it broadcasts). False, running nothing, where the machine is
// not contended or the product is small. Encoder block forward beside two busy processes, 2
// threads, Zen 4: 35.0 -> 24.0-26.6 ms (JAX 24.0).
constexpr double kContendedSplitMinFlops = 1e8;
constexpr int64_t kContendedSplitRows = 16;  // 2-D blocks are whole multiples of this many rows
using MatMulBlockFn =
    std::function<void(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& r)>;
bool SplitWhileContended(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& r,
                         const MatMulBlockFn& fn);
// Whether a product of `flops` in `items` blocks' worth would split.
bool SplitsWhileContended(double flops, int64_t items);

// Row counts up to which a single (unbatched) float32 product goes to dnnl_sgemm: its jit gemv
// streams B once, where the matmul primitive first packs B into blocks (3x slower at M = 1).
constexpr int64_t kSgemmMaxRows = 16;
// c = a @ b for a float32 product with no batch (all batch dims 1) and few rows; false when
// it does not apply.
bool TrySgemm(const Tensor& a, const Tensor& b, const Tensor& c);
// c = a @ b for a 2-D float32 product of at most cpu::kNarrowMaxColumns columns whose b is a
// row-major weight's transposed view (a Dense layer's), on kiln's dot-product kernel
// (kernels/cpu/narrow_gemm.h); false when it does not apply. matmul and fused_matmul both take
// it, so PyNative's dense and Graph mode's fused one sum in the same order.
bool TryNarrowGemm(const Tensor& a, const Tensor& b, const Tensor& c);

// a, c, r (r may be undefined) of a product whose weight b has no batch dims, as 2-D views with
// the batch folded into the rows: one (B*M, K) @ (K, N) product instead of B small ones. False,
// changing nothing, when views cannot express it (a transposed A, a batched B).
bool FoldBatchIntoRows(Tensor& a, Tensor& b, Tensor& c, Tensor& r);

// The gradients of a and b (inputs 0 and 1, with transpose flags in attributes 0 and 1) given
// the gradient `grad` of a @ b; MatMul's rule and FusedMatMul's share it.
std::vector<GradVar> MatMulInputGrads(GradBuilder& g, GradVar grad);

// Runs op `kind`'s kernel with `out` as its output (elementwise kernels may read `out` too);
// missing attributes take their schema defaults. Fused ops use it for their unfused paths.
void RunKernelInto(OpKind kind, std::vector<Tensor> inputs, Attrs attrs, const Tensor& out);

void RegisterFusedLinalgOps(OpRegistry& r);
// FusedAttention (attention.cc).
void RegisterAttentionOps(OpRegistry& r);

}  // namespace kiln::linalg
