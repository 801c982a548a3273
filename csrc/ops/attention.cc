// attention.cc - FusedAttention: softmax(query @ key * scale + mask) @ value as one op whose
// float32 kernel walks key tiles with an online softmax, so no head's score matrix is stored.
//
// The fuse_attention pass (O2) puts it in place of the matmul -> scale -> (mask add) -> softmax
// -> matmul chain the encoder block and nn.MultiheadAttention build. Its meaning is exactly that
// chain's: scores = matmul(query, key, transpose_b=transpose_key) * scale (+ mask), out =
// matmul(softmax(scores, -1), value). float32 runs the tiled kernel below; other dtypes run the
// chain's own kernels (the same values as the unfused ops). The gradient recomputes the
// probabilities with those ops (the backward keeps the score matrix; only the forward avoids it).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/normalization.h"
#include "kernels/cpu/tile_kernels.h"
#include "ops/linalg_internal.h"

namespace kiln::linalg {
namespace {

// Query rows per work item (one item per batch item and block): the packed key tile is reused
// by all of them. Keys per score tile: a 128 x 256 tile is 128 KiB, in L2 with the key tile.
constexpr int64_t kQueryRows = 128;
constexpr int64_t kKeyTile = 256;

std::vector<TensorMeta> InferFusedAttention(const OpDef& def, const std::vector<TensorMeta>& in,
                                            const Attrs& attrs) {
  const TensorMeta &q = in[0], &k = in[1], &v = in[2];
  RequireFloating(q, def.name);
  for (size_t i = 1; i < in.size(); ++i)
    KILN_CHECK(!in[i].present || in[i].dtype == q.dtype, Type, def.name,
               ": operands must share one dtype, got ", DTypeName(q.dtype), " and ",
               DTypeName(in[i].dtype));
  for (const TensorMeta* t : {&q, &k, &v})
    KILN_CHECK(t->shape.size() >= 2, Value, def.name,
               ": query, key and value need 2 dims or more, got shapes ", ShapeStr(q.shape), ", ",
               ShapeStr(k.shape), ", ", ShapeStr(v.shape));
  // The two products' shapes, as matmul plans them (ValueError naming the shapes otherwise).
  MatMulDims scores = PlanMatMul(q.shape, k.shape, false, AttrBool(attrs, 0), def.name);
  MatMulDims out = PlanMatMul(scores.out_shape, v.shape, false, false, def.name);
  if (in.size() > 3 && in[3].present) {
    const Shape joined = BroadcastShapes(scores.out_shape, in[3].shape, def.name);
    KILN_CHECK(joined.size() == scores.out_shape.size(), Value, def.name, ": mask of shape ",
               ShapeStr(in[3].shape), " must broadcast to the scores' shape ",
               ShapeStr(scores.out_shape));
    for (size_t i = 0; i < joined.size(); ++i)
      KILN_CHECK(joined[i] == scores.out_shape[i] || scores.out_shape[i] < 0, Value, def.name,
                 ": mask of shape ", ShapeStr(in[3].shape), " must broadcast to the scores' shape ",
                 ShapeStr(scores.out_shape));
  }
  return {TensorMeta{q.dtype, out.out_shape}};
}

// ---- The float32 kernel

// One matrix of a batched operand: element (i, j) of batch item b at
// base + offset(b) + i * rs + j * cs.
struct Matrix {
  const float* base;
  Shape batch_strides;  // per output batch dim; 0 where the operand broadcasts
  int64_t rs, cs;       // row and column strides
};

Matrix MatrixOf(const Tensor& t, const Shape& batch) {
  const int64_t nd = t.ndim(), nb = static_cast<int64_t>(batch.size());
  Matrix m{t.data<float>(), Shape(nb, 0), t.strides()[nd - 2], t.strides()[nd - 1]};
  for (int64_t d = 0; d < nb; ++d) {
    const int64_t td = d - (nb - (nd - 2));  // t's dim aligned with batch dim d, if any
    if (td >= 0 && t.dim(td) != 1) m.batch_strides[d] = t.strides()[td];
  }
  return m;
}

struct Plan {
  Shape batch;            // the output's batch dims
  int64_t sq, sk, d, dv;  // query rows, keys, head dim, value dim
  bool transpose_key;     // key is (sk, d) (else (d, sk))
  float scale;
  Matrix q, k, v, mask;  // mask.base is null when there is none
  float* out;            // contiguous (batch..., sq, dv)
};

// Offset of batch item `b` (C order over plan.batch) in an operand.
int64_t BatchOffset(const Plan& p, const Matrix& m, int64_t b) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(p.batch.size()) - 1; d >= 0; --d) {
    off += (b % p.batch[d]) * m.batch_strides[d];
    b /= p.batch[d];
  }
  return off;
}

