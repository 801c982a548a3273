// conv_depthwise_blocked.h - depthwise convolution of small planes, eight channels to a vector.
#pragma once

#include "kernels/cpu/conv_shape.h"

namespace kiln::cpu {

// Whether the blocked loops take depthwise convolution s: a channel multiplier of 1, channels a
// multiple of 8, and a padded plane of eight channels that fits one thread's scratch.
bool DepthwiseBlockedApplies(const ConvShape& s);
// Whether they measured faster than the per-plane loops (conv_depthwise.cc) for this pass of s
// (16 x C x H x W, 3x3 and 7x7, 2 threads, Zen 4): the weight gradient always (576 x 14 x 14:
// 0.82 -> 0.56 ms); the forward for planes of up to 16 x 16 outputs (960 x 7 x 7: 0.48 -> 0.29;
// at 28 x 28 and larger the per-plane loops measured 10-30% faster) and at any size strided
// (144 x 56 x 56 stride 2: 2.37 -> 1.65); the input gradient for planes up to 16 x 16 (0.86 ->
// 0.29 at 7 x 7) and kernels over 3x3 (level or better above).
enum class DepthwisePass { kForward, kInputGrad, kWeightGrad };
bool DepthwiseBlockedPays(const ConvShape& s, DepthwisePass pass);

// As DepthwiseConvF32 and its gradients (conv_depthwise.h), for s that DepthwiseBlockedApplies
// takes. The input gradient returns false, running nothing, but at unit stride with padding
// within the kernel's reach.
void DepthwiseBlockedF32(const ConvShape& s, const float* x, const float* w, const float* bias,
                         float* out);
bool DepthwiseBlockedBackwardDataF32(const ConvShape& s, const float* dy, const float* w,
                                     float* dx);
void DepthwiseBlockedBackwardWeightsF32(const ConvShape& s, const float* dy, const float* x,
                                        float* dw);

}  // namespace kiln::cpu
