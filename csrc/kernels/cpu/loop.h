// loop.h - the one strided, broadcasting loop that every elementwise kernel runs on.
//
// 1. Each operand's strides are given over the output's shape (0 where it broadcasts).
// 2. Adjacent dimensions merge when every operand steps through them like one dimension, so a
//    contiguous or simply broadcast case becomes a single flat run.
// 3. The outer dimensions are split across threads; the innermost is handed to the kernel as
//    (pointers, byte strides, count), and the kernel picks a vectorizable loop when the inner
//    strides are the element size or zero.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/parallel.h"
#include "core/tensor.h"

namespace kiln::cpu {

// Elements below which a loop is not worth splitting across threads.
constexpr int64_t kParallelGrain = 32768;

// Strides of `t` broadcast to `shape` (NumPy rules, zero where `t` has size 1 or lacks the dim).
Shape BroadcastStrides(const Tensor& t, const Shape& shape);

template <int N>
struct LoopPlan {
  Shape shape;                        // merged dimensions, outermost first
  std::array<Shape, N> byte_strides;  // per operand, per merged dimension
  std::array<char*, N> base;
};

template <int N>
LoopPlan<N> PlanLoop(const Shape& shape, const std::array<Shape, N>& strides,
                     const std::array<char*, N>& base, const std::array<int64_t, N>& itemsize) {
  LoopPlan<N> plan;
  plan.base = base;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;  // size-1 dims never move a pointer
    bool merge = !plan.shape.empty();
    for (int k = 0; k < N && merge; ++k)
      merge = plan.byte_strides[k].back() == strides[k][d] * itemsize[k] * shape[d];
    if (merge) {
      plan.shape.back() *= shape[d];
      for (int k = 0; k < N; ++k) plan.byte_strides[k].back() = strides[k][d] * itemsize[k];
      continue;
    }
    plan.shape.push_back(shape[d]);
    for (int k = 0; k < N; ++k) plan.byte_strides[k].push_back(strides[k][d] * itemsize[k]);
  }
  if (plan.shape.empty()) {
    plan.shape.push_back(1);
    for (int k = 0; k < N; ++k) plan.byte_strides[k].push_back(0);
  }
  return plan;
}

// Calls inner(ptrs, inner_byte_strides, count) over every innermost run of the plan.
template <int N, typename Inner>
void RunLoop(const LoopPlan<N>& plan, Inner&& inner) {
  const int64_t ndim = plan.shape.size();
  const int64_t inner_n = plan.shape.back();
  int64_t outer_n = 1;
  for (int64_t d = 0; d + 1 < ndim; ++d) outer_n *= plan.shape[d];
  std::array<int64_t, N> inner_strides;
  for (int k = 0; k < N; ++k) inner_strides[k] = plan.byte_strides[k].back();

  auto run_range = [&](int64_t begin, int64_t end) {
    // Decompose `begin` into a multi-index over the outer dimensions, then step like an odometer.
    std::vector<int64_t> index(ndim > 1 ? ndim - 1 : 0, 0);
    std::array<char*, N> ptr = plan.base;
    int64_t rest = begin;
    for (int64_t d = ndim - 2; d >= 0; --d) {
      index[d] = rest % plan.shape[d];
      rest /= plan.shape[d];
      for (int k = 0; k < N; ++k) ptr[k] += index[d] * plan.byte_strides[k][d];
    }
    for (int64_t i = begin; i < end; ++i) {
      inner(ptr, inner_strides, inner_n);
      for (int64_t d = ndim - 2; d >= 0; --d) {
        for (int k = 0; k < N; ++k) ptr[k] += plan.byte_strides[k][d];
        if (++index[d] < plan.shape[d]) break;
        for (int k = 0; k < N; ++k) ptr[k] -= plan.shape[d] * plan.byte_strides[k][d];
        index[d] = 0;
      }
    }
  };

  if (outer_n == 1 && inner_n >= 2 * kParallelGrain) {
    // One long run: split it, offsetting each operand's pointer.
    ParallelFor(inner_n, kParallelGrain, [&](int64_t begin, int64_t end) {
      std::array<char*, N> ptr = plan.base;
      for (int k = 0; k < N; ++k) ptr[k] += begin * inner_strides[k];
      inner(ptr, inner_strides, end - begin);
    });
    return;
  }
  int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner_n, 1));
  ParallelFor(outer_n, grain, run_range);
}

// Runs inner over output `out` (operand 0, written) and `inputs` broadcast to out's shape.
template <int N, typename Inner>
void ForEachElement(const Tensor& out, const std::array<Tensor, N - 1>& inputs, Inner&& inner) {
  std::array<Shape, N> strides;
  std::array<char*, N> base;
  std::array<int64_t, N> itemsize;
  strides[0] = out.strides();
  base[0] = static_cast<char*>(out.raw_data());
  itemsize[0] = out.itemsize();
  for (int k = 1; k < N; ++k) {
    strides[k] = BroadcastStrides(inputs[k - 1], out.shape());
    base[k] = static_cast<char*>(inputs[k - 1].raw_data());
    itemsize[k] = inputs[k - 1].itemsize();
  }
  if (out.numel() == 0) return;
  RunLoop<N>(PlanLoop<N>(out.shape(), strides, base, itemsize), inner);
}

}  // namespace kiln::cpu
