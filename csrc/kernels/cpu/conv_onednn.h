// conv_onednn.h - convolution and its two gradients on cached oneDNN primitives.
//
// The primitives run in the layouts oneDNN picks where that measured faster (conv_onednn.cc,
// PrimitiveDescs): operands are reordered from kiln's plain NCHW / OIHW into them and results
// back, through scratch buffers from kiln's allocator.
#pragma once

#include <initializer_list>
#include <oneapi/dnnl/dnnl.hpp>

#include "core/tensor.h"
#include "kernels/cpu/conv_shape.h"

namespace kiln::cpu {

// The element type a convolution's operands have in oneDNN: bf16 when they are all bfloat16 and
// the CPU runs bf16 natively, f32 otherwise (the caller then converts around the call).
dnnl::memory::data_type OnednnConvType(std::initializer_list<DType> dtypes);

// out = conv(x, w) + bias: x, w and out contiguous of element type dt, the bias (may be
// undefined) contiguous float32. One group or several; dilation and padding as in s.
void OnednnConv(const ConvShape& s, const Tensor& x, const Tensor& w, const Tensor& bias,
                const Tensor& out, dnnl::memory::data_type dt);
// dx = the input gradient of convolution s from dy and w, all contiguous of element type dt.
void OnednnConvBackwardData(const ConvShape& s, const Tensor& dy, const Tensor& w, const Tensor& dx,
                            dnnl::memory::data_type dt);
// dw = the weight gradient of convolution s from dy and x, all contiguous of element type dt.
void OnednnConvBackwardWeights(const ConvShape& s, const Tensor& dy, const Tensor& x,
                               const Tensor& dw, dnnl::memory::data_type dt);

}  // namespace kiln::cpu
