// pool.cc - MaxPool2d and AvgPool2d (NCHW) on kiln's own kernels (kernels/cpu/pool.cc), with
// their gradient ops and rules.
#include "kernels/cpu/pool.h"

#include <algorithm>

#include "core/error.h"
#include "ops/conv_internal.h"

namespace kiln::conv {
namespace {

// ---- Pooling: attrs kernel_size(2), stride(2), padding(2), [dilation(2)], ceil_mode, ...

cpu::Pool2dParams PlanPool(const OpDef& def, const TensorMeta& x, const Attrs& attrs,
                           bool has_dilation) {
  KILN_CHECK(x.shape.size() == 3 || x.shape.size() == 4, Value, def.name,
             ": input must be 3-D (C, H, W) or 4-D (N, C, H, W), got shape ", ShapeStr(x.shape));
  const Shape& k = CheckedInts(attrs, 0, 2, 1, def.name, "kernel_size");
  const Shape& s = CheckedInts(attrs, 1, 2, 1, def.name, "stride");
  const Shape& p = CheckedInts(attrs, 2, 2, 0, def.name, "padding");
  Shape d = has_dilation ? CheckedInts(attrs, 3, 2, 1, def.name, "dilation") : Shape{1, 1};
  const bool ceil_mode = AttrBool(attrs, has_dilation ? 4 : 3);
  KILN_CHECK(p[0] <= k[0] / 2 && p[1] <= k[1] / 2, Value, def.name, ": padding ", ShapeStr(p),
             " must be at most half of kernel_size ", ShapeStr(k));
  const int64_t nd = x.shape.size(), h = x.shape[nd - 2], w = x.shape[nd - 1];
  cpu::Pool2dParams params{k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], 0, 0};
  const bool known = h >= 0 && w >= 0;  // Graph mode may not know them yet
  KILN_CHECK(
      !known || (h + 2 * p[0] >= d[0] * (k[0] - 1) + 1 && w + 2 * p[1] >= d[1] * (k[1] - 1) + 1),
      Value, def.name, ": kernel_size ", ShapeStr(k), " (dilation ", ShapeStr(d),
      ") is larger than the padded input of shape ", ShapeStr(x.shape), " (padding ", ShapeStr(p),
      ")");
  params.oh = h < 0 ? -1 : cpu::PoolOutputSize(h, k[0], s[0], p[0], d[0], ceil_mode);
  params.ow = w < 0 ? -1 : cpu::PoolOutputSize(w, k[1], s[1], p[1], d[1], ceil_mode);
  return params;
}

Shape PooledShape(const Shape& in, const cpu::Pool2dParams& p) {
  Shape out = in;
  out[out.size() - 2] = p.oh;
  out[out.size() - 1] = p.ow;
  return out;
}

std::vector<TensorMeta> InferMaxPool2d(const OpDef& def, const std::vector<TensorMeta>& in,
                                       const Attrs& attrs) {
  KILN_CHECK(in[0].dtype != DType::Bool, Type, def.name, ": not supported for bool tensors");
  Shape out = PooledShape(in[0].shape, PlanPool(def, in[0], attrs, true));
  return {TensorMeta{in[0].dtype, out}, TensorMeta{DType::Int64, out}};
}

void MaxPool2dKernel(KernelContext& ctx) {
  TensorMeta meta{ctx.inputs[0].dtype(), ctx.inputs[0].shape()};
  cpu::Pool2dParams p = PlanPool(ctx.def, meta, ctx.attrs, true);
  cpu::MaxPool2d(ctx.inputs[0].Contiguous(), ctx.outputs[0], ctx.outputs[1], p);
}

std::vector<TensorMeta> InferAvgPool2d(const OpDef& def, const std::vector<TensorMeta>& in,
                                       const Attrs& attrs) {
  KILN_CHECK(IsFloating(in[0].dtype), Type, def.name, ": expected a floating-point input, got ",
             DTypeName(in[0].dtype));
  KILN_CHECK(AttrIsNone(attrs, 5) || AttrInt(attrs, 5) != 0, Value, def.name,
             ": divisor_override must not be zero");
  return {TensorMeta{in[0].dtype, PooledShape(in[0].shape, PlanPool(def, in[0], attrs, false))}};
}

void AvgPool2dKernel(KernelContext& ctx) {
  TensorMeta meta{ctx.inputs[0].dtype(), ctx.inputs[0].shape()};
  cpu::Pool2dParams p = PlanPool(ctx.def, meta, ctx.attrs, false);
  p.count_include_pad = AttrBool(ctx.attrs, 4);
  p.divisor_override = AttrIsNone(ctx.attrs, 5) ? 0 : AttrInt(ctx.attrs, 5);
  cpu::AvgPool2d(ctx.inputs[0].Contiguous(), ctx.outputs[0], p);
}

// ---- Pooling gradients: max_pool2d_grad(dy, input, indices) and avg_pool2d_grad(dy, input),
// with the forward's attributes. `input` gives dx's shape; dy must have the pooled shape.

void CheckPooledGrad(const OpDef& def, const TensorMeta& dy, const Shape& pooled,
                     const char* what) {
  bool match = dy.shape.size() == pooled.size();
  for (size_t i = 0; match && i < pooled.size(); ++i)
    match = dy.shape[i] == pooled[i] || dy.shape[i] < 0 || pooled[i] < 0;
  KILN_CHECK(match, Value, def.name, ": ", what, " of shape ", ShapeStr(dy.shape),
             " does not match the pooled shape ", ShapeStr(pooled));
}

std::vector<TensorMeta> InferMaxPool2dGrad(const OpDef& def, const std::vector<TensorMeta>& in,
                                           const Attrs& attrs) {
  RequireFloating(in[0], def.name);
  Shape pooled = PooledShape(in[1].shape, PlanPool(def, in[1], attrs, true));
  CheckPooledGrad(def, in[0], pooled, "dy");
  CheckPooledGrad(def, in[2], pooled, "indices");
  KILN_CHECK(in[2].dtype == DType::Int64, Type, def.name, ": indices must be int64, got ",
             DTypeName(in[2].dtype));
  return {TensorMeta{in[0].dtype, in[1].shape}};
}

void MaxPool2dGradKernel(KernelContext& ctx) {
  KILN_CHECK(
      cpu::MaxPool2dBackward(ctx.inputs[0].Contiguous(), ctx.inputs[2].Contiguous(),
                             ctx.outputs[0]),
      Index, ctx.def.name, ": indices must lie within their input plane of ",
      ctx.inputs[1].dim(ctx.inputs[1].ndim() - 2) * ctx.inputs[1].dim(ctx.inputs[1].ndim() - 1),
      " elements");
}

std::vector<TensorMeta> InferAvgPool2dGrad(const OpDef& def, const std::vector<TensorMeta>& in,
                                           const Attrs& attrs) {
  RequireFloating(in[0], def.name);
  KILN_CHECK(AttrIsNone(attrs, 5) || AttrInt(attrs, 5) != 0, Value, def.name,
             ": divisor_override must not be zero");
  CheckPooledGrad(def, in[0], PooledShape(in[1].shape, PlanPool(def, in[1], attrs, false)), "dy");
  return {TensorMeta{in[0].dtype, in[1].shape}};
}

void AvgPool2dGradKernel(KernelContext& ctx) {
  TensorMeta meta{ctx.inputs[1].dtype(), ctx.inputs[1].shape()};
  cpu::Pool2dParams p = PlanPool(ctx.def, meta, ctx.attrs, false);
  p.count_include_pad = AttrBool(ctx.attrs, 4);
  p.divisor_override = AttrIsNone(ctx.attrs, 5) ? 0 : AttrInt(ctx.attrs, 5);
  cpu::AvgPool2dBackward(ctx.inputs[0].Contiguous(), ctx.outputs[0], p);
}

// ---- Gradient rules

std::vector<GradVar> MaxPool2dGradRule(GradBuilder& g) {
  GradVar x = g.input(0);
  return {
      InputGrad(g, g.Emit1(OpKind::MaxPool2dGrad, {g.out_grad(0), x, g.output(1)}, g.attrs()), 0)};
}

// max_pool2d_grad is linear in dy; its adjoint gathers ddx at the indices, plane by plane.
std::vector<GradVar> MaxPool2dGradGrad(GradBuilder& g) {
  std::vector<GradVar> grads(3);
  if (!g.wants_input_grad(0)) return grads;
  GradVar dy = g.input(0), indices = g.input(2), ddx = g.out_grad(0);
  const Shape in_shape = g.meta(g.input(1)).shape, dy_shape = g.meta(dy).shape;
  const int64_t plane = in_shape[in_shape.size() - 2] * in_shape[in_shape.size() - 1];
  const int64_t pooled = dy_shape[dy_shape.size() - 2] * dy_shape[dy_shape.size() - 1];
  GradVar flat_ddx = g.Emit1(OpKind::Reshape, {ddx}, {Shape{-1, plane}});
  GradVar flat_idx = g.Emit1(OpKind::Reshape, {indices}, {Shape{-1, pooled}});
  GradVar picked = g.Emit1(OpKind::Gather, {flat_ddx, flat_idx}, {int64_t{1}, int64_t{1}});
  grads[0] = InputGrad(g, g.Emit1(OpKind::Reshape, {picked}, {dy_shape}), 0);
  return grads;
}

std::vector<GradVar> AvgPool2dGradRule(GradBuilder& g) {
  return {InputGrad(g, g.Emit1(OpKind::AvgPool2dGrad, {g.out_grad(0), g.input(0)}, g.attrs()), 0)};
}

// avg_pool2d is linear, and avg_pool2d_grad its adjoint: the adjoint's adjoint is avg_pool2d.
std::vector<GradVar> AvgPool2dGradGrad(GradBuilder& g) {
  std::vector<GradVar> grads(2);
  if (g.wants_input_grad(0))
    grads[0] = InputGrad(g, g.Emit1(OpKind::AvgPool2d, {g.out_grad(0)}, g.attrs()), 0);
  return grads;
}

}  // namespace

