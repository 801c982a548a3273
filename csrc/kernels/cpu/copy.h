// copy.h - strided copy with broadcasting and dtype conversion; the base of every layout change.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace kiln::cpu {

// dst[...] = convert(src broadcast to dst.shape()). dst may be any strided view.
void CopyInto(const Tensor& src, const Tensor& dst);
// Fills every element of dst with `value`, converted to dst's dtype.
void Fill(const Tensor& dst, double value);

// offsets[i] == start + i * step for every i (false for fewer than two offsets).
inline bool IsProgression(const std::vector<int64_t>& offsets, int64_t* start, int64_t* step) {
  if (offsets.size() < 2) return false;
  *start = offsets[0];
  *step = offsets[1] - offsets[0];
  for (size_t i = 2; i < offsets.size(); ++i)
    if (offsets[i] - offsets[i - 1] != *step) return false;
  return true;
}

// dst[i] = src[i * step] for i < n: a reversal (step -1, flip's) or a strided gather, without
// the offset tables of a general index (those cost a load each: flip ran at 1 ns a float).
template <typename T>
void CopyStridedRun(const T* src, int64_t step, T* dst, int64_t n) {
  if (step == -1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[-i];
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i * step];
  }
}

}  // namespace kiln::cpu
