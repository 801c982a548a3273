// pool.h - 2-D max and average pooling over NCHW planes (kiln's own kernels; no oneDNN).
#pragma once

#include "core/tensor.h"

namespace kiln::cpu {

struct Pool2dParams {
  int64_t kh, kw, sh, sw, ph, pw, dh = 1, dw = 1;
  int64_t oh, ow;
  bool count_include_pad = true;
  int64_t divisor_override = 0;  // 0: none
};

// Output length of one pooled dimension (PyTorch's rule, including ceil_mode's "the last window
// must start inside the input or its left padding").
int64_t PoolOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                       bool ceil_mode);

// `in` and `out` are contiguous (..., H, W) / (..., OH, OW) of one dtype; `indices` int64 holds
// each maximum's flat position h * W + w within its plane. NaN wins, as in PyTorch.
void MaxPool2d(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p);
// Floating dtypes; padding counts as zeros when count_include_pad.
void AvgPool2d(const Tensor& in, const Tensor& out, const Pool2dParams& p);

// Backward passes, floating dtypes; all tensors contiguous, dx of the input's shape, dy of the
// pooled shape. Each overwrites all of dx.
// max: dx = dy scattered (summed) to each maximum's flat position `indices` (int64, as
// MaxPool2d writes them). Returns false, leaving those entries out, if an index lies outside
// its plane.
bool MaxPool2dBackward(const Tensor& dy, const Tensor& indices, const Tensor& dx);
// avg: each dy spread evenly over its window's input positions (the divisor AvgPool2d used).
void AvgPool2dBackward(const Tensor& dy, const Tensor& dx, const Pool2dParams& p);

}  // namespace kiln::cpu
