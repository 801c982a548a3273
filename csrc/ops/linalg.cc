// linalg.cc - MatMul: NumPy matmul semantics, float32/bfloat16 on oneDNN, the rest on GemmFallback
// (FusedMatMul, a matmul with its epilogue, is in linalg_fused.cc).
//
// The operands reach the kernels as strided views: 1-D operands get a unit dim, transpose flags
// swap the last two strides, batch dims stay size-1 where they broadcast. oneDNN takes those
// views as strided memory descriptors, so transposed weights (dense's weight.T) cost no copy.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "core/contention.h"
#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/narrow_gemm.h"
#include "kernels/cpu/panel_gemm.h"
#include "ops/linalg_internal.h"

namespace kiln {
namespace linalg {

MatMulDims PlanMatMul(const Shape& a, const Shape& b, bool ta, bool tb, const char* op) {
  KILN_CHECK(!a.empty() && !b.empty(), Value, op,
             ": both operands must be at least 1-D, got shapes ", ShapeStr(a), " and ",
             ShapeStr(b));
  const size_t na = a.size(), nb = b.size();
  // NumPy: a 1-D left operand is a row vector, a 1-D right operand a column vector; the
  // transpose flags only apply to operands that are matrices.
  int64_t m = na == 1 ? 1 : a[na - 2 + ta], ka = na == 1 ? a[0] : a[na - 1 - ta];
  int64_t kb = nb == 1 ? b[0] : b[nb - 2 + tb], n = nb == 1 ? 1 : b[nb - 1 - tb];
  KILN_CHECK(ka == kb || ka == -1 || kb == -1, Value, op, ": shapes ", ShapeStr(a),
             ta ? " (transposed)" : "", " and ", ShapeStr(b), tb ? " (transposed)" : "",
             " are not aligned: contraction sizes ", ka, " and ", kb, " differ");
  MatMulDims dims;
  Shape batch_a(a.begin(), a.end() - std::min<size_t>(na, 2));
  Shape batch_b(b.begin(), b.end() - std::min<size_t>(nb, 2));
  try {
    dims.batch = BroadcastShapes(batch_a, batch_b, op);
  } catch (const Error&) {  // restate with the operands' full shapes, not just their batch dims
    Throw(ErrorKind::Value, op, ": batch dimensions of shapes ", ShapeStr(a), " and ", ShapeStr(b),
          " cannot be broadcast together");
  }
  dims.m = m, dims.k = ka == -1 ? kb : ka, dims.n = n;
  dims.out_shape = dims.batch;
  if (na > 1) dims.out_shape.push_back(m);
  if (nb > 1) dims.out_shape.push_back(n);
  return dims;
}

// A matrix operand as a (rank)-D view: 1-D promoted, transposed if asked, batch dims padded
// in front with size-1 dims.
Tensor AsMatrix(Tensor t, bool vector_is_row, bool transpose, size_t rank) {
  if (t.ndim() == 1) {
    t = t.Unsqueeze(vector_is_row ? 0 : 1);
  } else if (transpose) {
    std::vector<int64_t> perm(t.ndim());
    for (int64_t i = 0; i < t.ndim(); ++i) perm[i] = i;
    std::swap(perm[t.ndim() - 1], perm[t.ndim() - 2]);
    t = t.Permute(perm);
  }
  while (static_cast<size_t>(t.ndim()) < rank) t = t.Unsqueeze(0);
  return t;
}

// oneDNN's fast kernels need each matrix row- or column-major (one unit stride).
bool HasUnitInnerStride(const Tensor& t) {
  const int64_t nd = t.ndim();
  return t.strides()[nd - 1] == 1 || t.strides()[nd - 2] == 1 || t.dim(nd - 1) == 1 ||
         t.dim(nd - 2) == 1;
}

// Strides oneDNN accepts for `t`: a size-1 dim gets the stride a dense layout would give it,
// since its stride is never used but oneDNN's layout checks still look at it.
dnnl::memory::desc StridedDesc(const Tensor& t, dnnl::memory::data_type type) {
  const int64_t nd = t.ndim();
  dnnl::memory::dims dims(t.shape().begin(), t.shape().end()),
      strides(t.strides().begin(), t.strides().end());
  for (int64_t d = nd - 1; d >= 0; --d) {
    if (dims[d] != 1) continue;
    strides[d] = d == nd - 1 ? 1 : strides[d + 1] * dims[d + 1];
  }
  return dnnl::memory::desc(dims, type, strides);
}

void AppendLayout(cpu::PrimitiveKey& key, const Tensor& t) {
  for (int64_t d : t.shape()) key.push_back(d);
  for (int64_t s : t.strides()) key.push_back(s);
}

// How sgemm reads a row-major matrix view: 'N' or 'T' and its leading dimension; false if
// neither dim has unit stride.
static bool BlasLayout(const Tensor& t, char* trans, int64_t* ld) {
  const int64_t nd = t.ndim(), rows = t.dim(nd - 2), cols = t.dim(nd - 1);
  const int64_t s_rows = t.strides()[nd - 2], s_cols = t.strides()[nd - 1];
  if (s_cols == 1 || cols == 1) {
    *trans = 'N';
    *ld = rows == 1 ? std::max<int64_t>(cols, 1) : s_rows;
    return *ld >= std::max<int64_t>(cols, 1);
  }
  if (s_rows == 1 || rows == 1) {
    *trans = 'T';
    *ld = cols == 1 ? std::max<int64_t>(rows, 1) : s_cols;
    return *ld >= std::max<int64_t>(rows, 1);
  }
  return false;
}

bool SplitsWhileContended(double flops, int64_t items) {
  if (GetNumThreads() < 2 || items < 2 || flops < kContendedSplitMinFlops) return false;
  return MachineContended();
}

namespace {

// t's items [first, first + size) along dim 0; t itself where that dim broadcasts (size 1).
Tensor Items(const Tensor& t, int64_t first, int64_t size) {
  if (!t.defined() || t.dim(0) == 1) return t;
  Shape shape = t.shape();
  shape[0] = size;
  return t.AsStrided(shape, t.strides(), t.offset() + first * t.strides()[0]);
}

}  // namespace

bool SplitWhileContended(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& r,
                         const MatMulBlockFn& fn) {
  const int64_t nd = c.ndim();
  double flops = 2.0 * static_cast<double>(a.dim(nd - 1));
  for (int64_t d = 0; d < nd; ++d) flops *= static_cast<double>(c.dim(d));
  // 2-D: blocks of rows, whole multiples of kContendedSplitRows; batched: blocks of dim 0.
  const bool rows = nd == 2;
  const int64_t unit = rows ? kContendedSplitRows : 1;
  const int64_t items = c.dim(0) / unit;
  if (!SplitsWhileContended(flops, items)) return false;
  // Twice as many blocks as threads: a helper the scheduler takes off its core holds one block,
  // and the others go on meanwhile.
  const int64_t per_block = (items + 2 * GetNumThreads() - 1) / (2 * GetNumThreads()) * unit;
  const int64_t total = c.dim(0), count = (total + per_block - 1) / per_block;
  ParallelFor(count, 1, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t first = block * per_block, size = std::min(per_block, total - first);
      fn(Items(a, first, size), rows ? b : Items(b, first, size), Items(c, first, size),
         Items(r, first, size));
    }
  });
  return true;
}