void RegisterPoolOps(OpRegistry& r) {
  OpDef max_pool;
  max_pool.kind = OpKind::MaxPool2d;
  max_pool.inputs = {"input"};
  max_pool.attrs = {{"kernel_size", Shape{1, 1}},
                    {"stride", Shape{1, 1}},
                    {"padding", Shape{0, 0}},
                    {"dilation", Shape{1, 1}},
                    {"ceil_mode", false}};
  max_pool.infer = InferMaxPool2d;
  max_pool.kernel = MaxPool2dKernel;
  max_pool.grad = MaxPool2dGradRule;
  max_pool = GradReads(std::move(max_pool), {0}, {1});  // x and the indices

  OpDef avg_pool;
  avg_pool.kind = OpKind::AvgPool2d;
  avg_pool.inputs = {"input"};
  avg_pool.attrs = {{"kernel_size", Shape{1, 1}}, {"stride", Shape{1, 1}},
                    {"padding", Shape{0, 0}},     {"ceil_mode", false},
                    {"count_include_pad", true},  {"divisor_override", std::monostate{}}};
  avg_pool.infer = InferAvgPool2d;
  avg_pool.kernel = AvgPool2dKernel;
  avg_pool.grad = AvgPool2dGradRule;

  OpDef max_pool_grad;
  max_pool_grad.kind = OpKind::MaxPool2dGrad;
  max_pool_grad.inputs = {"dy", "input", "indices"};
  max_pool_grad.attrs = max_pool.attrs;
  max_pool_grad.infer = InferMaxPool2dGrad;
  max_pool_grad.kernel = MaxPool2dGradKernel;
  max_pool_grad.grad = MaxPool2dGradGrad;

  OpDef avg_pool_grad;
  avg_pool_grad.kind = OpKind::AvgPool2dGrad;
  avg_pool_grad.inputs = {"dy", "input"};
  avg_pool_grad.attrs = avg_pool.attrs;
  avg_pool_grad.infer = InferAvgPool2dGrad;
  avg_pool_grad.kernel = AvgPool2dGradKernel;
  avg_pool_grad.grad = AvgPool2dGradGrad;

  r.Add(std::move(max_pool));
  r.Add(std::move(avg_pool));
  r.Add(std::move(max_pool_grad));
  r.Add(std::move(avg_pool_grad));
}

}  // namespace kiln::conv
