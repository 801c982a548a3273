// elementwise_unary.cc - one-input math and activations, cast, clamp and where.
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/elementwise.h"
#include "ops/registry.h"

namespace kiln {
namespace {

template <typename C>
constexpr bool kIsFloat = std::is_floating_point_v<C>;

struct NegFn {
  template <typename C>
  C operator()(C a) const {
    if constexpr (std::is_same_v<C, bool>) return a;
    else return static_cast<C>(-a);
  }
};
struct AbsFn {
  template <typename C>
  C operator()(C a) const {
    if constexpr (std::is_unsigned_v<C> || std::is_same_v<C, bool>) return a;
    else return a < 0 ? static_cast<C>(-a) : a;
  }
};
struct ExpFn { template <typename C> C operator()(C a) const { return std::exp(a); } };
struct LogFn { template <typename C> C operator()(C a) const { return std::log(a); } };
struct SqrtFn { template <typename C> C operator()(C a) const { return std::sqrt(a); } };
struct RsqrtFn { template <typename C> C operator()(C a) const { return C(1) / std::sqrt(a); } };
struct SinFn { template <typename C> C operator()(C a) const { return std::sin(a); } };
struct CosFn { template <typename C> C operator()(C a) const { return std::cos(a); } };
struct TanhFn { template <typename C> C operator()(C a) const { return std::tanh(a); } };
struct SigmoidFn { template <typename C> C operator()(C a) const { return C(1) / (C(1) + std::exp(-a)); } };
struct SiluFn { template <typename C> C operator()(C a) const { return a / (C(1) + std::exp(-a)); } };
struct ReluFn { template <typename C> C operator()(C a) const { return a > C(0) ? a : C(0); } };
struct GeluErfFn {
  template <typename C>
  C operator()(C a) const { return C(0.5) * a * (C(1) + std::erf(a * C(M_SQRT1_2))); }
};
struct GeluTanhFn {
  template <typename C>
  C operator()(C a) const {
    const C k = C(0.7978845608028654);  // sqrt(2 / pi)
    return C(0.5) * a * (C(1) + std::tanh(k * (a + C(0.044715) * a * a * a)));
  }
};
struct LogicalNotFn { template <typename C> bool operator()(C a) const { return a == C(0); } };
struct SignFn {
  template <typename C>
  C operator()(C a) const {
    if constexpr (kIsFloat<C>) {
      if (a != a) return a;
    }
    return static_cast<C>((C(0) < a) - (a < C(0)));
  }
};
struct SquareFn { template <typename C> C operator()(C a) const { return static_cast<C>(a * a); } };
struct FloorFn {
  template <typename C>
  C operator()(C a) const {
    if constexpr (kIsFloat<C>) return std::floor(a);
    else return a;
  }
};

template <typename Fn, bool kFloatOnly>
void UnaryOpKernel(KernelContext& ctx) {
  const Tensor &in = ctx.inputs[0], &out = ctx.outputs[0];
  DispatchDType(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kFloatOnly && !std::is_floating_point_v<compute_t<T>>) {
      Throw(ErrorKind::Type, ctx.def.name, ": expected a floating-point tensor, got ",
            DTypeName(in.dtype()));
    } else {
      cpu::UnaryKernel<T, T>(in, out, Fn{});
    }
  });
}

void LogicalNotKernel(KernelContext& ctx) {
  DispatchDType(ctx.inputs[0].dtype(), [&](auto tag) {
    cpu::UnaryKernel<decltype(tag), bool>(ctx.inputs[0], ctx.outputs[0], LogicalNotFn{});
  });
}

void GeluKernel(KernelContext& ctx) {
  if (AttrString(ctx.attrs, 0) == "tanh") {
    UnaryOpKernel<GeluTanhFn, true>(ctx);
  } else {
    UnaryOpKernel<GeluErfFn, true>(ctx);
  }
}

std::vector<TensorMeta> InferSame(const OpDef&, const std::vector<TensorMeta>& in, const Attrs&) {
  return {TensorMeta{in[0].dtype, in[0].shape}};
}

std::vector<TensorMeta> InferNoBool(const OpDef& def, const std::vector<TensorMeta>& in,
                                    const Attrs& attrs) {
  KILN_CHECK(in[0].dtype != DType::Bool, Type, def.name,
             ": not supported for bool tensors; use logical_not (~) for negation of bools");
  return InferSame(def, in, attrs);
}

std::vector<TensorMeta> InferBool(const OpDef&, const std::vector<TensorMeta>& in, const Attrs&) {
  return {TensorMeta{DType::Bool, in[0].shape}};
}

std::vector<TensorMeta> InferGelu(const OpDef& def, const std::vector<TensorMeta>& in,
                                  const Attrs& attrs) {
  const std::string& mode = AttrString(attrs, 0);
  KILN_CHECK(mode == "none" || mode == "tanh", Value, def.name,
             ": approximate must be 'none' or 'tanh', got '", mode, "'");
  return InferSame(def, in, attrs);
}

OpDef Unary(OpKind kind, InferFn infer, KernelFn kernel, Promotion promotion = Promotion::None) {
  OpDef def;
  def.kind = kind;
  def.inputs = {"input"};
  def.infer = infer;
  def.kernel = kernel;
  def.promotion = promotion;
  return def;
}

// ---- cast, clamp, where

std::vector<TensorMeta> InferCast(const OpDef&, const std::vector<TensorMeta>& in,
                                  const Attrs& attrs) {
  return {TensorMeta{AttrDType(attrs, 0), in[0].shape}};
}

