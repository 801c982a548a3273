// conv.cc - Conv2d on oneDNN (cached primitives), MaxPool2d and AvgPool2d on kiln's own kernels.
//
// All three take NCHW. Conv2d runs float32 through oneDNN with plain layouts (nchw / oihw), so no
// reorder runs per call; other float dtypes convert to float32 around it.
#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/pool.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln {
namespace {

constexpr int64_t kConvTag = 2;  // first integer of a conv cache key

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

// ---- Conv2d: attrs stride(2), padding(4: top, bottom, left, right), dilation(2), groups

struct ConvGeometry {
  int64_t n, c, h, w, o, kh, kw, oh, ow, groups;
  Shape stride, pad, dilation;
};

ConvGeometry PlanConv(const OpDef& def, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta &x = in[0], &wt = in[1], &bias = in[2];
  KILN_CHECK(x.shape.size() == 4, Value, def.name, ": input must be 4-D (N, C, H, W), got shape ",
             ShapeStr(x.shape));
  KILN_CHECK(wt.shape.size() == 4, Value, def.name,
             ": weight must be 4-D (C_out, C_in / groups, kH, kW), got shape ", ShapeStr(wt.shape));
  KILN_CHECK(IsFloating(x.dtype), Type, def.name, ": expected floating-point input and weight, got ",
             DTypeName(x.dtype));
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
  KILN_CHECK(!channels_known || (g.c % g.groups == 0 && g.o % g.groups == 0), Value, def.name, ": input channels (", g.c,
             ") and output channels (", g.o, ") must both be divisible by groups (", g.groups,
             "); shapes ", ShapesStr(in));
  KILN_CHECK(!channels_known || wt.shape[1] * g.groups == g.c, Value, def.name, ": weight expects ",
             wt.shape[1] * g.groups, " input channels (", wt.shape[1], " per group x ", g.groups,
             " groups), input has ", g.c, "; shapes ", ShapesStr(in));
  KILN_CHECK(g.kh != 0 && g.kw != 0 && g.o != 0, Value, def.name,
             ": weight must have positive output channels and kernel size; shapes ", ShapesStr(in));
  if (bias.present)
    KILN_CHECK(bias.shape.size() == 1 && (bias.shape[0] == g.o || bias.shape[0] < 0 || g.o < 0),
               Value, def.name,
               ": bias must be 1-D of length ", g.o, "; shapes ", ShapesStr(in));
  const int64_t span_h = g.dilation[0] * (g.kh - 1) + 1, span_w = g.dilation[1] * (g.kw - 1) + 1;
  const int64_t padded_h = g.h + g.pad[0] + g.pad[1], padded_w = g.w + g.pad[2] + g.pad[3];
  const bool spatial_known = g.h >= 0 && g.w >= 0 && g.kh >= 0 && g.kw >= 0;
  KILN_CHECK(!spatial_known || (span_h <= padded_h && span_w <= padded_w), Value, def.name,
             ": kernel (", span_h, ", ", span_w, ") with dilation is larger than the padded input (",
             padded_h, ", ", padded_w, "); shapes ", ShapesStr(in));
  g.oh = g.h < 0 || g.kh < 0 ? -1 : (padded_h - span_h) / g.stride[0] + 1;
  g.ow = g.w < 0 || g.kw < 0 ? -1 : (padded_w - span_w) / g.stride[1] + 1;
  return g;
}

std::vector<TensorMeta> InferConv2d(const OpDef& def, const std::vector<TensorMeta>& in,
                                    const Attrs& attrs) {
  ConvGeometry g = PlanConv(def, in, attrs);
  return {TensorMeta{in[0].dtype, {g.n, g.o, g.oh, g.ow}}};
}

struct ConvEntry {
  dnnl::convolution_forward prim;
  dnnl::memory::desc src, weights, bias, dst;
};

// out = conv(x, w) + bias, all float32 and contiguous.
void OnednnConv(const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias,
                const Tensor& out) {
  using dnnl::memory;
  const bool has_bias = bias.defined();
  cpu::PrimitiveKey key{kConvTag, g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.groups, has_bias,
                        g.stride[0], g.stride[1], g.pad[0], g.pad[1], g.pad[2], g.pad[3],
                        g.dilation[0], g.dilation[1]};
  auto entry = cpu::CachedPrimitive<ConvEntry>(key, [&] {
    const auto f32 = memory::data_type::f32;
    memory::desc src({g.n, g.c, g.h, g.w}, f32, memory::format_tag::nchw);
    memory::desc dst({g.n, g.o, g.oh, g.ow}, f32, memory::format_tag::nchw);
    memory::desc weights =
        g.groups == 1
            ? memory::desc({g.o, g.c, g.kh, g.kw}, f32, memory::format_tag::oihw)
            : memory::desc({g.groups, g.o / g.groups, g.c / g.groups, g.kh, g.kw}, f32,
                           memory::format_tag::goihw);
    memory::desc bias_md = has_bias ? memory::desc({g.o}, f32, memory::format_tag::a) : memory::desc();
    // oneDNN counts dilation from 0 (no gap) where PyTorch and MindSpore count from 1.
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, weights,
        bias_md, dst, {g.stride[0], g.stride[1]}, {g.dilation[0] - 1, g.dilation[1] - 1},
        {g.pad[0], g.pad[2]}, {g.pad[1], g.pad[3]});
    dnnl::convolution_forward::primitive_desc pd(desc, cpu::OnednnEngine());
    return ConvEntry{dnnl::convolution_forward(pd), src, weights, bias_md, dst};
  });
  auto& engine = cpu::OnednnEngine();
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(entry->src, engine, x.raw_data())},
      {DNNL_ARG_WEIGHTS, memory(entry->weights, engine, w.raw_data())},
      {DNNL_ARG_DST, memory(entry->dst, engine, out.raw_data())}};
  if (has_bias) args.emplace(DNNL_ARG_BIAS, memory(entry->bias, engine, bias.raw_data()));
  entry->prim.execute(cpu::OnednnStream(), args);
  cpu::OnednnStream().wait();
}

