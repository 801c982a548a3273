// conv_direct.h - float32 convolution for few channels, by direct loops over flat image rows.
#pragma once

#include "kernels/cpu/conv_shape.h"

namespace kiln::cpu {

// Whether DirectConvF32 takes this convolution: one group, unit stride, and channel counts so
// small that a GEMM's dimensions are too (LeNet's 1->6 and 6->16 5x5 convolutions: oneDNN runs
// them as im2col + a GEMM whose N is the 6 or 16 output channels).
bool DirectConvApplies(const ConvShape& s);

// out (n, o, oh, ow) = conv(x (n, c, h, w), w (o, c, kh, kw)) + bias (o), all contiguous
// float32; bias may be null. Needs DirectConvApplies(s).
void DirectConvF32(const ConvShape& s, const float* x, const float* w, const float* bias,
                   float* out);

// dx (n, c, h, w) = the input gradient of convolution s from dy (n, o, oh, ow) and w (o, c, kh,
// kw), all contiguous float32: at unit stride it is itself a convolution, of dy with the weights
// transposed and flipped, padded so that every tap that reached dx is counted. Returns false,
// running nothing, where that convolution is not one DirectConvApplies takes.
bool DirectConvBackwardDataF32(const ConvShape& s, const float* dy, const float* w, float* dx);

}  // namespace kiln::cpu
