// recurrent.cc - a whole LSTM layer in one op (one direction over the sequence) and its BPTT.
//
// nn.LSTM's time loop as registry ops: a loop of small ops costs O(T) per step in kiln's
// compiled loops (a step is selected and written by one-hot ops over the whole sequence) and an
// executor node per op; here the input projection of every step is one product, each step one
// (N, H) x (H, 4H) product and a pass over the gates, and the backward the mirror image.
// Gates in MindSpore's (and PyTorch's) order: input, forget, cell, output.
//
//   lstm_sequence(x [T,N,I], h0 [N,H], c0 [N,H], w_ih [4H,I], w_hh [4H,H], bias [4H],
//                 lengths [N]?)
//     -> y [T,N,H], h_T, c_T, gates [T,N,4H] (after their activations), cells [T,N,H]
//   lstm_sequence_grad(x, h0, c0, w_ih, w_hh, y, gates, cells, dy, dh_T, dc_T, lengths?)
//     -> dx, dh0, dc0, dw_ih, dw_hh, dbias
// gates and cells are what the backward reads; nothing differentiates through them. With
// lengths, a row past its length keeps its state (y repeats it, gates are zero there).
#include <algorithm>
#include <limits>

#include "core/error.h"
#include "kernels/cpu/activation_math.h"
#include "kernels/cpu/copy.h"
#include "ops/evaluate.h"
#include "ops/grad.h"
#include "ops/recurrent_internal.h"
#include "ops/registry.h"