// c = a @ b for a float32 product with no batch (all batch dims 1) and few rows; false when
// it does not apply.
bool TrySgemm(const Tensor& a, const Tensor& b, const Tensor& c) {
  const int64_t nd = c.ndim(), m = c.dim(nd - 2), n = c.dim(nd - 1), k = a.dim(nd - 1);
  if (c.dtype() != DType::Float32 || m > kSgemmMaxRows || c.numel() != m * n) return false;
  char ta, tb;
  int64_t lda, ldb;
  if (!BlasLayout(a, &ta, &lda) || !BlasLayout(b, &tb, &ldb)) return false;
  dnnl_status_t status = dnnl_success;
  RunInPool([&] {  // oneDNN's sgemm splits its work for the pool it runs in
    status = dnnl_sgemm(ta, tb, m, n, k, 1.f, a.data<float>(), lda, b.data<float>(), ldb, 0.f,
                        c.data<float>(), n);
  });
  return status == dnnl_success;
}

bool TryNarrowGemm(const Tensor& a, const Tensor& b, const Tensor& c) {
  if (c.dtype() != DType::Float32 || c.ndim() != 2 || c.dim(1) > cpu::kNarrowMaxColumns ||
      a.strides()[1] != 1 || b.strides()[0] != 1)
    return false;
  cpu::NarrowGemm(c.dim(0), c.dim(1), a.dim(1), a.data<float>(), a.strides()[0], b.data<float>(),
                  b.strides()[1], c.data<float>(), c.dim(1));
  return true;
}

