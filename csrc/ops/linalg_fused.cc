// linalg_fused.cc - FusedMatMul: act(a @ b + bias) + residual, the epilogue fuse_epilogue folds
// into a matmul, optionally reading its weight from a copy packed once (pack_weights).
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/contention.h"
#include "core/error.h"
#include "kernels/cpu/activation_math.h"
#include "kernels/cpu/derived_cache.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/panel_gemm.h"
#include "kernels/cpu/vector_libm.h"
#include "ops/linalg_internal.h"

namespace kiln::linalg {
namespace {

// float32 runs as one oneDNN matmul primitive: the bias as its bias memory, the activation as an
// eltwise post-op and the residual as a binary-add post-op, cached like MatMul's. Small unbatched
// products take MatMul's sgemm path and apply the epilogue in one sweep over the (few) rows. Other
// dtypes and layouts run the unfused kernels (matmul, add, activation, add) in place on the
// output, which gives exactly the unfused ops' values.

enum class Activation : int64_t { None, Relu, GeluTanh, Sigmoid, Tanh, GeluErf };

Activation ParseActivation(const std::string& name, const char* op) {
  if (name == "none") return Activation::None;
  if (name == "relu") return Activation::Relu;
  if (name == "gelu_tanh") return Activation::GeluTanh;
  if (name == "gelu") return Activation::GeluErf;
  if (name == "sigmoid") return Activation::Sigmoid;
  if (name == "tanh") return Activation::Tanh;
  Throw(ErrorKind::Value, op,
        ": activation must be 'none', 'relu', 'gelu', 'gelu_tanh', 'sigmoid' or 'tanh', got '",
        name, "'");
}

bool InputPresent(const std::vector<TensorMeta>& in, size_t i) {
  return i < in.size() && in[i].present;
}

std::vector<TensorMeta> InferFusedMatMul(const OpDef& def, const std::vector<TensorMeta>& in,
                                         const Attrs& attrs) {
  const Activation act = ParseActivation(AttrString(attrs, 2), def.name);
  const TensorMeta &a = in[0], &b = in[1];
  KILN_CHECK(a.dtype != DType::Bool, Type, def.name, ": not supported for bool tensors");
  if (act != Activation::None && act != Activation::Relu) RequireFloating(a, def.name);
  MatMulDims dims = PlanMatMul(a.shape, b.shape, AttrBool(attrs, 0), AttrBool(attrs, 1), def.name);
  const Shape& out = dims.out_shape;
  for (size_t i = 1; i < in.size(); ++i)
    KILN_CHECK(!in[i].present || in[i].dtype == a.dtype, Type, def.name,
               ": operands must share one dtype, got ", DTypeName(a.dtype), " and ",
               DTypeName(in[i].dtype));
  if (InputPresent(in, 2)) {
    const Shape& bias = in[2].shape;
    const int64_t n = out.empty() ? 1 : out.back();
    KILN_CHECK(!out.empty() && bias.size() == 1 && (bias[0] == n || bias[0] < 0 || n < 0), Value,
               def.name, ": bias must be 1-D of length ", n, " (the last output dim), got shape ",
               ShapeStr(bias), " for an output of shape ", ShapeStr(out));
  }
  if (InputPresent(in, 3)) {
    KILN_CHECK(act == Activation::None, Value, def.name,
               ": a residual is only added when activation is 'none', got '", AttrString(attrs, 2),
               "'");
    const Shape& r = in[3].shape;
    bool fits = r.size() <= out.size();
    for (size_t i = 0; fits && i < r.size(); ++i) {
      const int64_t rd = r[r.size() - 1 - i], od = out[out.size() - 1 - i];
      fits = rd == 1 || rd == od || rd < 0 || od < 0;
    }
    KILN_CHECK(fits, Value, def.name, ": residual of shape ", ShapeStr(r),
               " does not broadcast to the output shape ", ShapeStr(out));
  }
  return {TensorMeta{a.dtype, out}};
}

}  // namespace

void RunKernelInto(OpKind kind, std::vector<Tensor> inputs, Attrs attrs, const Tensor& out) {
  const OpDef& def = GetOpDef(kind);
  for (size_t i = attrs.size(); i < def.attrs.size(); ++i)
    attrs.push_back(def.attrs[i].default_value);
  std::vector<Tensor> outputs{out};
  KernelContext ctx{def, inputs, outputs, attrs};
  def.kernel(ctx);
}

namespace {

void UnfusedActivation(Activation act, const Tensor& out) {
  switch (act) {
    case Activation::None:
      return;
    case Activation::Relu:
      return RunKernelInto(OpKind::Relu, {out}, {}, out);
    case Activation::GeluTanh:
      return RunKernelInto(OpKind::Gelu, {out}, {std::string("tanh")}, out);
    case Activation::GeluErf:
      return RunKernelInto(OpKind::Gelu, {out}, {std::string("none")}, out);
    case Activation::Sigmoid:
      return RunKernelInto(OpKind::Sigmoid, {out}, {}, out);
    case Activation::Tanh:
      return RunKernelInto(OpKind::Tanh, {out}, {}, out);
  }
}

template <Activation kAct>
float Activate(float x) {
  if constexpr (kAct == Activation::Relu) return x < 0.f ? 0.f : x;  // NaN passes, as Relu's
  if constexpr (kAct == Activation::GeluTanh)
    return 0.5f * x * (1.f + cpu::TanhF(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  if constexpr (kAct == Activation::GeluErf)
    return 0.5f * x * (1.f + cpu::VecErf(x * 0.7071067811865476f));
  if constexpr (kAct == Activation::Sigmoid) return cpu::SigmoidF(x);  // as the sigmoid op
  if constexpr (kAct == Activation::Tanh) return cpu::TanhF(x);
  return x;
}

// One loop per activation, so that each vectorizes (a switch per element kept erf and exp scalar
// library calls).
template <Activation kAct>
void ActivateRow(float* row, int64_t n) {
  for (int64_t j = 0; j < n; ++j) row[j] = Activate<kAct>(row[j]);
}

void ApplyActivation(Activation act, float* row, int64_t n) {
  switch (act) {
    case Activation::None:
      return;
    case Activation::Relu:
      return ActivateRow<Activation::Relu>(row, n);
    case Activation::GeluTanh:
      return ActivateRow<Activation::GeluTanh>(row, n);
    case Activation::GeluErf:
      return ActivateRow<Activation::GeluErf>(row, n);
    case Activation::Sigmoid:
      return ActivateRow<Activation::Sigmoid>(row, n);
    case Activation::Tanh:
      return ActivateRow<Activation::Tanh>(row, n);
  }
}

// c = act(c + bias) + r over contiguous float32 rows of length n; bias and r may be undefined.
void ApplyEpilogue(const Tensor& c, const Tensor& bias, Activation act, const Tensor& r) {
  const int64_t n = c.dim(c.ndim() - 1), rows = c.numel() / n;
  float* pc = c.data<float>();
  const float* pb = bias.defined() ? bias.data<float>() : nullptr;
  const float* pr = r.defined() ? r.data<float>() : nullptr;
  for (int64_t i = 0; i < rows; ++i) {
    float* row = pc + i * n;
    if (pb)
      for (int64_t j = 0; j < n; ++j) row[j] += pb[j];
    ApplyActivation(act, row, n);
    if (pr)
      for (int64_t j = 0; j < n; ++j) row[j] += pr[i * n + j];
  }
}

dnnl::algorithm EltwiseAlgorithm(Activation act) {
  switch (act) {
    case Activation::Relu:
      // clip_v2 to [0, inf) is relu that lets NaN through (oneDNN's eltwise_relu maps it to 0).
      return dnnl::algorithm::eltwise_clip_v2;
    case Activation::GeluTanh:
      return dnnl::algorithm::eltwise_gelu_tanh;
    case Activation::GeluErf:
      return dnnl::algorithm::eltwise_gelu_erf;
    case Activation::Sigmoid:
      return dnnl::algorithm::eltwise_logistic;
    case Activation::Tanh:
      return dnnl::algorithm::eltwise_tanh;
    default:
      return dnnl::algorithm::undef;
  }
}

// ---- Weight packing (attribute pack_weight, set by the pack_weights pass on weights that stay
// the same between calls). The packed copies live in the derived cache on the weight's storage.

constexpr int64_t kRowMajorMinColumns = 64;

// b as a row-major (K, N) copy: dnnl_sgemm streams B's rows fastest when few rows of A multiply
// it (dense's transposed weight view runs ~1.6x slower at batch 1). Null while not cached.
std::shared_ptr<Tensor> PackedRowMajor(const Tensor& b) {
  return std::static_pointer_cast<Tensor>(cpu::DerivedLookup(
      b, {cpu::kPackRowMajorTag}, [&] { return std::make_shared<Tensor>(b.Contiguous()); }));
}

// b reordered into oneDNN's blocked layout `desc`; null while not cached.
std::shared_ptr<Tensor> PackedWeights(const Tensor& b, const dnnl::memory::desc& desc) {
  // The layout is part of the key: oneDNN may pick another blocking for other shapes of A.
  const int64_t hash = cpu::LayoutHash(desc);
  auto packed =
      std::static_pointer_cast<Tensor>(cpu::DerivedLookup(b, {cpu::kPackOnednnTag, hash}, [&] {
        auto& engine = cpu::OnednnEngine();
        Tensor buffer =
            Tensor::Empty({static_cast<int64_t>(desc.get_size() / sizeof(float))}, DType::Float32);
        dnnl::memory src(StridedDesc(b, dnnl::memory::data_type::f32), engine, b.raw_data());
        dnnl::memory dst(desc, engine, buffer.raw_data());
        cpu::OnednnExecute(dnnl::reorder(src, dst), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
        return std::make_shared<Tensor>(buffer);
      }));
  return packed;
}

// c = act(a @ b + bias) + r as one oneDNN primitive, float32 or bfloat16 (all operands of c's
// type; the epilogue runs in float32 and c is rounded once); a, b, c, r are (rank)-D views (c and
// r contiguous), bias a contiguous vector of c's last dim; bias and r may be undefined.
// With `packed_weights`, the primitive reads b in the blocked layout oneDNN picks for these shapes
// (format_tag::any) from a copy PackedWeights keeps; returns false, running nothing, while that
// copy is not made yet.
bool OnednnFusedMatMul(const Tensor& a, const Tensor& b, const Tensor& bias, Activation act,
                       const Tensor& r, const Tensor& c, bool packed_weights = false) {
  using dnnl::memory;
  const auto type = cpu::OnednnType(c.dtype());
  const int64_t rank = c.ndim();
  cpu::PrimitiveKey key{static_cast<int64_t>(cpu::PrimitiveTag::FusedMatMul),
                        rank,
                        bias.defined(),
                        static_cast<int64_t>(act),
                        r.defined(),
                        packed_weights,
                        static_cast<int64_t>(c.dtype())};
  AppendLayout(key, a);
  AppendLayout(key, b);
  AppendLayout(key, c);
  memory::dims bias_dims(rank, 1), bias_strides(rank, c.dim(rank - 1));
  bias_dims.back() = c.dim(rank - 1);
  bias_strides.back() = 1;
  const memory::desc bias_md =
      bias.defined() ? memory::desc(bias_dims, type, bias_strides) : memory::desc();
  auto entry = cpu::CachedPrimitive<MatMulEntry>(key, [&] {
    dnnl::post_ops ops;
    if (act != Activation::None) {
      const float beta = act == Activation::Relu ? std::numeric_limits<float>::infinity() : 0.f;
      ops.append_eltwise(EltwiseAlgorithm(act), 0.f, beta);
    }
    if (r.defined()) ops.append_binary(dnnl::algorithm::binary_add, StridedDesc(r, type));
    dnnl::primitive_attr attr = cpu::ConcurrentAttr();
    attr.set_post_ops(ops);
    const memory::desc src = StridedDesc(a, type), dst = StridedDesc(c, type);
    const memory::desc weights = packed_weights
                                     ? memory::desc(b.shape(), type, memory::format_tag::any)
                                     : StridedDesc(b, type);
    auto& engine = cpu::OnednnEngine();
    dnnl::matmul::primitive_desc pd =
        bias.defined() ? dnnl::matmul::primitive_desc(engine, src, weights, bias_md, dst, attr)
                       : dnnl::matmul::primitive_desc(engine, src, weights, dst, attr);
    return MatMulEntry{dnnl::matmul(pd), cpu::IsReferenceImpl(pd), pd.weights_desc(), nullptr};
  });
  if (entry->reference && !(a.is_contiguous() && b.is_contiguous()))
    return OnednnFusedMatMul(a.Contiguous(), b.Contiguous(), bias, act, r, c, packed_weights);
  // A plain layout picked (no AVX-512): a copy would be no faster than b as given (see
  // OnednnBlocksMatMulWeights), so the strided primitive runs instead.
  if (packed_weights && entry->weights.get_inner_nblks() == 0)
    return OnednnFusedMatMul(a, b, bias, act, r, c, /*packed_weights=*/false);
  auto& engine = cpu::OnednnEngine();
  memory weights(StridedDesc(b, type), engine, b.raw_data());
  if (packed_weights) {
    std::shared_ptr<Tensor> packed = PackedWeights(b, entry->weights);
    if (!packed) return false;
    weights = memory(entry->weights, engine, packed->raw_data());
  }
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, memory(StridedDesc(a, type), engine, a.raw_data())},
      {DNNL_ARG_WEIGHTS, weights},
      {DNNL_ARG_DST, memory(StridedDesc(c, type), engine, c.raw_data())}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, memory(bias_md, engine, bias.raw_data()));
  if (r.defined()) {
    const int index = act == Activation::None ? 0 : 1;  // the binary add follows the eltwise
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1,
                 memory(StridedDesc(r, type), engine, r.raw_data()));
  }
  cpu::OnednnExecute(entry->prim, args);
  return true;
}

// b packed into 16-column panels (panel_gemm.h); null while not cached.
std::shared_ptr<Tensor> PackedPanels(const Tensor& b) {
  return std::static_pointer_cast<Tensor>(cpu::DerivedLookup(
      b, {cpu::kPackPanelsTag}, [&] { return std::make_shared<Tensor>(cpu::PackedPanelsOf(b)); }));
}

// c = act(a @ b + bias) + r, a 2-D product by b packed into `panels`: bias and relu applied as
// each block is stored, then the exact GELU and the residual on each finished block while it is
// in cache, other activations over all of c after.
bool RunPanels(const Tensor& a, const Tensor& panels, const Tensor& bias, Activation act,
               const Tensor& r, const Tensor& c) {
  const bool relu = act == Activation::Relu, gelu = act == Activation::GeluErf;
  const bool in_tiles = relu || gelu || act == Activation::None;  // the whole epilogue
  const int64_t n = c.dim(1);
  // Contiguous, c's shape; added after the activation, so in the tiles only when that is too.
  const float* residual = in_tiles && r.defined() ? r.data<float>() : nullptr;
  cpu::PanelTileFn finish;
  if (gelu || residual)
    finish = [&](float* tile, int64_t row0, int64_t rows, int64_t col0, int64_t width) {
      if (gelu) cpu::GeluErfTile(tile, rows, width, n);
      if (!residual) return;
      for (int64_t i = 0; i < rows; ++i) {
        const float* from = residual + (row0 + i) * n + col0;
        float* to = tile + i * n;
        for (int64_t j = 0; j < width; ++j) to[j] += from[j];
      }
    };
  cpu::PanelGemm(c.dim(0), n, a.dim(1), a.data<float>(), a.strides()[0], a.strides()[1],
                 panels.data<float>(), bias.defined() ? bias.data<float>() : nullptr, relu,
                 c.data<float>(), n, finish);
  if (in_tiles) return true;
  // Other activations through the vectorized elementwise kernels (ApplyEpilogue's scalar loop
  // made the encoder's 1024x256 @ 256x1024 product 3x slower), then the residual.
  UnfusedActivation(act, c);
  if (r.defined()) RunKernelInto(OpKind::Add, {c, r}, {}, c);
  return true;
}

// The product by b's cached panels; false while they are not cached, or for a column-major a
// (a weight gradient's dy^T), which oneDNN reads faster than the panel kernel.
bool TryPanels(const Tensor& a, const Tensor& b, const Tensor& bias, Activation act,
               const Tensor& r, const Tensor& c) {
  if (a.strides()[1] != 1) return false;
  std::shared_ptr<Tensor> panels = PackedPanels(b);
  if (!panels) return false;
  return RunPanels(a, *panels, bias, act, r, c);
}

// A weight that changes between calls (a training step's forward, or an input) or is not
// cached yet, below AVX-512, packed for this call only: from kPanelsPerCallMinRows rows the packing
// (a transposed weight is read 16 rows at a time) costs less than it saves. Measured in the encoder
// block's step (1024 rows, 2 threads): fc1 3.6 -> 3.0 ms, fc2 3.3 -> 2.9 ms. At 64 rows (the seed
// network's step) the panels measured level with oneDNN on a quiet machine (1.6-1.7 ms a step on
// 2 threads, either way), and LeNet's step 1-2% slower on one thread.
constexpr int64_t kPanelsPerCallMinRows = 256;
// On a contended machine oneDNN runs on the calling thread alone (core/parallel.h), while the
// panel kernel splits over kiln's helpers, so the panels pay from fewer rows. Beside 3 busy
// processes, the seed step's worst-of-5 median went 7.9 -> 7.4 ms (mean of 6 alternating runs,
// 5 better and 1 level) and its CPU time per step 4.25 -> 4.09 ms.
constexpr int64_t kPanelsPerCallMinRowsContended = 32;

bool TryPanelsPerCall(const Tensor& a, const Tensor& b, const Tensor& bias, Activation act,
                      const Tensor& r, const Tensor& c) {
  if (!cpu::PanelGemmAvailable() || a.strides()[1] != 1 ||
      c.dim(0) < kPanelsPerCallMinRowsContended)
    return false;
  if (c.dim(0) < kPanelsPerCallMinRows && !MachineContended()) return false;
  return RunPanels(a, cpu::PackedPanelsOf(b), bias, act, r, c);
}

// A product with few columns (TryNarrowGemm), then the epilogue (c has at most 16 columns).
bool TryNarrow(const Tensor& a, const Tensor& b, const Tensor& bias, Activation act,
               const Tensor& r, const Tensor& c) {
  if (!TryNarrowGemm(a, b, c)) return false;
  ApplyEpilogue(c, bias, act, r);
  return true;
}

// The packed-weight paths for a 2-D product; false while the packed copy is not cached (the
// strided paths run meanwhile) or b needs no packing.
bool TryPackedFloat32(const Tensor& a, const Tensor& b, const Tensor& bias, Activation act,
                      const Tensor& r, const Tensor& c) {
  if (c.dim(0) <= kSgemmMaxRows) {
    // Already row-major, or too few columns for sgemm's row-streaming kernel to win (measured:
    // 10 columns run 3x faster as dot products over the transposed view).
    if (b.is_contiguous() || c.dim(1) < kRowMajorMinColumns) return false;
    std::shared_ptr<Tensor> packed = PackedRowMajor(b);
    if (!packed || !TrySgemm(a, *packed, c)) return false;
    ApplyEpilogue(c, bias, act, r);
    return true;
  }
  if (cpu::PanelGemmAvailable()) return TryPanels(a, b, bias, act, r, c);
  // Contended, a large product splits its rows over kiln's helpers on the strided primitive
  // (SplitWhileContended) rather than run on this thread alone on the packed one.
  if (c.ndim() == 2 &&
      SplitsWhileContended(2.0 * static_cast<double>(c.numel()) * static_cast<double>(a.dim(1)),
                           c.dim(0) / kContendedSplitRows))
    return false;
  return OnednnFusedMatMul(a, b, bias, act, r, c, /*packed_weights=*/true);
}

// The float32 fused path; false when the operands need the unfused one (a 1-D right operand,
// an empty contraction, a residual that broadcasts, more dims than oneDNN takes).
bool TryFusedFloat32(const Tensor& in_a, const Tensor& in_b, const Tensor& bias,
                     const Tensor& residual, bool ta, bool tb, Activation act, bool pack,
                     const Tensor& out) {
  // bfloat16 where the CPU runs it natively: the same primitive, without the float32-only
  // sgemm and packed-weight paths.
  const bool bf16 = out.dtype() == DType::BFloat16 && cpu::OnednnHasNativeBF16();
  if ((out.dtype() != DType::Float32 && !bf16) || in_b.ndim() < 2) return false;
  for (const Tensor* t : {&in_a, &in_b, &bias, &residual})
    if (t->defined() && t->dtype() != out.dtype()) return false;
  if (residual.defined() && residual.shape() != out.shape()) return false;
  MatMulDims dims = PlanMatMul(in_a.shape(), in_b.shape(), ta, tb, "fused_matmul");
  const size_t rank = dims.batch.size() + 2;
  if (dims.k == 0 || static_cast<int>(rank) > kOnednnMaxDims) return false;
  Tensor a = AsMatrix(in_a, true, ta, rank), b = AsMatrix(in_b, false, tb, rank);
  Shape c_shape = dims.batch;
  c_shape.push_back(dims.m);
  c_shape.push_back(dims.n);
  const Shape c_strides = ContiguousStrides(c_shape);
  Tensor c = out.AsStrided(c_shape, c_strides, out.offset());
  Tensor r;
  if (residual.defined()) {
    r = residual.Contiguous();
    r = r.AsStrided(c_shape, c_strides, r.offset());
  }
  Tensor bias_c = bias.defined() ? bias.Contiguous() : Tensor();
  if (!HasUnitInnerStride(a)) a = a.Contiguous();
  if (!HasUnitInnerStride(b)) b = b.Contiguous();
  // One product over all rows where the batch is only a's (a dense layer on a sequence):
  // oneDNN ran 8x128x256 @ 256x256 as 8 products 1.4x slower than 1024x256 @ 256x256.
  const bool folded = FoldBatchIntoRows(a, b, c, r);
  if (!bf16 && folded && TryNarrow(a, b, bias_c, act, r, c)) return true;
  if (!bf16 && pack && folded && TryPackedFloat32(a, b, bias_c, act, r, c)) return true;
  if (!bf16 && folded && TryPanelsPerCall(a, b, bias_c, act, r, c)) return true;
  if (!bf16 && TrySgemm(a, b, c)) {
    ApplyEpilogue(c, bias_c, act, r);
    return true;
  }
  auto block = [&](const Tensor& ai, const Tensor& bi, const Tensor& ci, const Tensor& ri) {
    OnednnFusedMatMul(ai, bi, bias_c, act, ri, ci);
  };
  if (!SplitWhileContended(a, b, c, r, block)) OnednnFusedMatMul(a, b, bias_c, act, r, c);
  return true;
}

void FusedMatMulKernel(KernelContext& ctx) {
  const Tensor& out = ctx.outputs[0];
  const Tensor &a = ctx.inputs[0], &b = ctx.inputs[1];
  const Tensor bias = ctx.inputs.size() > 2 ? ctx.inputs[2] : Tensor();
  const Tensor residual = ctx.inputs.size() > 3 ? ctx.inputs[3] : Tensor();
  const bool ta = AttrBool(ctx.attrs, 0), tb = AttrBool(ctx.attrs, 1);
  const Activation act = ParseActivation(AttrString(ctx.attrs, 2), ctx.def.name);
  if (out.numel() == 0) return;
  const bool pack = ctx.attrs.size() > 3 && AttrBool(ctx.attrs, 3);
  if (TryFusedFloat32(a, b, bias, residual, ta, tb, act, pack, out)) return;
  RunKernelInto(OpKind::MatMul, {a, b}, {ta, tb}, out);
  if (bias.defined()) RunKernelInto(OpKind::Add, {out, bias}, {}, out);
  UnfusedActivation(act, out);
  if (residual.defined()) RunKernelInto(OpKind::Add, {out, residual}, {}, out);
}

// The unfused ops' gradients: z = a @ b + bias, y = act(z) (+ residual when act is none).
// relu, sigmoid and tanh differentiate through the output y; gelu recomputes z for GeluGrad.
std::vector<GradVar> FusedMatMulGrad(GradBuilder& g) {
  const Activation act = ParseActivation(AttrString(g.attrs(), 2), "fused_matmul");
  const int n = g.num_inputs();
  const bool has_bias = n > 2 && g.meta(g.input(2)).present;
  const bool has_residual = n > 3 && g.meta(g.input(3)).present;
  GradVar dy = g.out_grad(0), y = g.output(0), dz = dy;
  switch (act) {
    case Activation::None:
      break;
    case Activation::Relu:
      dz = g.Emit1(OpKind::ReluGrad, {dy, y});
      break;
    case Activation::Sigmoid:
      dz = Mul(g, dy, Mul(g, y, Sub(g, g.Scalar(1.0), y)));
      break;
    case Activation::Tanh:
      dz = Mul(g, dy, Sub(g, g.Scalar(1.0), Mul(g, y, y)));
      break;
    case Activation::GeluTanh:
    case Activation::GeluErf: {
      GradVar z = g.Emit1(OpKind::MatMul, {g.input(0), g.input(1)}, {g.attrs()[0], g.attrs()[1]});
      if (has_bias) z = Add(g, z, g.input(2));
      const std::string approximate = act == Activation::GeluTanh ? "tanh" : "none";
      dz = g.Emit1(OpKind::GeluGrad, {dy, z}, {approximate});
      break;
    }
  }
  std::vector<GradVar> grads = MatMulInputGrads(g, dz);
  grads.resize(n);
  if (has_bias && g.wants_input_grad(2)) grads[2] = ToInput(g, dz, 2);
  if (has_residual && g.wants_input_grad(3)) grads[3] = ToInput(g, dy, 3);
  return grads;
}

}  // namespace

void RegisterFusedLinalgOps(OpRegistry& r) {
  OpDef fused;
  fused.kind = OpKind::FusedMatMul;
  fused.inputs = {"input", "weight", "bias?", "residual?"};
  fused.attrs = {{"transpose_a", false},
                 {"transpose_b", false},
                 {"activation", std::string("none")},
                 {"pack_weight", false}};
  fused.infer = InferFusedMatMul;
  fused.kernel = FusedMatMulKernel;
  fused.promotion = Promotion::Common;
  fused.grad = FusedMatMulGrad;
  r.Add(std::move(fused));
}

}  // namespace kiln::linalg
