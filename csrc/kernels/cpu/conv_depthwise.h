// conv_depthwise.h - float32 depthwise convolution (one input channel per group) and its gradients.
#pragma once

#include "kernels/cpu/conv_shape.h"

namespace kiln::cpu {

// Whether the depthwise loops take convolution s: groups == input channels > 1 (each output
// channel reads one input channel; o / c of them per channel), and a padded image plane small
// enough for one thread's scratch. oneDNN's AVX2 depthwise kernel measured about half the speed
// of PyTorch's on MobileNet- and ResNeXt-sized planes; these loops measure level with it.
bool DepthwiseConvApplies(const ConvShape& s);

// out (n, o, oh, ow) = conv(x (n, c, h, w), w (o, 1, kh, kw)) + bias (o), all contiguous float32;
// bias may be null. Needs DepthwiseConvApplies(s).
void DepthwiseConvF32(const ConvShape& s, const float* x, const float* w, const float* bias,
                      float* out);

// dx (n, c, h, w), the input gradient, from dy (n, o, oh, ow) and w. Needs DepthwiseConvApplies.
void DepthwiseConvBackwardDataF32(const ConvShape& s, const float* dy, const float* w, float* dx);

// Whether DepthwiseConvBackwardWeightsF32 measured faster than oneDNN's for s: not for 3 x 3
// kernels over planes under 8 x 8 whose channels do not come in eights (the blocked loops of
// conv_depthwise_blocked.h take those), where copying each plane costs more than its products
// (16 x 960 x 7 x 7 per plane: 0.80 against oneDNN's 0.34 ms; blocked 0.18).
bool DepthwiseWeightGradPays(const ConvShape& s);

// dw (o, 1, kh, kw), the weight gradient, from dy (n, o, oh, ow) and x (n, c, h, w). Needs
// DepthwiseConvApplies.
void DepthwiseConvBackwardWeightsF32(const ConvShape& s, const float* dy, const float* x,
                                     float* dw);

}  // namespace kiln::cpu