bool FoldBatchIntoRows(Tensor& a, Tensor& b, Tensor& c, Tensor& r) {
  const int64_t rank = c.ndim();
  for (int64_t d = 0; d + 2 < rank; ++d)
    if (b.dim(d) != 1) return false;
  if (rank == 2) return true;
  const int64_t rows = c.numel() / c.dim(rank - 1);
  std::optional<Tensor> fa = a.ViewAs({rows, a.dim(rank - 1)});  // a's batch dims are c's
  if (!fa || a.strides()[rank - 1] != 1) return false;
  a = *fa;
  b = b.AsStrided({b.dim(rank - 2), b.dim(rank - 1)},
                  {b.strides()[rank - 2], b.strides()[rank - 1]}, b.offset());
  c = *c.ViewAs({rows, c.dim(rank - 1)});
  if (r.defined()) r = *r.ViewAs({rows, c.dim(1)});
  return true;
}

// Gradients in the promoted (matrix) forms a_p, b_p and g_p, written so that each is one more
// MatMul with transpose flags: with A = op(a_p), B = op(b_p), C = A @ B,
//   dA = g @ B^T, so d(a_p) = ta ? B @ g^T : g @ B^T;
//   dB = A^T @ g, so d(b_p) = tb ? g^T @ A : A^T @ g.
// ToInput then sums broadcast batch dims away and drops the unit dim of a 1-D operand. A 2-D b
// under a batched a (a dense layer on a sequence) gets dB from one product over all rows.
// The gradients of a and b (inputs 0 and 1, with transpose flags in attributes 0 and 1) given
// the gradient `grad` of a @ b; MatMul's rule and FusedMatMul's share it.
std::vector<GradVar> MatMulInputGrads(GradBuilder& g, GradVar grad) {
  GradVar a = g.input(0), b = g.input(1);
  const Shape sa = g.meta(a).shape, sb = g.meta(b).shape;
  const bool ta = sa.size() > 1 && AttrBool(g.attrs(), 0),
             tb = sb.size() > 1 && AttrBool(g.attrs(), 1);
  MatMulDims dims = PlanMatMul(sa, sb, ta, tb, "matmul");
  auto reshape = [&](GradVar v, Shape shape) { return g.Emit1(OpKind::Reshape, {v}, {shape}); };
  // a is read only for b's gradient and b only for a's (grad_reads_factors_crosswise).
  GradVar ap = sa.size() == 1 && g.wants_input_grad(1) ? reshape(a, {1, sa[0]}) : a;
  GradVar bp = sb.size() == 1 && g.wants_input_grad(0) ? reshape(b, {sb[0], 1}) : b;
  Shape full = dims.batch;
  full.insert(full.end(), {dims.m, dims.n});
  GradVar gp = g.meta(grad).shape == full ? grad : reshape(grad, full);
  auto mm = [&](GradVar x, GradVar y, bool tx, bool ty) {
    return g.Emit1(OpKind::MatMul, {x, y}, {tx, ty});
  };
  std::vector<GradVar> grads(2);
  if (g.wants_input_grad(0))
    grads[0] = ToInput(g, ta ? mm(bp, gp, tb, true) : mm(gp, bp, false, !tb), 0);
  const bool rows_of_a = sb.size() == 2 && sa.size() > 2 && !ta && sa.back() >= 0 && dims.n >= 0;
  if (g.wants_input_grad(1) && rows_of_a) {
    GradVar a2 = reshape(a, {-1, sa.back()}), g2 = reshape(gp, {-1, dims.n});
    grads[1] = ToInput(g, tb ? mm(g2, a2, true, false) : mm(a2, g2, true, false), 1);
  } else if (g.wants_input_grad(1)) {
    GradVar db = tb ? mm(gp, ap, true, ta) : mm(ap, gp, !ta, false);
    if (sb.size() == 1) {  // drop the trailing unit column first: ToInput aligns dims from the end
      Shape shape = dims.batch;
      shape.push_back(sb[0]);
      db = reshape(db, shape);
    }
    grads[1] = ToInput(g, db, 1);
  }
  return grads;
}

}  // namespace linalg