namespace kiln {
namespace recurrent {

Tensor Product(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  const int64_t m = a.shape()[transpose_a ? 1 : 0], k = a.shape()[transpose_a ? 0 : 1];
  const int64_t n = b.shape()[transpose_b ? 0 : 1];
  if (m == 0 || k == 0 || n == 0) {
    Tensor zeros = Tensor::Empty({m, n}, a.dtype());
    cpu::Fill(zeros, 0.0);
    return zeros;
  }
  return EvaluateOp(OpKind::MatMul, {a, b}, {transpose_a, transpose_b})[0];
}

Tensor Projected(const Tensor& x, const Tensor& w_ih) {
  const int64_t rows = x.shape()[0] * x.shape()[1];
  return Product(x.Contiguous().Reshape({rows, x.shape()[2]}), w_ih, false, true).Contiguous();
}

Dims CheckLayer(const std::vector<TensorMeta>& in, int64_t gates, int biases, const char* op) {
  const Shape &x = in[0].shape, &h0 = in[1].shape, &w_ih = in[2].shape, &w_hh = in[3].shape;
  KILN_CHECK(x.size() == 3, Value, op, ": x must be (steps, batch, features), got shape ",
             ShapeStr(x));
  const Dims d{x[0], x[1], x[2], h0.size() == 2 ? h0[1] : -1};
  KILN_CHECK(d.hidden >= 0 && d.hidden <= std::numeric_limits<int64_t>::max() / gates, Value, op,
             ": h0 must be (batch, hidden), got ", ShapeStr(h0));
  KILN_CHECK(h0 == Shape({d.batch, d.hidden}), Value, op,
             ": h0 must be (batch, hidden) with batch ", d.batch, ", got ", ShapeStr(h0));
  const int64_t g = gates * d.hidden;
  bool fits = w_ih == Shape({g, d.features}) && w_hh == Shape({g, d.hidden});
  for (int b = 0; b < biases; ++b) fits &= in[4 + b].shape == Shape({g});
  KILN_CHECK(fits, Value, op, ": weights must be w_ih (", gates, "*hidden, features), w_hh (",
             gates, "*hidden, hidden) and biases (", gates, "*hidden) for x ", ShapeStr(x),
             " and h0 ", ShapeStr(h0), ", got ", ShapeStr(w_ih), " and ", ShapeStr(w_hh));
  for (int k = 0; k < 4 + biases; ++k) {
    const DType t = in[k].dtype;
    KILN_CHECK(t == in[0].dtype && (t == DType::Float32 || t == DType::Float64), Type, op,
               ": every input must be float32 or float64, all alike; got ", DTypeName(in[0].dtype),
               " and ", DTypeName(t));
  }
  return d;
}

void CheckGradInputs(const std::vector<TensorMeta>& in, size_t first,
                     const std::vector<Shape>& shapes, const char* op) {
  for (size_t k = 0; k < shapes.size(); ++k) {
    KILN_CHECK(in[first + k].shape == shapes[k], Value, op, ": input ", first + k,
               " must have shape ", ShapeStr(shapes[k]), ", got ", ShapeStr(in[first + k].shape));
    KILN_CHECK(in[first + k].dtype == in[0].dtype, Type, op, ": input ", first + k, " is ",
               DTypeName(in[first + k].dtype), ", not ", DTypeName(in[0].dtype));
  }
}

void CheckLengths(const std::vector<TensorMeta>& in, size_t at, int64_t batch, const char* op) {
  if (in.size() <= at || !in[at].present) return;
  const TensorMeta& m = in[at];
  KILN_CHECK(m.dtype == DType::Int32 || m.dtype == DType::Int64, Type, op,
             ": lengths must be int32 or int64, got ", DTypeName(m.dtype));
  KILN_CHECK(m.shape == Shape({batch}), Value, op, ": lengths must be (batch) = (", batch,
             "), got ", ShapeStr(m.shape));
}

std::vector<TensorMeta> Metas(const std::vector<Tensor>& inputs, size_t count) {
  std::vector<TensorMeta> metas;
  for (size_t k = 0; k < count; ++k) metas.push_back({inputs[k].dtype(), inputs[k].shape()});
  return metas;
}

std::vector<int64_t> RowSteps(const std::vector<Tensor>& inputs, size_t at, int64_t batch,
                              int64_t steps) {
  std::vector<int64_t> row_steps(batch, steps);
  if (inputs.size() <= at || !inputs[at].defined()) return row_steps;
  const Tensor lengths = inputs[at].To(DType::Int64).Contiguous();
  KILN_CHECK(lengths.numel() == batch, Value, "recurrent layer: lengths has ", lengths.numel(),
             " values for a batch of ", batch);
  const int64_t* given = lengths.data<int64_t>();
  for (int64_t r = 0; r < batch; ++r) row_steps[r] = std::clamp<int64_t>(given[r], 0, steps);
  return row_steps;
}

Tensor PreviousStates(const Tensor& h0, const Tensor& y) {
  const int64_t steps = y.shape()[0];
  Tensor before = Tensor::Empty(y.shape(), y.dtype());
  if (steps > 0) {
    cpu::CopyInto(h0, before.Select(0, 0));
    if (steps > 1) cpu::CopyInto(y.Slice(0, 0, steps - 1, 1), before.Slice(0, 1, steps, 1));
  }
  return before;
}

void SumRows(const Tensor& rows, const Tensor& out) {
  const Tensor sum = EvaluateOp(OpKind::ReduceSum, {rows}, {Shape{0}, false, std::monostate{}})[0];
  cpu::CopyInto(sum, out);
}

GradVar LengthsOf(GradBuilder& g, int at) {
  if (g.num_inputs() <= at) return GradVar{};
  const GradVar lengths = g.input(at);
  return g.meta(lengths).present ? lengths : GradVar{};
}

std::vector<GradVar> LayerGrad(GradBuilder& g, OpKind grad_op, const LayerGradInputs& from) {
  std::vector<GradVar> args;
  for (int i = 0; i < from.inputs; ++i) args.push_back(g.input(i));
  for (int i : from.saved_outputs) args.push_back(g.output(i));
  for (int i = 0; i < from.out_grads; ++i) args.push_back(g.out_grad(i));
  args.push_back(LengthsOf(g, from.lengths_at));
  std::vector<GradVar> grads = g.Emit(grad_op, args, g.attrs());
  grads.resize(from.lengths_at + 1);  // the lengths get none
  return grads;
}

}  // namespace recurrent

namespace {

using recurrent::Dims;
using recurrent::Product;

constexpr size_t kLengths = 6, kGradLengths = 11;  // where the optional lengths input sits

// x, h0, c0, w_ih, w_hh, bias: CheckLayer's checks (its order has no c0), and c0 like h0.
Dims CheckLstm(const std::vector<TensorMeta>& in, const char* op) {
  const Dims d = recurrent::CheckLayer({in[0], in[1], in[3], in[4], in[5]}, 4, 1, op);
  KILN_CHECK(in[2].shape == in[1].shape, Value, op, ": h0 and c0 must be (batch, hidden), got ",
             ShapeStr(in[1].shape), " and ", ShapeStr(in[2].shape));
  KILN_CHECK(in[2].dtype == in[0].dtype, Type, op, ": c0 is ", DTypeName(in[2].dtype), ", not ",
             DTypeName(in[0].dtype));
  return d;
}

std::vector<TensorMeta> InferLstm(const OpDef& def, const std::vector<TensorMeta>& in,
                                  const Attrs&) {
  const Dims d = CheckLstm(in, def.name);
  recurrent::CheckLengths(in, kLengths, d.batch, def.name);
  const DType t = in[0].dtype;
  return {{t, {d.steps, d.batch, d.hidden}},
          {t, {d.batch, d.hidden}},
          {t, {d.batch, d.hidden}},
          {t, {d.steps, d.batch, 4 * d.hidden}},
          {t, {d.steps, d.batch, d.hidden}}};
}

// One step's gates for one batch row, written so that the compiler vectorizes over the hidden
// units: pre-activations from the input projection xp and the recurrent product hp (both 4H wide,
// gate-major) and the bias b; writes the activated gates, the new cell and hidden state.
template <typename T>
void LstmRowForward(int64_t h, const T* __restrict xp, const T* __restrict hp,
                    const T* __restrict b, const T* __restrict c_in, T* __restrict gates,
                    T* __restrict c_out, T* __restrict h_out) {
  for (int64_t j = 0; j < h; ++j) {
    const T i = cpu::Sigmoid(xp[j] + hp[j] + b[j]);
    const T f = cpu::Sigmoid(xp[h + j] + hp[h + j] + b[h + j]);
    const T g = cpu::Tanh(xp[2 * h + j] + hp[2 * h + j] + b[2 * h + j]);
    const T o = cpu::Sigmoid(xp[3 * h + j] + hp[3 * h + j] + b[3 * h + j]);
    const T c = f * c_in[j] + i * g;
    gates[j] = i, gates[h + j] = f, gates[2 * h + j] = g, gates[3 * h + j] = o;
    c_out[j] = c;
    h_out[j] = o * cpu::Tanh(c);
  }
}

// The mirror image for one batch row: the gates' gradients dg from the saved gates and cells
// and the incoming dy + dh; dc is carried from the step after and left for the step before.
template <typename T>
void LstmRowBackward(int64_t h, const T* __restrict gates, const T* __restrict c_now,
                     const T* __restrict c_before, const T* __restrict dy, const T* __restrict dh,
                     T* __restrict dc, T* __restrict dg) {
  for (int64_t j = 0; j < h; ++j) {
    const T i = gates[j], f = gates[h + j], g = gates[2 * h + j], o = gates[3 * h + j];
    const T tc = cpu::Tanh(c_now[j]);
    const T dh_j = dy[j] + dh[j];
    const T dc_j = dc[j] + dh_j * o * (T(1) - tc * tc);
    dg[j] = dc_j * g * i * (T(1) - i);
    dg[h + j] = dc_j * c_before[j] * f * (T(1) - f);
    dg[2 * h + j] = dc_j * i * (T(1) - g * g);
    dg[3 * h + j] = dh_j * tc * o * (T(1) - o);
    dc[j] = dc_j * f;
  }
}

template <typename T>
void LstmForward(KernelContext& ctx, const Dims& d) {
  const Tensor& w_hh = ctx.inputs[4];
  const Tensor bias = ctx.inputs[5].Contiguous();
  Tensor &y = ctx.outputs[0], &gates = ctx.outputs[3], &cells = ctx.outputs[4];
  const int64_t n = d.batch, h = d.hidden;
  const std::vector<int64_t> row_steps = recurrent::RowSteps(ctx.inputs, kLengths, n, d.steps);
  const Tensor projected = recurrent::Projected(ctx.inputs[0], ctx.inputs[3]);
  Tensor h_prev = ctx.inputs[1].Contiguous(), c_prev = ctx.inputs[2].Contiguous();
  const T* b = bias.data<T>();
  for (int64_t t = 0; t < d.steps; ++t) {
    const Tensor recurrent = Product(h_prev, w_hh, false, true).Contiguous();
    const T* xp = projected.data<T>() + t * n * 4 * h;
    const T *hp = recurrent.data<T>(), *h_in = h_prev.data<T>(), *c_in = c_prev.data<T>();
    T* g_out = gates.data<T>() + t * n * 4 * h;
    T* c_out = cells.data<T>() + t * n * h;
    T* h_out = y.data<T>() + t * n * h;
    for (int64_t r = 0; r < n; ++r) {
      if (t < row_steps[r]) {
        LstmRowForward(h, xp + r * 4 * h, hp + r * 4 * h, b, c_in + r * h, g_out + r * 4 * h,
                       c_out + r * h, h_out + r * h);
        continue;
      }
      std::fill(g_out + r * 4 * h, g_out + (r + 1) * 4 * h, T(0));  // past its length: frozen
      std::copy(c_in + r * h, c_in + (r + 1) * h, c_out + r * h);
      std::copy(h_in + r * h, h_in + (r + 1) * h, h_out + r * h);
    }
    h_prev = y.Select(0, t);
    c_prev = cells.Select(0, t);
  }
  cpu::CopyInto(h_prev, ctx.outputs[1]);
  cpu::CopyInto(c_prev, ctx.outputs[2]);
}

void LstmKernel(KernelContext& ctx) {
  const Dims d = CheckLstm(recurrent::Metas(ctx.inputs, kLengths), ctx.def.name);
  if (ctx.inputs[0].dtype() == DType::Float64) return LstmForward<double>(ctx, d);
  LstmForward<float>(ctx, d);
}

std::vector<TensorMeta> InferLstmGrad(const OpDef& def, const std::vector<TensorMeta>& in,
                                      const Attrs&) {
  std::vector<TensorMeta> forward(in.begin(), in.begin() + 5);
  forward.push_back({in[0].dtype, {in[4].shape.empty() ? 0 : in[4].shape[0]}});
  const Dims d = CheckLstm(forward, def.name);
  const Shape y = {d.steps, d.batch, d.hidden}, last = {d.batch, d.hidden};
  recurrent::CheckGradInputs(in, 5, {y, {d.steps, d.batch, 4 * d.hidden}, y, y, last, last},
                             def.name);
  recurrent::CheckLengths(in, kGradLengths, d.batch, def.name);
  return {in[0], in[1], in[2], in[3], in[4], forward[5]};
}

template <typename T>
void LstmBackward(KernelContext& ctx) {
  const auto& in = ctx.inputs;
  const Tensor &x = in[0], &h0 = in[1], &c0 = in[2], &w_ih = in[3], &w_hh = in[4];
  const Tensor y = in[5].Contiguous(), gates = in[6].Contiguous(), cells = in[7].Contiguous();
  const Tensor dy = in[8].Contiguous();
  const int64_t steps = x.shape()[0], n = x.shape()[1], features = x.shape()[2];
  const int64_t h = h0.shape()[1], rows = steps * n;
  const std::vector<int64_t> row_steps = recurrent::RowSteps(in, kGradLengths, n, steps);
  Tensor d_gates = Tensor::Empty({steps, n, 4 * h}, x.dtype());
  Tensor dh = in[9].Contiguous().Clone(), dc = in[10].Contiguous().Clone();
  const Tensor c_first = c0.Contiguous();
  for (int64_t t = steps - 1; t >= 0; --t) {
    const T* g_in = gates.data<T>() + t * n * 4 * h;
    const T* c_now = cells.data<T>() + t * n * h;
    const T* c_before = t > 0 ? cells.data<T>() + (t - 1) * n * h : c_first.data<T>();
    const T* dy_t = dy.data<T>() + t * n * h;
    T* dg = d_gates.data<T>() + t * n * 4 * h;
    T* dh_p = dh.data<T>();
    T* dc_p = dc.data<T>();
    for (int64_t r = 0; r < n; ++r) {
      if (t < row_steps[r]) {
        LstmRowBackward(h, g_in + r * 4 * h, c_now + r * h, c_before + r * h, dy_t + r * h,
                        dh_p + r * h, dc_p + r * h, dg + r * 4 * h);
        std::fill(dh_p + r * h, dh_p + (r + 1) * h, T(0));  // h reaches the past via the gates
      } else {
        recurrent::Frozen(h, dy_t + r * h, dh_p + r * h, dg + r * 4 * h, 4 * h);
      }
    }
    recurrent::AddProduct<T>(d_gates.Select(0, t), w_hh, dh);
  }
  cpu::CopyInto(dh, ctx.outputs[1]);
  cpu::CopyInto(dc, ctx.outputs[2]);
  const Tensor flat = d_gates.Reshape({rows, 4 * h});
  recurrent::SumRows(flat, ctx.outputs[5]);
  cpu::CopyInto(Product(flat, w_ih, false, false).Reshape({steps, n, features}), ctx.outputs[0]);
  cpu::CopyInto(Product(flat, x.Contiguous().Reshape({rows, features}), true, false),
                ctx.outputs[3]);
  cpu::CopyInto(Product(flat, recurrent::PreviousStates(h0, y).Reshape({rows, h}), true, false),
                ctx.outputs[4]);
}

void LstmGradKernel(KernelContext& ctx) {
  if (ctx.inputs[0].dtype() == DType::Float64) return LstmBackward<double>(ctx);
  LstmBackward<float>(ctx);
}

std::vector<GradVar> LstmGrad(GradBuilder& g) {
  // x, h0, c0, w_ih, w_hh; y, gates, cells; dy, dh_last, dc_last.
  return recurrent::LayerGrad(g, OpKind::LstmSequenceGrad, {5, {0, 3, 4}, 3, kLengths});
}

}  // namespace

void RegisterRecurrentOps(OpRegistry& r) {
  r.Add(MakeOpDef(OpKind::LstmSequence, {"x", "h0", "c0", "w_ih", "w_hh", "bias", "lengths?"}, {},
                  InferLstm, LstmKernel, LstmGrad));
  r.Add(MakeOpDef(OpKind::LstmSequenceGrad,
                  {"x", "h0", "c0", "w_ih", "w_hh", "y", "gates", "cells", "dy", "dh_last",
                   "dc_last", "lengths?"},
                  {}, InferLstmGrad, LstmGradKernel, NoSecondOrder<recurrent::kLstmGrad>));
  recurrent::RegisterGruAndRnnOps(r);
}

}  // namespace kiln
