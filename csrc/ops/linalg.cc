// linalg.cc - MatMul: NumPy matmul semantics, float32/bfloat16 on oneDNN, the rest on GemmFallback;
// FusedMatMul: a matmul with its bias, activation and residual epilogue (see fuse_epilogue).
//
// The operands reach the kernels as strided views: 1-D operands get a unit dim, transpose flags
// swap the last two strides, batch dims stay size-1 where they broadcast. oneDNN takes those
// views as strided memory descriptors, so transposed weights (dense's weight.T) cost no copy.
#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/onednn.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln {
namespace {

constexpr int kOnednnMaxDims = 12;  // DNNL_MAX_NDIMS
constexpr int64_t kMatMulTag = 1;   // first integer of a matmul cache key

struct MatMulDims {
  Shape batch;      // broadcast batch dims
  int64_t m, k, n;  // after 1-D promotion and transposes
  Shape out_shape;  // batch + (m, n) less the dims 1-D operands added
};

// Shapes of both operands after promotion; throws ValueError naming the op and both shapes.
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

std::vector<TensorMeta> InferMatMul(const OpDef& def, const std::vector<TensorMeta>& in,
                                    const Attrs& attrs) {
  MatMulDims dims =
      PlanMatMul(in[0].shape, in[1].shape, AttrBool(attrs, 0), AttrBool(attrs, 1), def.name);
  return {TensorMeta{in[0].dtype, dims.out_shape}};
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

struct MatMulEntry {
  dnnl::matmul prim;
  bool reference = false;  // oneDNN fell back to its slow reference code for these strides
};

void AppendLayout(cpu::PrimitiveKey& key, const Tensor& t) {
  for (int64_t d : t.shape()) key.push_back(d);
  for (int64_t s : t.strides()) key.push_back(s);
}

// c = a @ b on oneDNN; a, b, c are (rank)-D views of one dtype oneDNN runs, c contiguous.
void OnednnMatMul(const Tensor& a, const Tensor& b, const Tensor& c) {
  const auto type = cpu::OnednnType(c.dtype());
  cpu::PrimitiveKey key{kMatMulTag, static_cast<int64_t>(c.dtype()), c.ndim()};
  AppendLayout(key, a);
  AppendLayout(key, b);
  AppendLayout(key, c);
  auto entry = cpu::CachedPrimitive<MatMulEntry>(key, [&] {
    dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(StridedDesc(a, type), StridedDesc(b, type), StridedDesc(c, type)),
        cpu::OnednnEngine());
    return MatMulEntry{dnnl::matmul(pd), cpu::IsReferenceImpl(pd)};
  });
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
  entry->prim.execute(cpu::OnednnStream(),
                      {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
  cpu::OnednnStream().wait();
}

// Row counts up to which a single (unbatched) float32 product goes to dnnl_sgemm: its jit gemv
// streams B once, where the matmul primitive first packs B into blocks (3x slower at M = 1).
constexpr int64_t kSgemmMaxRows = 16;

// How sgemm reads a row-major matrix view: 'N' or 'T' and its leading dimension; false if
// neither dim has unit stride.
bool BlasLayout(const Tensor& t, char* trans, int64_t* ld) {
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

// c = a @ b for a float32 product with no batch (all batch dims 1) and few rows; false when
// it does not apply.
bool TrySgemm(const Tensor& a, const Tensor& b, const Tensor& c) {
  const int64_t nd = c.ndim(), m = c.dim(nd - 2), n = c.dim(nd - 1), k = a.dim(nd - 1);
  if (c.dtype() != DType::Float32 || m > kSgemmMaxRows || c.numel() != m * n) return false;
  char ta, tb;
  int64_t lda, ldb;
  if (!BlasLayout(a, &ta, &lda) || !BlasLayout(b, &tb, &ldb)) return false;
  return dnnl_sgemm(ta, tb, m, n, k, 1.f, a.data<float>(), lda, b.data<float>(), ldb, 0.f,
                    c.data<float>(), n) == dnnl_success;
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
  if (dtype == DType::Float32 && TrySgemm(a, b, c)) return;
  if (dtype == DType::Float32 || (dtype == DType::BFloat16 && cpu::OnednnHasNativeBF16())) {
    OnednnMatMul(a, b, c);
    return;
  }
  // float16 (and bfloat16 without native support): compute in float32, round once at the end.
  Tensor c32 = Tensor::Empty(c_shape, DType::Float32);
  OnednnMatMul(a.To(DType::Float32), b.To(DType::Float32), c32);
  cpu::CopyInto(c32, c);
}

// Gradients in the promoted (matrix) forms a_p, b_p and g_p, written so that each is one more
// MatMul with transpose flags: with A = op(a_p), B = op(b_p), C = A @ B,
//   dA = g @ B^T, so d(a_p) = ta ? B @ g^T : g @ B^T;
//   dB = A^T @ g, so d(b_p) = tb ? g^T @ A : A^T @ g.
// ToInput then sums broadcast batch dims away and drops the unit dim of a 1-D operand.
// The gradients of a and b (inputs 0 and 1, with transpose flags in attributes 0 and 1) given
// the gradient `grad` of a @ b; MatMul's rule and FusedMatMul's share it.
std::vector<GradVar> MatMulInputGrads(GradBuilder& g, GradVar grad) {
  GradVar a = g.input(0), b = g.input(1);
  const Shape sa = g.meta(a).shape, sb = g.meta(b).shape;
  const bool ta = sa.size() > 1 && AttrBool(g.attrs(), 0),
             tb = sb.size() > 1 && AttrBool(g.attrs(), 1);
  MatMulDims dims = PlanMatMul(sa, sb, ta, tb, "matmul");
  auto reshape = [&](GradVar v, Shape shape) { return g.Emit1(OpKind::Reshape, {v}, {shape}); };
  GradVar ap = sa.size() == 1 ? reshape(a, {1, sa[0]}) : a;
  GradVar bp = sb.size() == 1 ? reshape(b, {sb[0], 1}) : b;
  Shape full = dims.batch;
  full.insert(full.end(), {dims.m, dims.n});
  GradVar gp = g.meta(grad).shape == full ? grad : reshape(grad, full);
  auto mm = [&](GradVar x, GradVar y, bool tx, bool ty) {
    return g.Emit1(OpKind::MatMul, {x, y}, {tx, ty});
  };
  std::vector<GradVar> grads(2);
  if (g.wants_input_grad(0))
    grads[0] = ToInput(g, ta ? mm(bp, gp, tb, true) : mm(gp, bp, false, !tb), 0);
  if (g.wants_input_grad(1)) {
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

std::vector<GradVar> MatMulGrad(GradBuilder& g) { return MatMulInputGrads(g, g.out_grad(0)); }

// ---- FusedMatMul: act(a @ b + bias) + residual, the epilogue fuse_epilogue folds into a matmul.
//
// float32 runs as one oneDNN matmul primitive: the bias as its bias memory, the activation as an
// eltwise post-op and the residual as a binary-add post-op, cached like MatMul's. Small unbatched
// products take MatMul's sgemm path and apply the epilogue in one sweep over the (few) rows. Other
// dtypes and layouts run the unfused kernels (matmul, add, activation, add) in place on the
// output, which gives exactly the unfused ops' values.

constexpr int64_t kFusedMatMulTag = 2;  // first integer of a fused matmul cache key

enum class Activation : int64_t { None, Relu, GeluTanh, Sigmoid, Tanh };

Activation ParseActivation(const std::string& name, const char* op) {
  if (name == "none") return Activation::None;
  if (name == "relu") return Activation::Relu;
  if (name == "gelu_tanh") return Activation::GeluTanh;
  if (name == "sigmoid") return Activation::Sigmoid;
  if (name == "tanh") return Activation::Tanh;
  Throw(ErrorKind::Value, op,
        ": activation must be 'none', 'relu', 'gelu_tanh', 'sigmoid' or 'tanh', got '", name, "'");
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

// Runs op `kind`'s kernel with `out` as its output (elementwise kernels may read `out` too).
void RunKernelInto(OpKind kind, std::vector<Tensor> inputs, Attrs attrs, const Tensor& out) {
  const OpDef& def = GetOpDef(kind);
  for (size_t i = attrs.size(); i < def.attrs.size(); ++i)
    attrs.push_back(def.attrs[i].default_value);
  std::vector<Tensor> outputs{out};
  KernelContext ctx{def, inputs, outputs, attrs};
  def.kernel(ctx);
}

void UnfusedActivation(Activation act, const Tensor& out) {
  switch (act) {
    case Activation::None:
      return;
    case Activation::Relu:
      return RunKernelInto(OpKind::Relu, {out}, {}, out);
    case Activation::GeluTanh:
      return RunKernelInto(OpKind::Gelu, {out}, {std::string("tanh")}, out);
    case Activation::Sigmoid:
      return RunKernelInto(OpKind::Sigmoid, {out}, {}, out);
    case Activation::Tanh:
      return RunKernelInto(OpKind::Tanh, {out}, {}, out);
  }
}

float ApplyActivation(Activation act, float x) {
  switch (act) {
    case Activation::None:
      return x;
    case Activation::Relu:
      return x > 0.f ? x : 0.f;
    case Activation::GeluTanh:
      return 0.5f * x * (1.f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case Activation::Sigmoid:
      return 1.f / (1.f + std::exp(-x));
    case Activation::Tanh:
      return std::tanh(x);
  }
  return x;
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
    if (act != Activation::None)
      for (int64_t j = 0; j < n; ++j) row[j] = ApplyActivation(act, row[j]);
    if (pr)
      for (int64_t j = 0; j < n; ++j) row[j] += pr[i * n + j];
  }
}

dnnl::algorithm EltwiseAlgorithm(Activation act) {
  switch (act) {
    case Activation::Relu:
      return dnnl::algorithm::eltwise_relu;
    case Activation::GeluTanh:
      return dnnl::algorithm::eltwise_gelu_tanh;
    case Activation::Sigmoid:
      return dnnl::algorithm::eltwise_logistic;
    case Activation::Tanh:
      return dnnl::algorithm::eltwise_tanh;
    default:
      return dnnl::algorithm::undef;
  }
}

// c = act(a @ b + bias) + r as one float32 oneDNN primitive; a, b, c, r are (rank)-D views (c and
// r contiguous), bias a contiguous vector of c's last dim; bias and r may be undefined.
void OnednnFusedMatMul(const Tensor& a, const Tensor& b, const Tensor& bias, Activation act,
                       const Tensor& r, const Tensor& c) {
  using dnnl::memory;
  const auto type = memory::data_type::f32;
  const int64_t rank = c.ndim();
  cpu::PrimitiveKey key{kFusedMatMulTag, rank, bias.defined(), static_cast<int64_t>(act),
                        r.defined()};
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
    if (act != Activation::None) ops.append_eltwise(1.f, EltwiseAlgorithm(act), 0.f, 0.f);
    if (r.defined()) ops.append_binary(dnnl::algorithm::binary_add, StridedDesc(r, type));
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    const memory::desc src = StridedDesc(a, type), weights = StridedDesc(b, type),
                       dst = StridedDesc(c, type);
    dnnl::matmul::desc desc = bias.defined() ? dnnl::matmul::desc(src, weights, bias_md, dst)
                                             : dnnl::matmul::desc(src, weights, dst);
    dnnl::matmul::primitive_desc pd(desc, attr, cpu::OnednnEngine());
    return MatMulEntry{dnnl::matmul(pd), cpu::IsReferenceImpl(pd)};
  });
  if (entry->reference && !(a.is_contiguous() && b.is_contiguous())) {
    OnednnFusedMatMul(a.Contiguous(), b.Contiguous(), bias, act, r, c);
    return;
  }
  auto& engine = cpu::OnednnEngine();
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, memory(StridedDesc(a, type), engine, a.raw_data())},
      {DNNL_ARG_WEIGHTS, memory(StridedDesc(b, type), engine, b.raw_data())},
      {DNNL_ARG_DST, memory(StridedDesc(c, type), engine, c.raw_data())}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, memory(bias_md, engine, bias.raw_data()));
  if (r.defined()) {
    const int index = act == Activation::None ? 0 : 1;  // the binary add follows the eltwise
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1,
                 memory(StridedDesc(r, type), engine, r.raw_data()));
  }
  entry->prim.execute(cpu::OnednnStream(), args);
  cpu::OnednnStream().wait();
}

// The float32 fused path; false when the operands need the unfused one (a 1-D right operand,
// an empty contraction, a residual that broadcasts, more dims than oneDNN takes).
bool TryFusedFloat32(const Tensor& in_a, const Tensor& in_b, const Tensor& bias,
                     const Tensor& residual, bool ta, bool tb, Activation act, const Tensor& out) {
  if (out.dtype() != DType::Float32 || in_b.ndim() < 2) return false;
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
  if (TrySgemm(a, b, c)) {
    ApplyEpilogue(c, bias_c, act, r);
    return true;
  }
  OnednnFusedMatMul(a, b, bias_c, act, r, c);
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
  if (TryFusedFloat32(a, b, bias, residual, ta, tb, act, out)) return;
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
    case Activation::Relu: {
      GradVar positive = g.Emit1(OpKind::Greater, {y, g.Scalar(0.0)});
      dz = Mul(g, dy, CastTo(g, positive, g.meta(y).dtype));
      break;
    }
    case Activation::Sigmoid:
      dz = Mul(g, dy, Mul(g, y, Sub(g, g.Scalar(1.0), y)));
      break;
    case Activation::Tanh:
      dz = Mul(g, dy, Sub(g, g.Scalar(1.0), Mul(g, y, y)));
      break;
    case Activation::GeluTanh: {
      GradVar z = g.Emit1(OpKind::MatMul, {g.input(0), g.input(1)}, {g.attrs()[0], g.attrs()[1]});
      if (has_bias) z = Add(g, z, g.input(2));
      dz = g.Emit1(OpKind::GeluGrad, {dy, z}, {std::string("tanh")});
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

void RegisterLinalgOps(OpRegistry& r) {
  OpDef matmul;
  matmul.kind = OpKind::MatMul;
  matmul.inputs = {"input", "other"};
  matmul.attrs = {{"transpose_a", false}, {"transpose_b", false}};
  matmul.infer = InferMatMul;
  matmul.kernel = MatMulKernel;
  matmul.promotion = Promotion::Common;
  matmul.grad = MatMulGrad;
  r.Add(std::move(matmul));

  OpDef fused;
  fused.kind = OpKind::FusedMatMul;
  fused.inputs = {"input", "weight", "bias?", "residual?"};
  fused.attrs = {
      {"transpose_a", false}, {"transpose_b", false}, {"activation", std::string("none")}};
  fused.infer = InferFusedMatMul;
  fused.kernel = FusedMatMulKernel;
  fused.promotion = Promotion::Common;
  fused.grad = FusedMatMulGrad;
  r.Add(std::move(fused));
}

}  // namespace kiln
