// recurrent_gru.cc - whole GRU and plain (tanh or relu) RNN layers as single ops, with their
// BPTT: the pattern of recurrent.cc's LSTM (every step's input projection as one product, each
// step one (N, H) x (H, G*H) product and a pass over the gates).
//
//   gru_sequence(x [T,N,I], h0 [N,H], w_ih [3H,I], w_hh [3H,H], b_ih [3H], b_hh [3H], lengths?)
//     -> y [T,N,H], h_T, saved [T,N,4H] (r, z, n and the hidden part of n's input, h W_hn + b_hn)
//   gru_sequence_grad(x, h0, w_ih, w_hh, y, saved, dy, dh_T, lengths?)
//     -> dx, dh0, dw_ih, dw_hh, db_ih, db_hh
//   rnn_sequence(x, h0, w_ih [H,I], w_hh [H,H], bias [H], lengths?; relu) -> y, h_T
//   rnn_sequence_grad(x, h0, w_ih, w_hh, y, dy, dh_T, lengths?; relu) -> dx, dh0, dw_ih, dw_hh,
//   dbias
// Gates in MindSpore's (and PyTorch's) order: r, z, n; h' = n + z * (h - n). lengths (N) as in
// recurrent.cc: a row past its length keeps its state.
#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/activation_math.h"
#include "kernels/cpu/copy.h"
#include "ops/evaluate.h"
#include "ops/grad.h"
#include "ops/recurrent_internal.h"

