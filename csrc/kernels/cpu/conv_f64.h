// conv_f64.h - float64 2-D convolution and its two gradients (oneDNN has no f64 convolution).
#pragma once

#include "core/tensor.h"
#include "kernels/cpu/conv_shape.h"

namespace kiln::cpu {

// Direct loops in double precision: float64 is asked for when precision matters (gradient
// checks, numerics), so these trade speed for exact float64 sums instead of rounding through
// float32. All tensors contiguous float64; bias may be undefined. Each overwrites its output.
void ConvF64(const ConvShape& s, const Tensor& x, const Tensor& w, const Tensor& bias,
             const Tensor& out);
void ConvF64BackwardData(const ConvShape& s, const Tensor& dy, const Tensor& w, const Tensor& dx);
void ConvF64BackwardWeights(const ConvShape& s, const Tensor& dy, const Tensor& x,
                            const Tensor& dw);

}  // namespace kiln::cpu
