// conv.cc - Conv2d on oneDNN (cached primitives), with its gradient ops; pooling is in pool.cc.
//
// NCHW. Conv2d runs float32 through oneDNN (kernels/cpu/conv_onednn.h: mostly in the layouts
// oneDNN picks, reordered around each call); where the channels are so few that
// oneDNN's im2col + GEMM has a GEMM of 6 or 16 columns (LeNet's), kiln's direct loops run instead
// (conv_direct.h), measured faster; depthwise convolutions (groups == channels) run kiln's
// phase-plane loops (conv_depthwise.h), several times faster than oneDNN's plain-layout ones here,
// but for the weight gradient of the smallest planes. bfloat16 runs natively (bf16 operands, f32
// accumulation, layouts oneDNN picks) where the CPU has bf16 instructions (AVX512-BF16 / AMX);
// float64 runs kiln's own double-precision loops (conv_f64.h: oneDNN has no f64 convolution, and
// rounding through float32 would silently lose the precision asked for); float16 converts to
// float32 around it. Its gradients are two ops of their own on oneDNN's backward-data /
// backward-weights primitives; at unit stride with few channels the input gradient is itself a
// small convolution and runs kiln's direct loops too.
#include <algorithm>
#include <initializer_list>

#include "core/error.h"
#include "kernels/cpu/conv_depthwise.h"
#include "kernels/cpu/conv_direct.h"
#include "kernels/cpu/conv_f64.h"
#include "kernels/cpu/conv_onednn.h"
#include "kernels/cpu/copy.h"
#include "ops/conv_internal.h"

