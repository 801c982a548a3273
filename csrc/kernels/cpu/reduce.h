// reduce.h - the reduction loop behind sums, extrema, arg-reductions and the norms' statistics.
//
// Every reduction sees its input as a contiguous [outer, reduce, inner] block: the reduced axes
// made adjacent (a free view when they already are, one permuted copy when not). Two loops cover
// all cases:
//  - inner == 1: each output reduces one contiguous row; long rows use several accumulator lanes
//    (vectorizable, and a pairwise-like error for float sums), and a single huge row is split
//    into fixed-size chunks reduced in parallel and combined in order (deterministic results
//    whatever the thread count).
//  - inner > 1: a block of adjacent outputs accumulates together while stepping down the reduced
//    axis, so every pass reads contiguous memory and the column loop vectorizes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/loop.h"

namespace kiln::cpu {

struct ReduceShape {
  int64_t outer = 1, reduce = 1, inner = 1;
};

// Returns a contiguous tensor holding `in` with the axes flagged in `reduced` adjacent, and
// its [outer, reduce, inner] sizes. The kept axes keep their order, so output element
// a * inner + b is the contiguous output's element in C order.
Tensor PrepareReduce(const Tensor& in, const std::vector<bool>& reduced, ReduceShape* shape);

// Columns one task accumulates at once in the inner > 1 loop (fits the accumulators in L1).
constexpr int64_t kReduceBlock = 256;

// Eight lanes of C as one GCC/Clang vector (a typedef in a class: see vec.h).
template <typename C>
struct EightLanesOf {
  typedef C type __attribute__((vector_size(8 * sizeof(C))));
};

// The extremum of a and b, a on a tie; b is never NaN where it matters (NaN is flagged apart).
// `b > a ? b : a` is one vmaxps; `a >= b ? a : b`, the same for every non-NaN b, is a compare
// and a blend, which made a 128-element row's loop 1.5x as long (its one dependency chain).
template <bool kMax, typename V>
V KeepExtremum(V a, V b) {
  return (kMax ? b > a : b < a) ? b : a;
}

// The extremum of a float or double run as eight-lane vectors (GCC left the lane loop scalar:
// a compare, a NaN test and a blend per element, a quarter of a softmax's time). Element i goes
// to lane i % 8; the lanes then merge as a tree inside the vector (neighbours, pairs, halves;
// the scalar merge was as long as a 128-element row's loop), the lower lane winning ties, so
// lane 0 ends with the first extremum of the lanes. `*i` advances past the whole vectors.
template <typename C, bool kMax>
C VectorRunExtremum(const C* p, int64_t* i, int64_t end, C init, bool* any_nan) {
  using V = typename EightLanesOf<C>::type;
  V acc = V{} + init, v;
  decltype(acc != acc) nan = {};
  for (; *i + 8 <= end; *i += 8) {
    std::memcpy(&v, p + *i, sizeof v);
    acc = KeepExtremum<kMax>(acc, v);
    nan |= v != v;
  }
  acc = KeepExtremum<kMax>(acc, __builtin_shufflevector(acc, acc, 1, 0, 3, 2, 5, 4, 7, 6));
  acc = KeepExtremum<kMax>(acc, __builtin_shufflevector(acc, acc, 2, 3, 0, 1, 6, 7, 4, 5));
  acc = KeepExtremum<kMax>(acc, __builtin_shufflevector(acc, acc, 4, 5, 6, 7, 0, 1, 2, 3));
  for (int l = 0; l < 8; ++l) *any_nan |= nan[l] != 0;
  return acc[0];
}

// The max (kMax) or min of p[begin, end) in the compute type; NaN when any element is NaN.
// Plain selects in 8 lanes plus a separate NaN flag per lane: a `v != v` inside the select
// would stop the compiler from vectorizing the loop. Ties between -0 and +0 keep the first
// lane's value (float and double: the vector path above, the same rule).
template <typename T, bool kMax>
compute_t<T> RunExtremum(const T* p, int64_t begin, int64_t end) {
  using C = compute_t<T>;
  C init;
  if constexpr (std::is_floating_point_v<C>) {
    init = kMax ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
  } else {
    init = kMax ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
  }
  auto step = [](C& lane, int32_t& flag, C v) {
    lane = (kMax ? lane >= v : lane <= v) ? lane : v;
    flag |= v != v;
  };
  int64_t i = begin;
  C m = init;
  int32_t any = 0;
  if constexpr (std::is_same_v<T, C> && std::is_floating_point_v<C>) {
    bool vector_nan = false;
    m = VectorRunExtremum<C, kMax>(p, &i, end, init, &vector_nan);
    any = vector_nan;
  } else {
    C lanes[8];
    int32_t nan[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (C& lane : lanes) lane = init;
    for (; i + 8 <= end; i += 8)
      for (int l = 0; l < 8; ++l) step(lanes[l], nan[l], static_cast<C>(p[i + l]));
    for (int l = 0; l < 8; ++l) {
      step(m, any, lanes[l]);
      any |= nan[l];
    }
  }
  for (; i < end; ++i) step(m, any, static_cast<C>(p[i]));
  if constexpr (std::is_floating_point_v<C>) {
    if (any) return std::numeric_limits<C>::quiet_NaN();
  }
  return m;
}

// An Op provides: `using Acc`, `static constexpr int kLanes` (1 when the order of steps matters
// beyond what Combine restores; 0 when the op reduces a contiguous run itself with
// `Acc Run(const T* p, int64_t begin, int64_t end) const`), `Acc Init() const`,
// `void Step(Acc&, C value, int64_t r) const` (r: the index along the reduced block),
// `void Combine(Acc& a, const Acc& later) const` and `Out Finish(const Acc&) const`.
template <typename T, typename Op>
typename Op::Acc ReduceRun(const T* p, int64_t begin, int64_t end, const Op& op) {
  using C = compute_t<T>;
  using Acc = typename Op::Acc;
  constexpr int L = Op::kLanes;
  if constexpr (L == 0) return op.Run(p, begin, end);
  Acc acc = op.Init();
  int64_t r = begin;
  if constexpr (L > 1) {
    if (end - begin >= 4 * L) {
      Acc lanes[L];
      for (int l = 0; l < L; ++l) lanes[l] = op.Init();
      for (; r + L <= end; r += L)
        for (int l = 0; l < L; ++l) op.Step(lanes[l], static_cast<C>(p[r + l]), r + l);
      for (int l = 0; l < L; ++l) op.Combine(acc, lanes[l]);
    }
  }
  for (; r < end; ++r) op.Step(acc, static_cast<C>(p[r]), r);
  return acc;
}

// out[a * inner + b] = reduction over r of x[(a * reduce + r) * inner + b]; x contiguous.
template <typename T, typename Out, typename Op>
void ReduceLoop(const T* x, Out* out, const ReduceShape& s, const Op& op) {
  using C = compute_t<T>;
  using Acc = typename Op::Acc;
  const int64_t R = s.reduce, I = s.inner;
  if (s.outer * I == 0) return;
  if (I == 1) {
    if (s.outer == 1 && R >= 2 * kParallelGrain) {
      // One long row: fixed chunks, so the combination order never depends on the thread count.
      const int64_t chunks = (R + kParallelGrain - 1) / kParallelGrain;
      std::vector<Acc> partial(chunks);
      ParallelFor(chunks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c)
          partial[c] = ReduceRun(x, c * kParallelGrain, std::min(R, (c + 1) * kParallelGrain), op);
      });
      Acc acc = op.Init();
      for (const Acc& part : partial) op.Combine(acc, part);
      out[0] = op.Finish(acc);
      return;
    }
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(R, 1));
    ParallelFor(s.outer, grain, [&](int64_t begin, int64_t end) {
      for (int64_t a = begin; a < end; ++a) out[a] = op.Finish(ReduceRun(x + a * R, 0, R, op));
    });
    return;
  }
  const int64_t blocks = (I + kReduceBlock - 1) / kReduceBlock;
  const int64_t work = std::max<int64_t>(R, 1) * std::min(I, kReduceBlock);
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / work);
  ParallelFor(s.outer * blocks, grain, [&](int64_t begin, int64_t end) {
    Acc acc[kReduceBlock];
    for (int64_t task = begin; task < end; ++task) {
      const int64_t a = task / blocks, j0 = (task % blocks) * kReduceBlock;
      const int64_t n = std::min(kReduceBlock, I - j0);
      for (int64_t j = 0; j < n; ++j) acc[j] = op.Init();
      const T* base = x + a * R * I + j0;
      for (int64_t r = 0; r < R; ++r) {
        const T* row = base + r * I;
        for (int64_t j = 0; j < n; ++j) op.Step(acc[j], static_cast<C>(row[j]), r);
      }
      Out* o = out + a * I + j0;
      for (int64_t j = 0; j < n; ++j) o[j] = op.Finish(acc[j]);
    }
  });
}

}  // namespace kiln::cpu