// Per-thread buffers: the score tile; the query block, key^T and value tiles packed into dense
// rows; the online softmax's running row maxima and sums.
struct Scratch {
  std::vector<float> scores, queries, keys, values, max, sum;
};

// Turns a score tile (rows x cols, row stride ld) into exp(s - new max) in place and rescales
// the rows' accumulated output by exp(old max - new max). `first`: no output yet. The max,
// exp and sum run in tile_kernels' AVX-512 loops.
void SoftmaxTile(float* s, int64_t rows, int64_t cols, int64_t ld, Scratch& st, float* o,
                 int64_t dv, bool first) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = s + i * ld;
    const float mx = std::max(st.max[i], cpu::TileRowMax(row, cols));
    if (mx == -std::numeric_limits<float>::infinity()) {  // every key so far masked out
      std::fill(row, row + cols, 0.f);
      if (first) std::fill(o + i * dv, o + (i + 1) * dv, 0.f);
      continue;
    }
    const float correction = cpu::ExpF(st.max[i] - mx);  // 0 while the row had no finite score
    if (!first)
      for (int64_t j = 0; j < dv; ++j) o[i * dv + j] *= correction;
    st.sum[i] = st.sum[i] * correction + cpu::TileExpSum(row, cols, mx);
    st.max[i] = mx;
  }
}

// Copies a (rows x cols) matrix at strides (rs, cs) into dense rows. Sources with strided rows
// (the encoder block's heads are transposed views, rows 256 floats apart) are packed because
// rows 1 KiB apart share L1 sets: re-reading them in the products missed cache.
void PackRows(const float* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs, float* dst) {
  if (cs == 1) {
    for (int64_t i = 0; i < rows; ++i) std::copy(src + i * rs, src + i * rs + cols, dst + i * cols);
    return;
  }
  // 16 rows at a time, so each source line is read while it is in cache.
  for (int64_t i0 = 0; i0 < rows; i0 += 16)
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t i = i0; i < std::min(rows, i0 + 16); ++i)
        dst[i * cols + j] = src[i * rs + j * cs];
}

