// copy.h - strided copy with broadcasting and dtype conversion; the base of every layout change.
#pragma once

#include "core/tensor.h"

namespace kiln::cpu {

// dst[...] = convert(src broadcast to dst.shape()). dst may be any strided view.
void CopyInto(const Tensor& src, const Tensor& dst);
// Fills every element of dst with `value`, converted to dst's dtype.
void Fill(const Tensor& dst, double value);

}  // namespace kiln::cpu
