// recurrent_internal.h - what the recurrent family's files share: recurrent.cc (LSTM) and
// recurrent_gru.cc (GRU and the plain tanh/relu RNN).
#pragma once

#include <vector>

#include "ops/registry.h"

namespace kiln::recurrent {

// A 2-D product through the matmul op (its kernels); zeros when a dimension is empty.
Tensor Product(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b);
// Raises TypeError naming `op` unless every input is float32 or float64, all alike.
void CheckFloats(const std::vector<TensorMeta>& in, const char* op);
// Raises ValueError unless `gates * hidden` fits in int64.
void CheckHidden(int64_t hidden, int64_t gates, const Shape& h0, const char* op);
// Each step's previous hidden state, (T, N, H): h0, then y[0 .. T-2].
Tensor PreviousStates(const Tensor& h0, const Tensor& y);
// The sum of a (rows, k) tensor's rows, written into out (k).
void SumRows(const Tensor& rows, const Tensor& out);

void RegisterGruAndRnnOps(OpRegistry& r);

}  // namespace kiln::recurrent