namespace kiln::recurrent {
namespace {

// Where the optional lengths input sits in each op's inputs.
constexpr size_t kGruLengths = 6, kGruGradLengths = 8, kRnnLengths = 5, kRnnGradLengths = 7;

// ---- GRU

std::vector<TensorMeta> InferGru(const OpDef& def, const std::vector<TensorMeta>& in,
                                 const Attrs&) {
  const Dims d = CheckLayer(in, 3, 2, def.name);
  CheckLengths(in, kGruLengths, d.batch, def.name);
  const DType t = in[0].dtype;
  return {{t, {d.steps, d.batch, d.hidden}},
          {t, {d.batch, d.hidden}},
          {t, {d.steps, d.batch, 4 * d.hidden}}};
}

// One step of one batch row, vectorized over the hidden units: xp and hp are the input and
// recurrent products (3H wide, gate-major), bi and bh their biases; writes what the backward
// reads (r, z, n and n's hidden part) and the new hidden state.
template <typename T>
void GruRowForward(int64_t h, const T* __restrict xp, const T* __restrict hp,
                   const T* __restrict bi, const T* __restrict bh, const T* __restrict h_in,
                   T* __restrict saved, T* __restrict h_out) {
  for (int64_t j = 0; j < h; ++j) {
    const T reset = cpu::Sigmoid(xp[j] + bi[j] + hp[j] + bh[j]);
    const T update = cpu::Sigmoid(xp[h + j] + bi[h + j] + hp[h + j] + bh[h + j]);
    const T hidden_n = hp[2 * h + j] + bh[2 * h + j];
    const T cand = cpu::Tanh(xp[2 * h + j] + bi[2 * h + j] + reset * hidden_n);
    saved[j] = reset, saved[h + j] = update, saved[2 * h + j] = cand, saved[3 * h + j] = hidden_n;
    h_out[j] = cand + update * (h_in[j] - cand);
  }
}

template <typename T>
void GruForward(KernelContext& ctx, const Dims& d) {
  const int64_t n = d.batch, h = d.hidden;
  const Tensor projected = Projected(ctx.inputs[0], ctx.inputs[2]);
  const Tensor b_ih = ctx.inputs[4].Contiguous(), b_hh = ctx.inputs[5].Contiguous();
  Tensor &y = ctx.outputs[0], &saved = ctx.outputs[2];
  const std::vector<int64_t> row_steps = RowSteps(ctx.inputs, kGruLengths, n, d.steps);
  Tensor h_prev = ctx.inputs[1].Contiguous();
  for (int64_t t = 0; t < d.steps; ++t) {
    const Tensor recurrent = Product(h_prev, ctx.inputs[3], false, true).Contiguous();
    const T *xp = projected.data<T>() + t * n * 3 * h, *hp = recurrent.data<T>();
    const T *bi = b_ih.data<T>(), *bh = b_hh.data<T>(), *h_in = h_prev.data<T>();
    T* s_out = saved.data<T>() + t * n * 4 * h;
    T* h_out = y.data<T>() + t * n * h;
    for (int64_t r = 0; r < n; ++r) {
      if (t < row_steps[r]) {
        GruRowForward(h, xp + r * 3 * h, hp + r * 3 * h, bi, bh, h_in + r * h, s_out + r * 4 * h,
                      h_out + r * h);
        continue;
      }
      std::fill(s_out + r * 4 * h, s_out + (r + 1) * 4 * h, T(0));  // past its length: frozen
      std::copy(h_in + r * h, h_in + (r + 1) * h, h_out + r * h);
    }
    h_prev = y.Select(0, t);
  }
  cpu::CopyInto(h_prev, ctx.outputs[1]);
}

void GruKernel(KernelContext& ctx) {
  const Dims d = CheckLayer(Metas(ctx.inputs, kGruLengths), 3, 2, ctx.def.name);
  if (ctx.inputs[0].dtype() == DType::Float64) return GruForward<double>(ctx, d);
  GruForward<float>(ctx, d);
}

std::vector<TensorMeta> InferGruGrad(const OpDef& def, const std::vector<TensorMeta>& in,
                                     const Attrs&) {
  std::vector<TensorMeta> forward(in.begin(), in.begin() + 4);
  const int64_t g = in[2].shape.empty() ? 0 : in[2].shape[0];
  forward.push_back({in[0].dtype, {g}});
  forward.push_back({in[0].dtype, {g}});
  const Dims d = CheckLayer(forward, 3, 2, def.name);
  const Shape y = {d.steps, d.batch, d.hidden}, last = {d.batch, d.hidden};
  CheckGradInputs(in, 4, {y, {d.steps, d.batch, 4 * d.hidden}, y, last}, def.name);
  CheckLengths(in, kGruGradLengths, d.batch, def.name);
  return {in[0], in[1], in[2], in[3], forward[4], forward[5]};
}

// The mirror image for one batch row: from the saved gates, the previous state and the incoming
// dy + dh, the gradients of the input products (di) and of the recurrent ones (dhid); dh keeps
// the direct path z * grad, to which the caller adds the path through the gates.
template <typename T>
void GruRowBackward(int64_t h, const T* __restrict saved, const T* __restrict h_before,
                    const T* __restrict dy, T* __restrict dh, T* __restrict di,
                    T* __restrict dhid) {
  for (int64_t j = 0; j < h; ++j) {
    const T reset = saved[j], update = saved[h + j], cand = saved[2 * h + j];
    const T hidden_n = saved[3 * h + j];
    const T grad = dy[j] + dh[j];
    const T d_cand = grad * (T(1) - update) * (T(1) - cand * cand);
    const T d_update = grad * (h_before[j] - cand) * update * (T(1) - update);
    const T d_reset = d_cand * hidden_n * reset * (T(1) - reset);
    di[j] = d_reset, di[h + j] = d_update, di[2 * h + j] = d_cand;
    dhid[j] = d_reset, dhid[h + j] = d_update, dhid[2 * h + j] = d_cand * reset;
    dh[j] = grad * update;
  }
}

template <typename T>
void GruBackward(KernelContext& ctx) {
  const auto& in = ctx.inputs;
  const Tensor &x = in[0], &h0 = in[1], &w_ih = in[2], &w_hh = in[3];
  const Tensor y = in[4].Contiguous(), saved = in[5].Contiguous(), dy = in[6].Contiguous();
  const int64_t steps = x.shape()[0], n = x.shape()[1], h = h0.shape()[1], rows = steps * n;
  Tensor d_in = Tensor::Empty({steps, n, 3 * h}, x.dtype());   // d(x W_ih^T + b_ih)
  Tensor d_hid = Tensor::Empty({steps, n, 3 * h}, x.dtype());  // d(h W_hh^T + b_hh)
  Tensor dh = in[7].Contiguous().Clone();
  const Tensor h_first = h0.Contiguous();
  const std::vector<int64_t> row_steps = RowSteps(in, kGruGradLengths, n, steps);
  for (int64_t t = steps - 1; t >= 0; --t) {
    const T* s_in = saved.data<T>() + t * n * 4 * h;
    const T* h_before = t > 0 ? y.data<T>() + (t - 1) * n * h : h_first.data<T>();
    const T* dy_t = dy.data<T>() + t * n * h;
    T* di = d_in.data<T>() + t * n * 3 * h;
    T* dhid = d_hid.data<T>() + t * n * 3 * h;
    T* dh_p = dh.data<T>();
    for (int64_t r = 0; r < n; ++r) {
      if (t < row_steps[r]) {
        GruRowBackward(h, s_in + r * 4 * h, h_before + r * h, dy_t + r * h, dh_p + r * h,
                       di + r * 3 * h, dhid + r * 3 * h);
        continue;
      }
      std::fill(di + r * 3 * h, di + (r + 1) * 3 * h, T(0));
      Frozen(h, dy_t + r * h, dh_p + r * h, dhid + r * 3 * h, 3 * h);
    }
    AddProduct<T>(d_hid.Select(0, t), w_hh, dh);
  }
  cpu::CopyInto(dh, ctx.outputs[1]);
  const Tensor flat_in = d_in.Reshape({rows, 3 * h}), flat_hid = d_hid.Reshape({rows, 3 * h});
  cpu::CopyInto(Product(flat_in, w_ih, false, false).Reshape(x.shape()), ctx.outputs[0]);
  cpu::CopyInto(Product(flat_in, x.Contiguous().Reshape({rows, x.shape()[2]}), true, false),
                ctx.outputs[2]);
  cpu::CopyInto(Product(flat_hid, PreviousStates(h0, y).Reshape({rows, h}), true, false),
                ctx.outputs[3]);
  SumRows(flat_in, ctx.outputs[4]);
  SumRows(flat_hid, ctx.outputs[5]);
}

void GruGradKernel(KernelContext& ctx) {
  if (ctx.inputs[0].dtype() == DType::Float64) return GruBackward<double>(ctx);
  GruBackward<float>(ctx);
}

std::vector<GradVar> GruGrad(GradBuilder& g) {
  // x, h0, w_ih, w_hh; y, saved; dy, dh_last.
  return LayerGrad(g, OpKind::GruSequenceGrad, {4, {0, 2}, 2, kGruLengths});
}

// ---- the plain RNN: h' = tanh or relu(x W_ih^T + h W_hh^T + bias)

std::vector<TensorMeta> InferRnn(const OpDef& def, const std::vector<TensorMeta>& in,
                                 const Attrs&) {
  const Dims d = CheckLayer(in, 1, 1, def.name);
  CheckLengths(in, kRnnLengths, d.batch, def.name);
  const DType t = in[0].dtype;
  return {{t, {d.steps, d.batch, d.hidden}}, {t, {d.batch, d.hidden}}};
}

// One step of one batch row; the two activations in separate loops, each vectorized.
template <typename T>
void RnnRowForward(int64_t h, bool relu, const T* __restrict xp, const T* __restrict hp,
                   const T* __restrict b, T* __restrict h_out) {
  if (relu) {
    for (int64_t j = 0; j < h; ++j) {
      const T pre = xp[j] + hp[j] + b[j];
      h_out[j] = pre > T(0) ? pre : T(0);
    }
    return;
  }
  for (int64_t j = 0; j < h; ++j) h_out[j] = cpu::Tanh(xp[j] + hp[j] + b[j]);
}

template <typename T>
void RnnForward(KernelContext& ctx, const Dims& d) {
  const bool relu = AttrBool(ctx.attrs, 0);
  const int64_t n = d.batch, h = d.hidden;
  const Tensor projected = Projected(ctx.inputs[0], ctx.inputs[2]);
  const Tensor bias = ctx.inputs[4].Contiguous();
  Tensor& y = ctx.outputs[0];
  const std::vector<int64_t> row_steps = RowSteps(ctx.inputs, kRnnLengths, n, d.steps);
  Tensor h_prev = ctx.inputs[1].Contiguous();
  for (int64_t t = 0; t < d.steps; ++t) {
    const Tensor recurrent = Product(h_prev, ctx.inputs[3], false, true).Contiguous();
    const T *xp = projected.data<T>() + t * n * h, *hp = recurrent.data<T>(), *b = bias.data<T>();
    T* h_out = y.data<T>() + t * n * h;
    const T* h_in = h_prev.data<T>();
    for (int64_t r = 0; r < n; ++r) {
      if (t < row_steps[r])
        RnnRowForward(h, relu, xp + r * h, hp + r * h, b, h_out + r * h);
      else  // past its length: frozen
        std::copy(h_in + r * h, h_in + (r + 1) * h, h_out + r * h);
    }
    h_prev = y.Select(0, t);
  }
  cpu::CopyInto(h_prev, ctx.outputs[1]);
}

void RnnKernel(KernelContext& ctx) {
  const Dims d = CheckLayer(Metas(ctx.inputs, kRnnLengths), 1, 1, ctx.def.name);
  if (ctx.inputs[0].dtype() == DType::Float64) return RnnForward<double>(ctx, d);
  RnnForward<float>(ctx, d);
}

std::vector<TensorMeta> InferRnnGrad(const OpDef& def, const std::vector<TensorMeta>& in,
                                     const Attrs&) {
  std::vector<TensorMeta> forward(in.begin(), in.begin() + 4);
  forward.push_back({in[0].dtype, {in[2].shape.empty() ? 0 : in[2].shape[0]}});
  const Dims d = CheckLayer(forward, 1, 1, def.name);
  const Shape y = {d.steps, d.batch, d.hidden};
  CheckGradInputs(in, 4, {y, y, {d.batch, d.hidden}}, def.name);
  CheckLengths(in, kRnnGradLengths, d.batch, def.name);
  return {in[0], in[1], in[2], in[3], forward[4]};
}

template <typename T>
void RnnBackward(KernelContext& ctx) {
  const bool relu = AttrBool(ctx.attrs, 0);
  const auto& in = ctx.inputs;
  const Tensor &x = in[0], &h0 = in[1], &w_ih = in[2], &w_hh = in[3];
  const Tensor y = in[4].Contiguous(), dy = in[5].Contiguous();
  const int64_t steps = x.shape()[0], n = x.shape()[1], h = h0.shape()[1], rows = steps * n;
  Tensor d_pre = Tensor::Empty({steps, n, h}, x.dtype());
  Tensor dh = in[6].Contiguous().Clone();
  const std::vector<int64_t> row_steps = RowSteps(in, kRnnGradLengths, n, steps);
  for (int64_t t = steps - 1; t >= 0; --t) {
    const T *out = y.data<T>() + t * n * h, *dy_t = dy.data<T>() + t * n * h;
    T* dh_p = dh.data<T>();
    T* dp = d_pre.data<T>() + t * n * h;
    for (int64_t s = 0; s < n * h; ++s) {
      const T grad = dy_t[s] + dh_p[s];
      dp[s] = relu ? (out[s] > T(0) ? grad : T(0)) : grad * (T(1) - out[s] * out[s]);
    }
    for (int64_t r = 0; r < n; ++r) {
      if (t < row_steps[r])
        std::fill(dh_p + r * h, dh_p + (r + 1) * h, T(0));  // h reaches the past via the gates
      else
        Frozen(h, dy_t + r * h, dh_p + r * h, dp + r * h, h);
    }
    AddProduct<T>(d_pre.Select(0, t), w_hh, dh);
  }
  cpu::CopyInto(dh, ctx.outputs[1]);
  const Tensor flat = d_pre.Reshape({rows, h});
  cpu::CopyInto(Product(flat, w_ih, false, false).Reshape(x.shape()), ctx.outputs[0]);
  cpu::CopyInto(Product(flat, x.Contiguous().Reshape({rows, x.shape()[2]}), true, false),
                ctx.outputs[2]);
  cpu::CopyInto(Product(flat, PreviousStates(h0, y).Reshape({rows, h}), true, false),
                ctx.outputs[3]);
  SumRows(flat, ctx.outputs[4]);
}

void RnnGradKernel(KernelContext& ctx) {
  if (ctx.inputs[0].dtype() == DType::Float64) return RnnBackward<double>(ctx);
  RnnBackward<float>(ctx);
}

std::vector<GradVar> RnnGrad(GradBuilder& g) {
  // x, h0, w_ih, w_hh; y; dy, dh_last.
  return LayerGrad(g, OpKind::RnnSequenceGrad, {4, {0}, 2, kRnnLengths});
}

}  // namespace

void RegisterGruAndRnnOps(OpRegistry& r) {
  r.Add(MakeOpDef(OpKind::GruSequence, {"x", "h0", "w_ih", "w_hh", "b_ih", "b_hh", "lengths?"}, {},
                  InferGru, GruKernel, GruGrad));
  r.Add(MakeOpDef(OpKind::GruSequenceGrad,
                  {"x", "h0", "w_ih", "w_hh", "y", "saved", "dy", "dh_last", "lengths?"}, {},
                  InferGruGrad, GruGradKernel, NoSecondOrder<kGruGrad>));
  r.Add(MakeOpDef(OpKind::RnnSequence, {"x", "h0", "w_ih", "w_hh", "bias", "lengths?"},
                  {{"relu", false}}, InferRnn, RnnKernel, RnnGrad));
  r.Add(MakeOpDef(OpKind::RnnSequenceGrad,
                  {"x", "h0", "w_ih", "w_hh", "y", "dy", "dh_last", "lengths?"}, {{"relu", false}},
                  InferRnnGrad, RnnGradKernel, NoSecondOrder<kRnnGrad>));
}

}  // namespace kiln::recurrent