void Conv2dKernel(KernelContext& ctx) {
  std::vector<TensorMeta> metas;
  for (const auto& t : ctx.inputs)
    metas.push_back(t.defined() ? TensorMeta{t.dtype(), t.shape()} : TensorMeta{DType::Float32, {}, false, false});
  ConvGeometry g = PlanConv(ctx.def, metas, ctx.attrs);
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
  // float32 contiguous operands (a no-op for the usual float32 NCHW case).
  auto prepare = [](const Tensor& t) {
    return t.defined() ? t.To(DType::Float32).Contiguous() : t;
  };
  Tensor x = prepare(ctx.inputs[0]), w = prepare(ctx.inputs[1]), bias = prepare(ctx.inputs[2]);
  if (out.dtype() == DType::Float32) {
    OnednnConv(g, x, w, bias, out);
    return;
  }
  Tensor out32 = Tensor::Empty(out.shape(), DType::Float32);
  OnednnConv(g, x, w, bias, out32);
  cpu::CopyInto(out32, out);
}

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
  KILN_CHECK(!known || (h + 2 * p[0] >= d[0] * (k[0] - 1) + 1 && w + 2 * p[1] >= d[1] * (k[1] - 1) + 1),
             Value,
             def.name, ": kernel_size ", ShapeStr(k), " (dilation ", ShapeStr(d),
             ") is larger than the padded input of shape ", ShapeStr(x.shape), " (padding ",
             ShapeStr(p), ")");
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

// Conv and pooling backward need their own kernels (oneDNN backward-data/-weights, pooling
// scatter), which are not written yet; failing loudly beats a silently missing gradient.
std::vector<GradVar> NotYetDifferentiable(GradBuilder& g) {
  (void)g;
  Throw(ErrorKind::NotImplemented,
        "gradients of conv2d, max_pool2d and avg_pool2d are not implemented yet");
}

}  // namespace

void RegisterConvOps(OpRegistry& r) {
  OpDef conv;
  conv.kind = OpKind::Conv2d;
  conv.inputs = {"input", "weight", "bias?"};
  conv.attrs = {{"stride", Shape{1, 1}}, {"padding", Shape{0, 0, 0, 0}}, {"dilation", Shape{1, 1}},
                {"groups", int64_t{1}}};
  conv.infer = InferConv2d;
  conv.kernel = Conv2dKernel;
  conv.promotion = Promotion::Common;
  conv.grad = NotYetDifferentiable;
  r.Add(std::move(conv));

  OpDef max_pool;
  max_pool.kind = OpKind::MaxPool2d;
  max_pool.inputs = {"input"};
  max_pool.attrs = {{"kernel_size", Shape{1, 1}}, {"stride", Shape{1, 1}}, {"padding", Shape{0, 0}},
                    {"dilation", Shape{1, 1}}, {"ceil_mode", false}};
  max_pool.infer = InferMaxPool2d;
  max_pool.kernel = MaxPool2dKernel;
  max_pool.grad = NotYetDifferentiable;
  r.Add(std::move(max_pool));

  OpDef avg_pool;
  avg_pool.kind = OpKind::AvgPool2d;
  avg_pool.inputs = {"input"};
  avg_pool.attrs = {{"kernel_size", Shape{1, 1}}, {"stride", Shape{1, 1}}, {"padding", Shape{0, 0}},
                    {"ceil_mode", false}, {"count_include_pad", true},
                    {"divisor_override", std::monostate{}}};
  avg_pool.infer = InferAvgPool2d;
  avg_pool.kernel = AvgPool2dKernel;
  avg_pool.grad = NotYetDifferentiable;
  r.Add(std::move(avg_pool));
}

}  // namespace kiln