namespace kiln {
namespace conv {

std::string ShapesStr(const std::vector<TensorMeta>& in) {
  std::string s;
  for (const auto& m : in) {
    if (!m.present) continue;
    if (!s.empty()) s += " and ";
    s += ShapeStr(m.shape);
  }
  return s;
}

// An attribute list of `count` ints, each at least `min`; ValueError naming op and attribute.
const Shape& CheckedInts(const Attrs& attrs, size_t i, size_t count, int64_t min, const char* op,
                         const char* what) {
  const Shape& v = AttrInts(attrs, i);
  KILN_CHECK(v.size() == count, Value, op, ": ", what, " must have ", count, " values, got ",
             ShapeStr(v));
  for (int64_t x : v)
    KILN_CHECK(x >= min, Value, op, ": ", what, " must be ", min == 0 ? "non-negative" : "positive",
               ", got ", ShapeStr(v));
  return v;
}

GradVar InputGrad(GradBuilder& g, GradVar grad, int input) {
  return CastTo(g, grad, g.meta(g.input(input)).dtype);
}

}  // namespace conv

namespace {

using namespace conv;  // NOLINT: this file is the conv family

// ---- Conv2d: attrs stride(2), padding(4: top, bottom, left, right), dilation(2), groups

struct ConvGeometry {
  int64_t n, c, h, w, o, kh, kw, oh, ow, groups;
  Shape stride, pad, dilation;
};

ConvGeometry PlanConv(const OpDef& def, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta &x = in[0], &wt = in[1];
  TensorMeta bias = in.size() > 2 ? in[2] : TensorMeta{};  // a rule may emit it without a bias
  if (in.size() <= 2) bias.present = false;
  KILN_CHECK(x.shape.size() == 4, Value, def.name, ": input must be 4-D (N, C, H, W), got shape ",
             ShapeStr(x.shape));
  KILN_CHECK(wt.shape.size() == 4, Value, def.name,
             ": weight must be 4-D (C_out, C_in / groups, kH, kW), got shape ", ShapeStr(wt.shape));
  KILN_CHECK(IsFloating(x.dtype), Type, def.name,
             ": expected floating-point input and weight, got ", DTypeName(x.dtype));
  ConvGeometry g;
  g.stride = CheckedInts(attrs, 0, 2, 1, def.name, "stride");
  g.pad = CheckedInts(attrs, 1, 4, 0, def.name, "padding");
  g.dilation = CheckedInts(attrs, 2, 2, 1, def.name, "dilation");
  g.groups = AttrInt(attrs, 3);
  KILN_CHECK(g.groups >= 1, Value, def.name, ": groups must be positive, got ", g.groups);
  g.n = x.shape[0], g.c = x.shape[1], g.h = x.shape[2], g.w = x.shape[3];
  g.o = wt.shape[0], g.kh = wt.shape[2], g.kw = wt.shape[3];
  // Graph mode may leave dims unknown (-1): check what is known, infer -1 for what depends on
  // the rest; the kernel sees the real shapes and checks again.
  const bool channels_known = g.c >= 0 && g.o >= 0 && wt.shape[1] >= 0;
  KILN_CHECK(!channels_known || (g.c % g.groups == 0 && g.o % g.groups == 0), Value, def.name,
             ": input channels (", g.c, ") and output channels (", g.o,
             ") must both be divisible by groups (", g.groups, "); shapes ", ShapesStr(in));
  KILN_CHECK(!channels_known || wt.shape[1] * g.groups == g.c, Value, def.name, ": weight expects ",
             wt.shape[1] * g.groups, " input channels (", wt.shape[1], " per group x ", g.groups,
             " groups), input has ", g.c, "; shapes ", ShapesStr(in));
  KILN_CHECK(g.kh != 0 && g.kw != 0 && g.o != 0, Value, def.name,
             ": weight must have positive output channels and kernel size; shapes ", ShapesStr(in));
  if (bias.present)
    KILN_CHECK(bias.shape.size() == 1 && (bias.shape[0] == g.o || bias.shape[0] < 0 || g.o < 0),
               Value, def.name, ": bias must be 1-D of length ", g.o, "; shapes ", ShapesStr(in));
  const int64_t span_h = g.dilation[0] * (g.kh - 1) + 1, span_w = g.dilation[1] * (g.kw - 1) + 1;
  const int64_t padded_h = g.h + g.pad[0] + g.pad[1], padded_w = g.w + g.pad[2] + g.pad[3];
  const bool spatial_known = g.h >= 0 && g.w >= 0 && g.kh >= 0 && g.kw >= 0;
  KILN_CHECK(!spatial_known || (span_h <= padded_h && span_w <= padded_w), Value, def.name,
             ": kernel (", span_h, ", ", span_w,
             ") with dilation is larger than the padded input (", padded_h, ", ", padded_w,
             "); shapes ", ShapesStr(in));
  g.oh = g.h < 0 || g.kh < 0 ? -1 : (padded_h - span_h) / g.stride[0] + 1;
  g.ow = g.w < 0 || g.kw < 0 ? -1 : (padded_w - span_w) / g.stride[1] + 1;
  return g;
}

std::vector<TensorMeta> InferConv2d(const OpDef& def, const std::vector<TensorMeta>& in,
                                    const Attrs& attrs) {
  ConvGeometry g = PlanConv(def, in, attrs);
  return {TensorMeta{in[0].dtype, {g.n, g.o, g.oh, g.ow}}};
}

// A float32 contiguous operand (a no-op for the usual float32 NCHW case).
Tensor Float32Contiguous(const Tensor& t) {
  return t.defined() ? t.To(DType::Float32).Contiguous() : t;
}

// Runs fn(out32) on `out` itself when it is float32, else on a float32 scratch copied into it.
template <typename Fn>
void IntoFloat32(const Tensor& out, Fn&& fn) {
  if (out.dtype() == DType::Float32) {
    fn(out);
    return;
  }
  Tensor out32 = Tensor::Empty(out.shape(), DType::Float32);
  fn(out32);
  cpu::CopyInto(out32, out);
}

std::vector<TensorMeta> MetasOf(const std::vector<Tensor>& inputs) {
  std::vector<TensorMeta> metas;
  for (const auto& t : inputs)
    metas.push_back(t.defined() ? TensorMeta{t.dtype(), t.shape()}
                                : TensorMeta{DType::Float32, {}, false, false});
  return metas;
}

// Whether every operand and the output are float64 (then the double-precision loops run).
bool AllFloat64(const KernelContext& ctx) {
  for (const auto& t : ctx.inputs)
    if (t.defined() && t.dtype() != DType::Float64) return false;
  return ctx.outputs[0].dtype() == DType::Float64;
}

cpu::ConvShape LoopShape(const ConvGeometry& g) {
  return cpu::ConvShape{g.n,
                        g.c,
                        g.h,
                        g.w,
                        g.o,
                        g.kh,
                        g.kw,
                        g.oh,
                        g.ow,
                        g.groups,
                        {g.stride[0], g.stride[1]},
                        {g.dilation[0], g.dilation[1]},
                        {g.pad[0], g.pad[1], g.pad[2], g.pad[3]}};
}

Tensor Contiguous(const Tensor& t) { return t.defined() ? t.Contiguous() : t; }

void Conv2dKernel(KernelContext& ctx) {
  ConvGeometry g = PlanConv(ctx.def, MetasOf(ctx.inputs), ctx.attrs);
  const Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  if (g.c == 0) {  // an empty contraction: the output is the bias alone
    if (ctx.inputs[2].defined()) {
      cpu::CopyInto(ctx.inputs[2].Unsqueeze(1).Unsqueeze(2), out);  // (O, 1, 1) broadcasts
    } else {
      cpu::Fill(out, 0.0);
    }
    return;
  }
  if (AllFloat64(ctx)) {
    cpu::ConvF64(LoopShape(g), ctx.inputs[0].Contiguous(), ctx.inputs[1].Contiguous(),
                 Contiguous(ctx.inputs[2]), out);
    return;
  }
  const auto dt = cpu::OnednnConvType({ctx.inputs[0].dtype(), ctx.inputs[1].dtype(), out.dtype()});
  Tensor bias = Float32Contiguous(ctx.inputs[2]);  // a bf16 conv takes an f32 bias as well
  if (dt == dnnl::memory::data_type::bf16) {
    cpu::OnednnConv(LoopShape(g), ctx.inputs[0].Contiguous(), ctx.inputs[1].Contiguous(), bias, out,
                    dt);
    return;
  }
  Tensor x = Float32Contiguous(ctx.inputs[0]), w = Float32Contiguous(ctx.inputs[1]);
  const cpu::ConvShape shape = LoopShape(g);
  if (cpu::DepthwiseConvApplies(shape)) {
    IntoFloat32(out, [&](const Tensor& out32) {
      cpu::DepthwiseConvF32(shape, x.data<float>(), w.data<float>(),
                            bias.defined() ? bias.data<float>() : nullptr, out32.data<float>());
    });
    return;
  }
  if (cpu::DirectConvApplies(shape)) {
    IntoFloat32(out, [&](const Tensor& out32) {
      cpu::DirectConvF32(shape, x.data<float>(), w.data<float>(),
                         bias.defined() ? bias.data<float>() : nullptr, out32.data<float>());
    });
    return;
  }
  IntoFloat32(out,
              [&](const Tensor& out32) { cpu::OnednnConv(LoopShape(g), x, w, bias, out32, dt); });
}

// ---- Conv2d's gradients: conv2d_backward_input(dy, weight; input_shape, <conv2d attrs>) and
// conv2d_backward_weight(dy, input; weight_shape, <conv2d attrs>). Attribute 0 is the shape of
// the operand whose gradient the op makes; the rest are the forward conv's.

Attrs ConvAttrsOf(const Attrs& attrs) { return Attrs(attrs.begin() + 1, attrs.end()); }

Attrs WithShape(const Shape& shape, const Attrs& conv_attrs) {
  Attrs attrs{shape};
  attrs.insert(attrs.end(), conv_attrs.begin(), conv_attrs.end());
  return attrs;
}

// The forward conv's geometry: `operand` (the input for backward_input, the weight for
// backward_weight) comes from attribute 0; dy must have the forward's output shape.
ConvGeometry PlanConvBackward(const OpDef& def, const std::vector<TensorMeta>& in,
                              const Attrs& attrs, bool weight_grad) {
  const TensorMeta& dy = in[0];
  KILN_CHECK(dy.shape.size() == 4, Value, def.name,
             ": dy must be 4-D (N, C_out, H_out, W_out), got shape ", ShapeStr(dy.shape));
  // backward_input's optional third input: the forward's input, whose shape as the graph runs
  // stands for input_shape where that has dimensions of any size.
  const bool like = !weight_grad && in.size() > 2 && in[2].present;
  const Shape& shape =
      like ? in[2].shape
           : CheckedInts(attrs, 0, 4, 0, def.name, weight_grad ? "weight_shape" : "input_shape");
  TensorMeta made{dy.dtype, shape};
  std::vector<TensorMeta> forward = weight_grad
                                        ? std::vector<TensorMeta>{in[1], made, TensorMeta{}}
                                        : std::vector<TensorMeta>{made, in[1], TensorMeta{}};
  forward[2].present = false;
  KILN_CHECK(forward[1].shape.size() == 4, Value, def.name,
             ": weight must be 4-D (C_out, C_in / groups, kH, kW), got shape ",
             ShapeStr(forward[1].shape));
  ConvGeometry g = PlanConv(def, forward, ConvAttrsOf(attrs));
  const Shape want{g.n, g.o, g.oh, g.ow};
  bool match = true;
  for (size_t i = 0; i < 4; ++i)
    match = match && (dy.shape[i] == want[i] || dy.shape[i] < 0 || want[i] < 0);
  KILN_CHECK(match, Value, def.name, ": dy of shape ", ShapeStr(dy.shape),
             " does not match the convolution's output shape ", ShapeStr(want));
  return g;
}

std::vector<TensorMeta> InferConv2dBackwardInput(const OpDef& def,
                                                 const std::vector<TensorMeta>& in,
                                                 const Attrs& attrs) {
  PlanConvBackward(def, in, attrs, false);
  const bool like = in.size() > 2 && in[2].present;
  return {TensorMeta{in[0].dtype, like ? in[2].shape : AttrInts(attrs, 0)}};
}

std::vector<TensorMeta> InferConv2dBackwardWeight(const OpDef& def,
                                                  const std::vector<TensorMeta>& in,
                                                  const Attrs& attrs) {
  PlanConvBackward(def, in, attrs, true);
  return {TensorMeta{in[0].dtype, AttrInts(attrs, 0)}};
}

void Conv2dBackwardInputKernel(KernelContext& ctx) {
  ConvGeometry g = PlanConvBackward(ctx.def, MetasOf(ctx.inputs), ctx.attrs, false);
  const Tensor& dx = ctx.outputs[0];
  if (dx.numel() == 0) return;  // otherwise dy and the weight are non-empty too
  if (AllFloat64(ctx)) {
    cpu::ConvF64BackwardData(LoopShape(g), ctx.inputs[0].Contiguous(), ctx.inputs[1].Contiguous(),
                             dx);
    return;
  }
  const auto dt = cpu::OnednnConvType({ctx.inputs[0].dtype(), ctx.inputs[1].dtype(), dx.dtype()});
  if (dt == dnnl::memory::data_type::bf16) {
    cpu::OnednnConvBackwardData(LoopShape(g), ctx.inputs[0].Contiguous(),
                                ctx.inputs[1].Contiguous(), dx, dt);
    return;
  }
  Tensor dy = Float32Contiguous(ctx.inputs[0]), w = Float32Contiguous(ctx.inputs[1]);
  IntoFloat32(dx, [&](const Tensor& dx32) {
    if (cpu::DepthwiseConvApplies(LoopShape(g))) {
      cpu::DepthwiseConvBackwardDataF32(LoopShape(g), dy.data<float>(), w.data<float>(),
                                        dx32.data<float>());
      return;
    }
    if (!cpu::DirectConvBackwardDataF32(LoopShape(g), dy.data<float>(), w.data<float>(),
                                        dx32.data<float>()))
      cpu::OnednnConvBackwardData(LoopShape(g), dy, w, dx32, dt);
  });
}

void Conv2dBackwardWeightKernel(KernelContext& ctx) {
  ConvGeometry g = PlanConvBackward(ctx.def, MetasOf(ctx.inputs), ctx.attrs, true);
  const Tensor& dw = ctx.outputs[0];
  if (dw.numel() == 0) return;
  if (ctx.inputs[0].numel() == 0) {  // an empty batch contributes nothing
    cpu::Fill(dw, 0.0);
    return;
  }
  if (AllFloat64(ctx)) {
    cpu::ConvF64BackwardWeights(LoopShape(g), ctx.inputs[0].Contiguous(),
                                ctx.inputs[1].Contiguous(), dw);
    return;
  }
  const auto dt = cpu::OnednnConvType({ctx.inputs[0].dtype(), ctx.inputs[1].dtype(), dw.dtype()});
  if (dt == dnnl::memory::data_type::bf16) {
    cpu::OnednnConvBackwardWeights(LoopShape(g), ctx.inputs[0].Contiguous(),
                                   ctx.inputs[1].Contiguous(), dw, dt);
    return;
  }
  Tensor dy = Float32Contiguous(ctx.inputs[0]), x = Float32Contiguous(ctx.inputs[1]);
  IntoFloat32(dw, [&](const Tensor& dw32) {
    if (cpu::DepthwiseConvApplies(LoopShape(g)) && cpu::DepthwiseWeightGradPays(LoopShape(g))) {
      cpu::DepthwiseConvBackwardWeightsF32(LoopShape(g), dy.data<float>(), x.data<float>(),
                                           dw32.data<float>());
      return;
    }
    cpu::OnednnConvBackwardWeights(LoopShape(g), dy, x, dw32, dt);
  });
}

// ---- Gradient rules

// conv2d's dx from dy and the weight w; x (the forward's input) gives its shape as the graph
// runs where it has dimensions of any size.
GradVar ConvInputGrad(GradBuilder& g, GradVar dy, GradVar w, GradVar x, const Attrs& conv) {
  const Shape shape = g.meta(x).shape;
  std::vector<GradVar> inputs = {dy, w};
  if (!IsStaticShape(shape)) inputs.push_back(x);
  return g.Emit1(OpKind::Conv2dBackwardInput, inputs, WithShape(shape, conv));
}

// conv2d: dx and dw through the backward ops, dbias = dy summed over N, H, W.
std::vector<GradVar> Conv2dGrad(GradBuilder& g) {
  GradVar x = g.input(0), w = g.input(1), dy = g.out_grad(0);
  std::vector<GradVar> grads(3);
  if (g.wants_input_grad(0)) grads[0] = InputGrad(g, ConvInputGrad(g, dy, w, x, g.attrs()), 0);
  if (g.wants_input_grad(1))
    grads[1] = InputGrad(
        g, g.Emit1(OpKind::Conv2dBackwardWeight, {dy, x}, WithShape(g.meta(w).shape, g.attrs())),
        1);
  if (g.wants_input_grad(2))
    grads[2] = InputGrad(
        g, g.Emit1(OpKind::ReduceSum, {dy}, {Shape{0, 2, 3}, false, std::monostate{}}), 2);
  return grads;
}

// Both backward ops are bilinear in (dy, other operand), each the adjoint of conv2d in one
// argument, so their gradients are conv2d and the other backward op:
//   dx = backward_input(dy, w):  d(dy) = conv2d(ddx, w),  d(w) = backward_weight(dy, ddx)
//   dw = backward_weight(dy, x): d(dy) = conv2d(x, ddw),  d(x) = backward_input(dy, ddw)
std::vector<GradVar> Conv2dBackwardInputGrad(GradBuilder& g) {
  GradVar dy = g.input(0), w = g.input(1), ddx = g.out_grad(0);
  const Attrs conv = ConvAttrsOf(g.attrs());
  std::vector<GradVar> grads(g.num_inputs());  // the shape-giving input gets none
  if (g.wants_input_grad(0)) grads[0] = InputGrad(g, g.Emit1(OpKind::Conv2d, {ddx, w}, conv), 0);
  if (g.wants_input_grad(1))
    grads[1] = InputGrad(
        g, g.Emit1(OpKind::Conv2dBackwardWeight, {dy, ddx}, WithShape(g.meta(w).shape, conv)), 1);
  return grads;
}

std::vector<GradVar> Conv2dBackwardWeightGrad(GradBuilder& g) {
  GradVar dy = g.input(0), x = g.input(1), ddw = g.out_grad(0);
  const Attrs conv = ConvAttrsOf(g.attrs());
  std::vector<GradVar> grads(2);
  if (g.wants_input_grad(0)) grads[0] = InputGrad(g, g.Emit1(OpKind::Conv2d, {x, ddw}, conv), 0);
  if (g.wants_input_grad(1)) grads[1] = InputGrad(g, ConvInputGrad(g, dy, ddw, x, conv), 1);
  return grads;
}

// max_pool2d: dy scattered to where each maximum was (the indices output); the indices get no
// gradient.
}  // namespace

void RegisterConvOps(OpRegistry& r) {
  OpDef conv;
  conv.kind = OpKind::Conv2d;
  conv.inputs = {"input", "weight", "bias?"};
  conv.attrs = {{"stride", Shape{1, 1}},
                {"padding", Shape{0, 0, 0, 0}},
                {"dilation", Shape{1, 1}},
                {"groups", int64_t{1}}};
  conv.infer = InferConv2d;
  conv.kernel = Conv2dKernel;
  conv.promotion = Promotion::Common;
  conv.grad = Conv2dGrad;
  conv.grad_reads_factors_crosswise = true;
  conv = GradReads(std::move(conv), {0, 1}, {});

  OpDef conv_dx;
  conv_dx.kind = OpKind::Conv2dBackwardInput;
  conv_dx.inputs = {"dy", "weight", "like?"};
  conv_dx.attrs = {{"input_shape", Shape{}}};
  conv_dx.attrs.insert(conv_dx.attrs.end(), conv.attrs.begin(), conv.attrs.end());
  conv_dx.infer = InferConv2dBackwardInput;
  conv_dx.kernel = Conv2dBackwardInputKernel;
  conv_dx.promotion = Promotion::Common;
  conv_dx.grad = Conv2dBackwardInputGrad;

  OpDef conv_dw;
  conv_dw.kind = OpKind::Conv2dBackwardWeight;
  conv_dw.inputs = {"dy", "input"};
  conv_dw.attrs = {{"weight_shape", Shape{}}};
  conv_dw.attrs.insert(conv_dw.attrs.end(), conv.attrs.begin(), conv.attrs.end());
  conv_dw.infer = InferConv2dBackwardWeight;
  conv_dw.kernel = Conv2dBackwardWeightKernel;
  conv_dw.promotion = Promotion::Common;
  conv_dw.grad = Conv2dBackwardWeightGrad;

  r.Add(std::move(conv));
  r.Add(std::move(conv_dx));
  r.Add(std::move(conv_dw));
  RegisterPoolOps(r);
}

}  // namespace kiln