namespace {

using namespace linalg;  // NOLINT: this file is the linalg family

std::vector<TensorMeta> InferMatMul(const OpDef& def, const std::vector<TensorMeta>& in,
                                    const Attrs& attrs) {
  MatMulDims dims =
      PlanMatMul(in[0].shape, in[1].shape, AttrBool(attrs, 0), AttrBool(attrs, 1), def.name);
  return {TensorMeta{in[0].dtype, dims.out_shape}};
}

// The view of t with its last two dims swapped (a transpose, no copy).
Tensor SwapLastTwo(const Tensor& t) {
  Shape shape = t.shape(), strides = t.strides();
  const size_t n = shape.size();
  std::swap(shape[n - 1], shape[n - 2]);
  std::swap(strides[n - 1], strides[n - 2]);
  return t.AsStrided(shape, strides, t.offset());
}

bool RunsOnAmx(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).find("amx") != std::string::npos;
}

// A matrix (per batch index) stored column-major: unit stride down its rows.
bool IsTransposedMatrix(const Tensor& t) {
  const int64_t nd = t.ndim();
  return t.strides()[nd - 2] == 1 && t.strides()[nd - 1] != 1 && t.dim(nd - 1) > 1 &&
         t.dim(nd - 2) > 1;
}

// oneDNN's float32 jit gemm on AVX2 runs up to 1.7x slower when a row-major b starts on a
// 32-byte boundary, and every kiln buffer does (measured, 2 threads: 256x1024 @ 1024x1024
// 5.7 ms aligned, 3.3 ms at 8, 16 or 48 bytes past 64; 512^3 2.0 against 1.5 ms; a transposed b
// and a's alignment make no difference). Copying b costs 8 bytes of traffic per element against
// the product's 2m flops per element, so it pays from a few hundred rows of a.
constexpr int64_t kMisalignMinRows = 256;
constexpr int64_t kMisalignMaxElements = int64_t{1} << 24;  // the copy's memory: 64 MB at most

bool OnednnBelowAvx512() {
  static const bool below = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
    return (isa & avx512) != avx512;  // each ISA's value holds the bits of those it extends
  }();
  return below;
}

// b copied into a buffer that starts 16 bytes past a 32-byte boundary, same shape, contiguous.
Tensor MisalignedCopy(const Tensor& b) {
  constexpr int64_t kShift = 16 / sizeof(float);
  Tensor buffer = Tensor::Empty({b.numel() + kShift}, b.dtype());  // 64-byte aligned
  Tensor shifted = buffer.AsStrided(b.shape(), ContiguousStrides(b.shape()), kShift);
  cpu::CopyInto(b, shifted);
  return shifted;
}