// Output rows [r0, r0 + rows) of batch item b, one key tile at a time.
void AttendBlock(const Plan& p, int64_t b, int64_t r0, int64_t rows, Scratch& st) {
  const float* q = p.q.base + BatchOffset(p, p.q, b) + r0 * p.q.rs;
  const float* k = p.k.base + BatchOffset(p, p.k, b);
  const float* v = p.v.base + BatchOffset(p, p.v, b);
  const float* mask =
      p.mask.base ? p.mask.base + BatchOffset(p, p.mask, b) + r0 * p.mask.rs : nullptr;
  float* o = p.out + (b * p.sq + r0) * p.dv;
  const int64_t cols = std::min(p.sk, kKeyTile);
  st.scores.resize(static_cast<size_t>(rows * cols));
  st.keys.resize(static_cast<size_t>(p.d * cols));
  st.max.assign(rows, -std::numeric_limits<float>::infinity());
  st.sum.assign(rows, 0.f);
  st.values.resize(static_cast<size_t>(cols * p.dv));
  const float* qa = q;
  if (p.q.cs != 1 || p.q.rs != p.d) {
    st.queries.resize(static_cast<size_t>(rows * p.d));
    PackRows(q, rows, p.d, p.q.rs, p.q.cs, st.queries.data());
    qa = st.queries.data();
  }
  const bool dense_values = p.v.cs == 1 && p.v.rs == p.dv;
  for (int64_t j0 = 0; j0 < p.sk; j0 += cols) {
    const int64_t n = std::min(cols, p.sk - j0);
    // key^T for keys j0.. as a (d x n) tile: key^T's rows are key's columns (or its rows).
    if (p.transpose_key)
      PackRows(k + j0 * p.k.rs, p.d, n, p.k.cs, p.k.rs, st.keys.data());
    else
      PackRows(k + j0 * p.k.cs, p.d, n, p.k.rs, p.k.cs, st.keys.data());
    float* s = st.scores.data();
    cpu::TileGemm(rows, n, p.d, p.scale, qa, p.d, 1, st.keys.data(), n, s, cols, false);
    if (mask)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < n; ++j)
          s[i * cols + j] += mask[i * p.mask.rs + (j0 + j) * p.mask.cs];
    SoftmaxTile(s, rows, n, cols, st, o, p.dv, j0 == 0);
    const float* vt = v + j0 * p.v.rs;
    if (!dense_values) {
      PackRows(vt, n, p.dv, p.v.rs, p.v.cs, st.values.data());
      vt = st.values.data();
    }
    cpu::TileGemm(rows, p.dv, n, 1.f, s, cols, 1, vt, p.dv, o, p.dv, j0 > 0);
  }
  for (int64_t i = 0; i < rows; ++i) {
    // A row with no finite score is NaN, as softmax gives it (exp(-inf - -inf)).
    const float inv = st.sum[i] > 0.f ? 1.f / st.sum[i] : std::numeric_limits<float>::quiet_NaN();
    for (int64_t j = 0; j < p.dv; ++j) o[i * p.dv + j] *= inv;
  }
}

void Float32Attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& in_mask,
                      bool transpose_key, double scale, const Tensor& out) {
  const int64_t nd = out.ndim();
  Plan p;
  p.batch = Shape(out.shape().begin(), out.shape().end() - 2);
  p.sq = out.dim(nd - 2);
  p.dv = out.dim(nd - 1);
  p.d = q.dim(q.ndim() - 1);
  p.sk = v.dim(v.ndim() - 2);
  p.transpose_key = transpose_key;
  p.scale = static_cast<float>(scale);
  p.q = MatrixOf(q, p.batch);
  p.k = MatrixOf(k, p.batch);
  p.v = MatrixOf(v, p.batch);
  p.mask = Matrix{nullptr, {}, 0, 0};
  Tensor mask;
  if (in_mask.defined()) {
    // The mask as a view of the scores' shape (stride 0 where it broadcasts).
    Shape scores = p.batch;
    scores.push_back(p.sq);
    scores.push_back(p.sk);
    mask = in_mask.Expand(scores);
    p.mask = MatrixOf(mask, p.batch);
  }
  p.out = out.data<float>();
  int64_t items_per_batch = (p.sq + kQueryRows - 1) / kQueryRows, batches = 1;
  for (int64_t b : p.batch) batches *= b;
  ParallelFor(batches * items_per_batch, 1, [&](int64_t begin, int64_t end) {
    Scratch st;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / items_per_batch, r0 = (item % items_per_batch) * kQueryRows;
      AttendBlock(p, b, r0, std::min(kQueryRows, p.sq - r0), st);
    }
  });
}

// ---- Other dtypes: the unfused chain's kernels, so values are the unfused ops' exactly.

void UnfusedAttention(const std::vector<Tensor>& in, bool transpose_key, double scale,
                      const Tensor& out) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  MatMulDims dims = PlanMatMul(q.shape(), k.shape(), false, transpose_key, "fused_attention");
  Tensor scores = Tensor::Empty(dims.out_shape, q.dtype());
  RunKernelInto(OpKind::MatMul, {q, k}, {false, transpose_key}, scores);
  Tensor factor = Tensor::Empty({}, DType::Float64);
  *factor.data<double>() = scale;
  RunKernelInto(OpKind::Mul, {scores, factor.To(q.dtype())}, {}, scores);
  if (in.size() > 3 && in[3].defined()) RunKernelInto(OpKind::Add, {scores, in[3]}, {}, scores);
  Tensor probs = Tensor::Empty(dims.out_shape, q.dtype());
  RunKernelInto(OpKind::Softmax, {scores}, {int64_t{-1}}, probs);
  RunKernelInto(OpKind::MatMul, {probs, v}, {false, false}, out);
}

