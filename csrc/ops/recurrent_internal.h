// recurrent_internal.h - what the recurrent family's files share: recurrent.cc (the shared
// checks and the LSTM) and recurrent_gru.cc (GRU and the plain tanh/relu RNN).
#pragma once

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln::recurrent {

struct Dims {
  int64_t steps, batch, features, hidden;
};

// Checks x (T, N, I), h0 (N, H), w_ih (G*H, I), w_hh (G*H, H), then `biases` tensors of (G*H),
// all float32 or all float64 (in[0 .. 4 + biases)); ValueError/TypeError name `op`.
Dims CheckLayer(const std::vector<TensorMeta>& in, int64_t gates, int biases, const char* op);
// The backward's extra inputs in[first ...] must have these shapes and x's dtype.
void CheckGradInputs(const std::vector<TensorMeta>& in, size_t first,
                     const std::vector<Shape>& shapes, const char* op);
// Checks the optional lengths input in[at]: absent, or (batch) int32/int64.
void CheckLengths(const std::vector<TensorMeta>& in, size_t at, int64_t batch, const char* op);
// The metas of inputs[0 .. count).
std::vector<TensorMeta> Metas(const std::vector<Tensor>& inputs, size_t count);

// How many steps each batch row runs: its length (inputs[at], when given) clamped to
// [0, steps], else every step. A row past its length keeps its state: the layer's output there
// is the frozen state, which nn's layers replace by zeros.
std::vector<int64_t> RowSteps(const std::vector<Tensor>& inputs, size_t at, int64_t batch,
                              int64_t steps);

// A 2-D product through the matmul op (its kernels); zeros when a dimension is empty.
Tensor Product(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b);
// Every step's input projection x (T, N, I) x w_ih^T, as (T*N, G*H).
Tensor Projected(const Tensor& x, const Tensor& w_ih);
// Each step's previous hidden state, (T, N, H): h0, then y[0 .. T-2].
Tensor PreviousStates(const Tensor& h0, const Tensor& y);
// The sum of a (rows, k) tensor's rows, written into out (k).
void SumRows(const Tensor& rows, const Tensor& out);

// The backward's dh after a step: each row holds its direct path to the step before (GRU's
// z * grad; none for the LSTM and the RNN), a row past its length the whole incoming dy + dh
// (Frozen, which also zeroes its gate gradients), and AddProduct adds the path through the
// gates, d_gates (N, G*H) x w_hh (G*H, H).
template <typename T>
void Frozen(int64_t h, const T* dy, T* dh, T* d_gates, int64_t width) {
  for (int64_t j = 0; j < h; ++j) dh[j] += dy[j];
  std::fill(d_gates, d_gates + width, T(0));
}
template <typename T>
void AddProduct(const Tensor& d_gates, const Tensor& w_hh, const Tensor& dh) {
  const Tensor through_gates = Product(d_gates, w_hh, false, false).Contiguous();
  const T* add = through_gates.data<T>();
  T* out = dh.data<T>();
  for (int64_t s = 0; s < dh.numel(); ++s) out[s] += add[s];
}

// The optional lengths input (node input `at`) for a layer's gradient op; none when omitted.
GradVar LengthsOf(GradBuilder& g, int at);

// What a layer's gradient op takes: the layer's first `inputs` inputs, the saved outputs listed,
// the first `out_grads` incoming gradients, then the lengths (the layer's input `lengths_at`).
struct LayerGradInputs {
  int inputs;
  std::vector<int> saved_outputs;
  int out_grads;
  int lengths_at;
};
// A layer's gradient rule: one node of its gradient op (the layer's attributes passed on), whose
// outputs are the gradients of the layer's inputs before the lengths.
std::vector<GradVar> LayerGrad(GradBuilder& g, OpKind grad_op, const LayerGradInputs& from);

inline constexpr char kLstmGrad[] = "lstm_sequence_grad", kGruGrad[] = "gru_sequence_grad",
                      kRnnGrad[] = "rnn_sequence_grad";

void RegisterGruAndRnnOps(OpRegistry& r);

}  // namespace kiln::recurrent