bool IsVectorAligned(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.raw_data()) % 32 == 0;
}

// c = a @ b on oneDNN; a, b, c are (rank)-D views of one dtype oneDNN runs, c contiguous.
void OnednnMatMul(const Tensor& a, const Tensor& b, const Tensor& c) {
  const auto type = cpu::OnednnType(c.dtype());
  cpu::PrimitiveKey key{static_cast<int64_t>(cpu::PrimitiveTag::MatMul),
                        static_cast<int64_t>(c.dtype()), c.ndim()};
  AppendLayout(key, a);
  AppendLayout(key, b);
  AppendLayout(key, c);
  auto entry = cpu::CachedPrimitive<MatMulEntry>(key, [&] {
    auto make = [&](const Tensor& x, const Tensor& y, const Tensor& z) {
      return dnnl::matmul::primitive_desc(cpu::OnednnEngine(), StridedDesc(x, type),
                                          StridedDesc(y, type), StridedDesc(z, type),
                                          cpu::ConcurrentAttr());
    };
    auto pd = make(a, b, c);
    // oneDNN takes AMX for some bf16 shapes only one way round: the weight gradient of a
    // 784-input layer, 512x64 @ 64x784, runs on AVX512-BF16 4-6x slower than 784x64 @ 64x512 on
    // AMX. Where the swapped product c^T = b^T a^T gets AMX and this one does not, it runs into
    // scratch that one reorder (a jit transpose) copies into c.
    if (type == dnnl::memory::data_type::bf16 && !RunsOnAmx(pd)) {
      Tensor ct = SwapLastTwo(c);  // shape of c^T; its scratch is that shape, contiguous
      auto scratch = dnnl::memory::desc(ct.shape(), type, ContiguousStrides(ct.shape()));
      dnnl::matmul::primitive_desc swapped(cpu::OnednnEngine(), StridedDesc(SwapLastTwo(b), type),
                                           StridedDesc(SwapLastTwo(a), type), scratch,
                                           cpu::ConcurrentAttr());
      if (RunsOnAmx(swapped)) {
        Shape strides = ContiguousStrides(ct.shape());  // the scratch read as c's shape
        std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
        auto& engine = cpu::OnednnEngine();
        auto transpose = std::make_shared<dnnl::reorder>(
            dnnl::reorder::primitive_desc(engine, dnnl::memory::desc(c.shape(), type, strides),
                                          engine, StridedDesc(c, type), cpu::ConcurrentAttr()));
        return MatMulEntry{dnnl::matmul(swapped), false, swapped.weights_desc(), transpose};
      }
    }
    MatMulEntry plain{dnnl::matmul(pd), cpu::IsReferenceImpl(pd), pd.weights_desc(), nullptr};
    // Both copies below were measured on AVX2 only, where float32 products run on this gemm.
    const bool avx2_gemm = type == dnnl::memory::data_type::f32 && OnednnBelowAvx512() &&
                           std::string(pd.impl_info_str()).rfind("gemm:jit", 0) == 0;
    plain.copy_transposed_a = avx2_gemm && IsTransposedMatrix(a);
    plain.misalign_b =
        avx2_gemm && b.strides()[b.ndim() - 1] == 1 && c.dim(c.ndim() - 2) >= kMisalignMinRows;
    return plain;
  });
  if (entry->misalign_b && IsVectorAligned(b) && b.numel() <= kMisalignMaxElements) {
    OnednnMatMul(a, MisalignedCopy(b), c);  // the copy is contiguous: same entry when b was
    return;
  }
  if (entry->copy_transposed_a) {
    // Measured (2 threads, AVX2): the weight gradient (1024x1024)^T @ 1024x256 took 6.9 ms as
    // given and 3.8 ms copied first (the tiled transpose: 0.7 ms); never slower on the shapes
    // tried (256x1024 @ 1024x1024: 3.6 -> 3.5 ms).
    OnednnMatMul(a.Contiguous(), b, c);
    return;
  }
  if (entry->transpose_out) {
    auto& engine = cpu::OnednnEngine();
    Tensor ct = SwapLastTwo(c);
    Tensor scratch = Tensor::Empty(ct.shape(), c.dtype());
    dnnl::memory src(StridedDesc(SwapLastTwo(b), type), engine, b.raw_data());
    dnnl::memory weights(StridedDesc(SwapLastTwo(a), type), engine, a.raw_data());
    dnnl::memory made(StridedDesc(scratch, type), engine, scratch.raw_data());
    cpu::OnednnExecute(entry->prim,
                       {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, made}});
    Shape strides = scratch.strides();
    std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
    dnnl::memory from(dnnl::memory::desc(c.shape(), type, strides), engine, scratch.raw_data());
    dnnl::memory to(StridedDesc(c, type), engine, c.raw_data());
    cpu::OnednnExecute(*entry->transpose_out, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
    return;
  }
  if (entry->reference && !(a.is_contiguous() && b.is_contiguous())) {
    // A layout only the reference code takes (e.g. batch strides oneDNN cannot express):
    // copying into plain row-major is far cheaper than running it.
    OnednnMatMul(a.Contiguous(), b.Contiguous(), c);
    return;
  }
  auto& engine = cpu::OnednnEngine();
  dnnl::memory ma(StridedDesc(a, type), engine, a.raw_data());
  dnnl::memory mb(StridedDesc(b, type), engine, b.raw_data());
  dnnl::memory mc(StridedDesc(c, type), engine, c.raw_data());
  cpu::OnednnExecute(entry->prim, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
}

// Below AVX-512, a float32 2-D product with a row-major b and at least 64 rows (32 where b is
// 512 or more wide): b packed into panels for this call, then kiln's panel kernel. oneDNN's
// AVX2 sgemm reads such a b at 45-65% of the FMA peak (kiln's buffers start on the 32-byte
// boundary it runs slowest from, and b's rows 2-4 KB apart alias in L1); with the packing
// counted, the panels measured 0.51-0.78x its time at 64-255 rows and 512-1024 columns (1 and
// 2 threads), 0.92-1.0x at 10 or 256 columns. From 256 rows, isolated products measured level
// with oneDNN on a misaligned copy of b (0.93-1.10x), but in the encoder block's training step
// its two input gradients (dy @ w) went 3.6 -> 2.9 and 3.1 -> 2.8 ms. False when this does not
// apply.
constexpr int64_t kPanelMinRows = 64;
constexpr int64_t kPanelMinRowsWide = 32;  // for b of kPanelWideColumns or more
constexpr int64_t kPanelWideColumns = 512;

bool TryPanelMatMul(const Tensor& a, const Tensor& b, const Tensor& c) {
  if (!cpu::PanelGemmAvailable() || c.ndim() != 2 || c.dtype() != DType::Float32) return false;
  const int64_t m = c.dim(0), n = c.dim(1), k = a.dim(1);
  const int64_t min_rows = n >= kPanelWideColumns ? kPanelMinRowsWide : kPanelMinRows;
  if (m < min_rows || b.strides()[1] != 1) return false;
  if (a.strides()[1] != 1) {
    if (a.strides()[0] != 1) return false;
    // A weight gradient's dy^T: read in place, the kernel's six broadcasts per step come from one
    // cache line but each block's stores dominate at small depths (measured 1.2-1.7x slower);
    // copied row-major first (the tiled transpose) it beat oneDNN on its own copy: the encoder
    // step's fc weight gradients 4.2 -> 3.3 and 4.0 -> 3.7 ms, the seed step's 5% faster.
    return TryPanelMatMul(a.Contiguous(), b, c);
  }
  Tensor panels = Tensor::Empty({cpu::PanelPackedSize(k, n)}, DType::Float32);
  cpu::PackPanels(b, panels.data<float>());
  cpu::PanelGemm(m, n, k, a.data<float>(), a.strides()[0], 1, panels.data<float>(), nullptr, false,
                 c.data<float>(), n);
  return true;
}

void MatMulKernel(KernelContext& ctx) {
  const Tensor& out = ctx.outputs[0];
  const Tensor &in_a = ctx.inputs[0], &in_b = ctx.inputs[1];
  const bool ta = AttrBool(ctx.attrs, 0), tb = AttrBool(ctx.attrs, 1);
  MatMulDims dims = PlanMatMul(in_a.shape(), in_b.shape(), ta, tb, ctx.def.name);
  const size_t rank = dims.batch.size() + 2;
  Tensor a = AsMatrix(in_a, true, ta, rank), b = AsMatrix(in_b, false, tb, rank);
  Shape c_shape = dims.batch;
  c_shape.push_back(dims.m);
  c_shape.push_back(dims.n);
  Tensor c = out.AsStrided(c_shape, ContiguousStrides(c_shape), out.offset());
  if (c.numel() == 0) return;
  if (dims.k == 0) {
    cpu::Fill(c, 0.0);
    return;
  }

  DType dtype = c.dtype();
  const bool onednn_type =
      dtype == DType::Float32 || dtype == DType::Float16 || dtype == DType::BFloat16;
  if (!onednn_type || static_cast<int>(rank) > kOnednnMaxDims) {
    Shape a_shape = dims.batch, b_shape = dims.batch;
    a_shape.insert(a_shape.end(), {dims.m, dims.k});
    b_shape.insert(b_shape.end(), {dims.k, dims.n});
    cpu::GemmFallback(a.Expand(a_shape), b.Expand(b_shape), c);
    return;
  }
  if (!HasUnitInnerStride(a)) a = a.Contiguous();
  if (!HasUnitInnerStride(b)) b = b.Contiguous();
  Tensor no_residual;
  const bool folded = FoldBatchIntoRows(a, b, c, no_residual);  // one product where only A batches
  if (folded && TryNarrowGemm(a, b, c)) return;
  if (dtype == DType::Float32 && TrySgemm(a, b, c)) return;
  if (TryPanelMatMul(a, b, c)) return;
  if (dtype == DType::Float32 || (dtype == DType::BFloat16 && cpu::OnednnHasNativeBF16())) {
    auto block = [&](const Tensor& ai, const Tensor& bi, const Tensor& ci, const Tensor&) {
      OnednnMatMul(ai, bi, ci);
    };
    if (!SplitWhileContended(a, b, c, Tensor(), block)) OnednnMatMul(a, b, c);
    return;
  }
  // float16 (and bfloat16 without native support): compute in float32, round once at the end.
  Tensor c32 = Tensor::Empty(c.shape(), DType::Float32);
  OnednnMatMul(a.To(DType::Float32), b.To(DType::Float32), c32);
  cpu::CopyInto(c32, c);
}

std::vector<GradVar> MatMulGrad(GradBuilder& g) { return MatMulInputGrads(g, g.out_grad(0)); }

}  // namespace

void RegisterLinalgOps(OpRegistry& r) {
  OpDef matmul;
  matmul.kind = OpKind::MatMul;
  matmul.inputs = {"input", "other"};
  matmul.attrs = {{"transpose_a", false}, {"transpose_b", false}};
  matmul.infer = InferMatMul;
  matmul.kernel = MatMulKernel;
  matmul.promotion = Promotion::Common;
  matmul.grad = MatMulGrad;
  matmul.grad_reads_factors_crosswise = true;
  r.Add(GradReads(std::move(matmul), {0, 1}, {}));
  linalg::RegisterFusedLinalgOps(r);
  linalg::RegisterAttentionOps(r);
}

}  // namespace kiln