void FusedAttentionKernel(KernelContext& ctx) {
  const Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const bool transpose_key = AttrBool(ctx.attrs, 0);
  const double scale = AttrFloat(ctx.attrs, 1);
  const Tensor mask = ctx.inputs.size() > 3 ? ctx.inputs[3] : Tensor();
  const int64_t sk = ctx.inputs[2].dim(ctx.inputs[2].ndim() - 2);
  if (out.dtype() == DType::Float32 && sk > 0 && ctx.inputs[0].dim(ctx.inputs[0].ndim() - 1) > 0)
    return Float32Attention(ctx.inputs[0], ctx.inputs[1], ctx.inputs[2], mask, transpose_key, scale,
                            out);
  UnfusedAttention(ctx.inputs, transpose_key, scale, out);
}

// The chain's gradients, with p = softmax(s) recomputed from the inputs and o the output:
//   dv = p^T do;  dp = do v^T;  ds = p * (dp - rowsum(do * o));  dmask = ds;
//   dq = scale * ds key^T (or ds key);  dkey = scale * q^T ds (or ds^T q when transpose_key).
// rowsum(do * o) equals rowsum(dp * p) (o = p v), and is a (.., sq, 1) reduction, not (sq, sk).
std::vector<GradVar> FusedAttentionGrad(GradBuilder& g) {
  const bool tk = AttrBool(g.attrs(), 0);
  const double scale = AttrFloat(g.attrs(), 1);
  const bool has_mask = g.num_inputs() > 3 && g.meta(g.input(3)).present;
  GradVar q = g.input(0), k = g.input(1), v = g.input(2), o = g.output(0), dout = g.out_grad(0);
  GradVar s = Mul(g, g.Emit1(OpKind::MatMul, {q, k}, {false, tk}), g.Scalar(scale));
  if (has_mask) s = Add(g, s, g.input(3));
  GradVar p = g.Emit1(OpKind::Softmax, {s}, {int64_t{-1}});
  std::vector<GradVar> grads(g.num_inputs());
  if (g.wants_input_grad(2))
    grads[2] = ToInput(g, g.Emit1(OpKind::MatMul, {p, dout}, {true, false}), 2);
  const bool wants_scores =
      g.wants_input_grad(0) || g.wants_input_grad(1) || (has_mask && g.wants_input_grad(3));
  if (!wants_scores) return grads;
  GradVar dp = g.Emit1(OpKind::MatMul, {dout, v}, {false, true});
  std::vector<int64_t> last{-1};
  GradVar row = g.Emit1(OpKind::ReduceSum, {Mul(g, dout, o)}, {last, true, std::monostate{}});
  GradVar ds = Mul(g, p, Sub(g, dp, row));
  if (has_mask && g.wants_input_grad(3)) grads[3] = ToInput(g, ds, 3);
  GradVar dsc = Mul(g, ds, g.Scalar(scale));
  if (g.wants_input_grad(0))
    grads[0] = ToInput(g, g.Emit1(OpKind::MatMul, {dsc, k}, {false, !tk}), 0);
  if (g.wants_input_grad(1)) {
    GradVar dk = tk ? g.Emit1(OpKind::MatMul, {dsc, q}, {true, false})
                    : g.Emit1(OpKind::MatMul, {q, dsc}, {true, false});
    grads[1] = ToInput(g, dk, 1);
  }
  return grads;
}

}  // namespace

void RegisterAttentionOps(OpRegistry& r) {
  OpDef attention;
  attention.kind = OpKind::FusedAttention;
  attention.inputs = {"query", "key", "value", "mask?"};
  attention.attrs = {{"transpose_key", false}, {"scale", 1.0}};
  attention.infer = InferFusedAttention;
  attention.kernel = FusedAttentionKernel;
  attention.grad = FusedAttentionGrad;
  r.Add(std::move(attention));
}

}  // namespace kiln::linalg