void CastKernel(KernelContext& ctx) { cpu::CopyInto(ctx.inputs[0], ctx.outputs[0]); }

// clamp's bounds are Python scalars: they promote the result like weak scalars do.
std::vector<TensorMeta> InferClamp(const OpDef& def, const std::vector<TensorMeta>& in,
                                   const Attrs& attrs) {
  DType dtype = in[0].dtype;
  for (size_t i = 0; i < 2; ++i) {
    if (AttrIsNone(attrs, i)) continue;
    bool is_float = std::holds_alternative<double>(attrs[i]);
    dtype = PromoteWithScalar(dtype, is_float ? DType::Float32 : DType::Int64);
  }
  KILN_CHECK(dtype != DType::Bool, Type, def.name, ": not supported for bool tensors");
  return {TensorMeta{dtype, in[0].shape}};
}

void ClampKernel(KernelContext& ctx) {
  Tensor in = ctx.inputs[0].To(ctx.outputs[0].dtype());
  bool has_lo = !AttrIsNone(ctx.attrs, 0), has_hi = !AttrIsNone(ctx.attrs, 1);
  double lo = has_lo ? AttrFloat(ctx.attrs, 0) : 0, hi = has_hi ? AttrFloat(ctx.attrs, 1) : 0;
  DispatchDType(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const C lo_c = static_cast<C>(lo), hi_c = static_cast<C>(hi);
    cpu::UnaryKernel<T, T>(in, ctx.outputs[0], [=](C a) {
      if (has_lo && a < lo_c) a = lo_c;  // NumPy order: min first, then max wins
      if (has_hi && a > hi_c) a = hi_c;
      return a;
    });
  });
}

std::vector<TensorMeta> InferWhere(const OpDef& def, const std::vector<TensorMeta>& in,
                                   const Attrs&) {
  Shape shape = BroadcastShapes(BroadcastShapes(in[0].shape, in[1].shape, def.name), in[2].shape,
                                def.name);
  return {TensorMeta{in[1].dtype, shape}};
}

void WhereKernel(KernelContext& ctx) {
  Tensor cond = ctx.inputs[0].To(DType::Bool);
  DispatchDType(ctx.inputs[1].dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    cpu::TernaryKernel<bool, T, T, T>(cond, ctx.inputs[1], ctx.inputs[2], ctx.outputs[0],
                                      [](bool c, C x, C y) { return c ? x : y; });
  });
}

}  // namespace

void RegisterUnaryOps(OpRegistry& r) {
  r.Add(Unary(OpKind::Neg, InferNoBool, UnaryOpKernel<NegFn, false>));
  r.Add(Unary(OpKind::Abs, InferSame, UnaryOpKernel<AbsFn, false>));
  const auto kFloat = Promotion::CommonFloat;
  r.Add(Unary(OpKind::Exp, InferSame, UnaryOpKernel<ExpFn, true>, kFloat));
  r.Add(Unary(OpKind::Log, InferSame, UnaryOpKernel<LogFn, true>, kFloat));
  r.Add(Unary(OpKind::Sqrt, InferSame, UnaryOpKernel<SqrtFn, true>, kFloat));
  r.Add(Unary(OpKind::Rsqrt, InferSame, UnaryOpKernel<RsqrtFn, true>, kFloat));
  r.Add(Unary(OpKind::Sin, InferSame, UnaryOpKernel<SinFn, true>, kFloat));
  r.Add(Unary(OpKind::Cos, InferSame, UnaryOpKernel<CosFn, true>, kFloat));
  r.Add(Unary(OpKind::Tanh, InferSame, UnaryOpKernel<TanhFn, true>, kFloat));
  r.Add(Unary(OpKind::Sigmoid, InferSame, UnaryOpKernel<SigmoidFn, true>, kFloat));
  r.Add(Unary(OpKind::Silu, InferSame, UnaryOpKernel<SiluFn, true>, kFloat));
  r.Add(Unary(OpKind::Relu, InferNoBool, UnaryOpKernel<ReluFn, false>));
  OpDef gelu = Unary(OpKind::Gelu, InferGelu, GeluKernel, kFloat);
  gelu.attrs = {{"approximate", std::string("none")}};
  r.Add(std::move(gelu));
  r.Add(Unary(OpKind::LogicalNot, InferBool, LogicalNotKernel));
  r.Add(Unary(OpKind::Sign, InferNoBool, UnaryOpKernel<SignFn, false>));
  r.Add(Unary(OpKind::Square, InferNoBool, UnaryOpKernel<SquareFn, false>));
  r.Add(Unary(OpKind::Floor, InferNoBool, UnaryOpKernel<FloorFn, false>));

  OpDef cast = Unary(OpKind::Cast, InferCast, CastKernel);
  cast.attrs = {{"dtype", DType::Float32}};
  r.Add(std::move(cast));
  OpDef clamp = Unary(OpKind::Clamp, InferClamp, ClampKernel);
  clamp.attrs = {{"min", std::monostate{}}, {"max", std::monostate{}}};
  r.Add(std::move(clamp));
  OpDef where;
  where.kind = OpKind::Where;
  where.inputs = {"condition", "x", "y"};
  where.infer = InferWhere;
  where.kernel = WhereKernel;
  where.promotion = Promotion::Common;
  where.promoted_inputs = {1, 2};
  r.Add(std::move(where));
}

}  // namespace kiln
