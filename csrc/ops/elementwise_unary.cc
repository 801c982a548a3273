// elementwise_unary.cc - one-input math and activations, cast, clamp and where.
#include <cmath>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "kernels/cpu/activation_math.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/normalization.h"
#include "kernels/cpu/vector_libm.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln {
namespace {

template <typename C>
constexpr bool kIsFloat = std::is_floating_point_v<C>;

struct NegFn {
  template <typename C>
  C operator()(C a) const {
    if constexpr (std::is_same_v<C, bool>)
      return a;
    else
      return static_cast<C>(-a);
  }
};
struct AbsFn {
  template <typename C>
  C operator()(C a) const {
    if constexpr (std::is_unsigned_v<C> || std::is_same_v<C, bool>)
      return a;
    else
      return a < 0 ? static_cast<C>(-a) : a;
  }
};
// exp in float (float32 and the 16-bit floats) uses cpu::ExpF: branch-free, so the loop
// vectorizes (about 10x std::exp), within 2 ulp; results below FLT_MIN flush to zero. double's
// goes through glibc's vector exp (vector_libm.h).
template <typename C>
C FastExp(C a) {
  if constexpr (std::is_same_v<C, float>)
    return cpu::ExpF(a);
  else
    return cpu::VecExp(a);
}
struct ExpFn {
  template <typename C>
  C operator()(C a) const {
    return FastExp(a);
  }
};
struct LogFn {
  template <typename C>
  C operator()(C a) const {
    return cpu::VecLog(a);  // vector_libm.h: the loop vectorizes
  }
};
struct SqrtFn {
  template <typename C>
  C operator()(C a) const {
    return std::sqrt(a);
  }
};
struct RsqrtFn {
  template <typename C>
  C operator()(C a) const {
    return C(1) / std::sqrt(a);
  }
};
struct SinFn {
  template <typename C>
  C operator()(C a) const {
    return cpu::VecSin(a);  // vector_libm.h: the loop vectorizes
  }
};
struct CosFn {
  template <typename C>
  C operator()(C a) const {
    return cpu::VecCos(a);  // vector_libm.h: the loop vectorizes
  }
};
// tanh through cpu::Tanh (activation_math.h): float's vectorizes and stays within 4 ulp;
// libm's tanhf, a call per element, took 21 ms for 2^20 floats.
struct TanhFn {
  template <typename C>
  C operator()(C a) const {
    return cpu::Tanh(a);
  }
};
struct SigmoidFn {
  template <typename C>
  C operator()(C a) const {
    return C(1) / (C(1) + FastExp(-a));
  }
};
struct SiluFn {
  template <typename C>
  C operator()(C a) const {
    return a / (C(1) + FastExp(-a));
  }
};
struct ReluFn {
  template <typename C>
  C operator()(C a) const {
    return a < C(0) ? C(0) : a;  // NaN passes through, as in NumPy and PyTorch
  }
};
// GELU's pieces at x: 1 + erf(x / sqrt 2) and exp(-x^2 / 2), sharing the exponential: the
// vectorizable float version (kernels/cpu/normalization.h), libm for double.
inline void GeluParts(float x, float* one_plus_erf, float* gauss) {
  const float z = x * static_cast<float>(M_SQRT1_2);
  *gauss = cpu::ExpNonPositiveF(-z * z);
  *one_plus_erf = cpu::OnePlusErfF(z, *gauss);
}
inline void GeluParts(double x, double* one_plus_erf, double* gauss) {
  *one_plus_erf = 1.0 + cpu::VecErf(x * M_SQRT1_2);
  *gauss = cpu::VecExp(-0.5 * x * x);
}

struct GeluErfFn {
  template <typename C>
  C operator()(C a) const {
    C one_plus_erf, gauss;
    GeluParts(a, &one_plus_erf, &gauss);
    return C(0.5) * a * one_plus_erf;
  }
};
struct GeluTanhFn {
  template <typename C>
  C operator()(C a) const {
    const C k = C(0.7978845608028654);  // sqrt(2 / pi)
    return C(0.5) * a * (C(1) + cpu::Tanh(k * (a + C(0.044715) * a * a * a)));
  }
};
struct LogicalNotFn {
  template <typename C>
  bool operator()(C a) const {
    return a == C(0);
  }
};
// ~x: bitwise for integers, logical for bools (inference admits nothing else).
struct BitwiseNotFn {
  template <typename C>
  C operator()(C a) const {
    if constexpr (std::is_same_v<C, bool>) {
      return !a;
    } else if constexpr (std::is_integral_v<C>) {
      return static_cast<C>(~a);
    } else {
      return a;
    }
  }
};
struct SignFn {
  template <typename C>
  C operator()(C a) const {
    if constexpr (kIsFloat<C>) {
      if (a != a) return a;
    }
    return static_cast<C>((C(0) < a) - (a < C(0)));
  }
};
struct SquareFn {
  template <typename C>
  C operator()(C a) const {
    return static_cast<C>(a * a);
  }
};
struct FloorFn {
  template <typename C>
  C operator()(C a) const {
    if constexpr (kIsFloat<C>)
      return std::floor(a);
    else
      return a;
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

// Exact GELU on contiguous float32/bfloat16 tensors of one shape: the loops of kernels/cpu/gelu.h.
bool GeluFastPath(const std::vector<Tensor>& in, const Tensor& out) {
  const DType d = out.dtype();
  if (d != DType::Float32 && d != DType::BFloat16) return false;
  if (!out.is_contiguous()) return false;
  for (const Tensor& t : in)
    if (t.dtype() != d || !t.is_contiguous() || t.shape() != out.shape()) return false;
  return true;
}

void GeluKernel(KernelContext& ctx) {
  const Tensor& out = ctx.outputs[0];
  if (AttrString(ctx.attrs, 0) == "none" && GeluFastPath({ctx.inputs[0]}, out)) {
    if (out.dtype() == DType::Float32)
      return cpu::GeluErf(ctx.inputs[0].data<float>(), out.data<float>(), out.numel());
    return cpu::GeluErf(ctx.inputs[0].data<BFloat16>(), out.data<BFloat16>(), out.numel());
  }
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

std::vector<TensorMeta> InferBitwiseNot(const OpDef& def, const std::vector<TensorMeta>& in,
                                        const Attrs& attrs) {
  KILN_CHECK(IsIntegral(in[0].dtype) || in[0].dtype == DType::Bool, Type, def.name,
             ": expected an integer or bool tensor, got ", DTypeName(in[0].dtype),
             " (use -x to negate)");
  return InferSame(def, in, attrs);
}

std::vector<TensorMeta> InferGelu(const OpDef& def, const std::vector<TensorMeta>& in,
                                  const Attrs& attrs) {
  const std::string& mode = AttrString(attrs, 0);
  KILN_CHECK(mode == "none" || mode == "tanh", Value, def.name,
             ": approximate must be 'none' or 'tanh', got '", mode, "'");
  return InferSame(def, in, attrs);
}

// ---- gelu_grad(dy, x): dy * d gelu(x)/dx, a kernel because erf has no op of its own.
struct GeluErfGradFn {
  template <typename C>
  C operator()(C dy, C x) const {
    C one_plus_erf, gauss;
    GeluParts(x, &one_plus_erf, &gauss);
    const C cdf = C(0.5) * one_plus_erf;
    const C pdf = gauss * C(0.3989422804014327);  // 1/sqrt(2 pi)
    return dy * (cdf + x * pdf);
  }
};
struct GeluTanhGradFn {
  template <typename C>
  C operator()(C dy, C x) const {
    const C k = C(0.7978845608028654), c = C(0.044715);
    const C inner = k * (x + c * x * x * x);
    const C t = cpu::Tanh(inner);
    const C dinner = k * (C(1) + C(3) * c * x * x);
    return dy * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * dinner);
  }
};

void GeluGradKernel(KernelContext& ctx) {
  bool tanh = AttrString(ctx.attrs, 0) == "tanh";
  const Tensor &dy = ctx.inputs[0], &x = ctx.inputs[1], &out = ctx.outputs[0];
  if (!tanh && GeluFastPath({dy, x}, out)) {
    if (out.dtype() == DType::Float32)
      return cpu::GeluErfGrad(dy.data<float>(), x.data<float>(), out.data<float>(), out.numel());
    return cpu::GeluErfGrad(dy.data<BFloat16>(), x.data<BFloat16>(), out.data<BFloat16>(),
                            out.numel());
  }
  DispatchDType(ctx.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      if (tanh) {
        cpu::BinaryKernel<T, T>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0], GeluTanhGradFn{});
      } else {
        cpu::BinaryKernel<T, T>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0], GeluErfGradFn{});
      }
    } else {
      Throw(ErrorKind::Type, "gelu_grad: expected floating-point tensors");
    }
  });
}

// ---- relu_grad(dy, x): dy where x > 0, else 0 (as dy * (x > 0): a NaN or inf in dy still
// makes a NaN where x <= 0, as the multiply it replaces did). One pass over dy and x, where
// greater, cast and mul made three (the relu masks of a training step's backward).
struct ReluGradFn {
  template <typename C>
  C operator()(C dy, C x) const {
    return dy * (x > C(0) ? C(1) : C(0));
  }
};

void ReluGradKernel(KernelContext& ctx) {
  DispatchDType(ctx.inputs[1].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      Throw(ErrorKind::Type, "relu_grad: not supported for bool tensors");
    } else {
      cpu::BinaryKernel<T, T>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0], ReluGradFn{});
    }
  });
}

// gelu_grad(dy, x) and relu_grad(dy, x): x's dtype, the broadcast shape of dy and x.
std::vector<TensorMeta> InferGradOfX(const OpDef& def, const std::vector<TensorMeta>& in,
                                     const Attrs&) {
  return {TensorMeta{in[1].dtype, BroadcastShapes(in[0].shape, in[1].shape, def.name)}};
}

// stop_gradient and identity: the same values, as a view (only their gradients differ).
void AliasKernel(KernelContext& ctx) {
  const Tensor& in = ctx.inputs[0];
  ctx.outputs = {in.AsStrided(in.shape(), in.strides(), in.offset())};
}

// ---- Gradient rules (dy is the output gradient, x the input, y the output).

GradVar Dy(GradBuilder& g) { return g.out_grad(0); }

std::vector<GradVar> IdentityGrad(GradBuilder& g) { return {Dy(g)}; }
std::vector<GradVar> NegGrad(GradBuilder& g) { return {Neg(g, Dy(g))}; }
std::vector<GradVar> AbsGrad(GradBuilder& g) {
  return {Mul(g, Dy(g), g.Emit1(OpKind::Sign, {g.input(0)}))};
}
std::vector<GradVar> ExpGrad(GradBuilder& g) { return {Mul(g, Dy(g), g.output(0))}; }
std::vector<GradVar> LogGrad(GradBuilder& g) { return {Div(g, Dy(g), g.input(0))}; }
std::vector<GradVar> SqrtGrad(GradBuilder& g) {
  return {Div(g, Mul(g, Dy(g), g.Scalar(0.5)), g.output(0))};
}
// d x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
std::vector<GradVar> RsqrtGrad(GradBuilder& g) {
  GradVar y = g.output(0);
  return {Mul(g, Dy(g), Mul(g, Mul(g, y, Mul(g, y, y)), g.Scalar(-0.5)))};
}
std::vector<GradVar> SinGrad(GradBuilder& g) {
  return {Mul(g, Dy(g), g.Emit1(OpKind::Cos, {g.input(0)}))};
}
std::vector<GradVar> CosGrad(GradBuilder& g) {
  return {Neg(g, Mul(g, Dy(g), g.Emit1(OpKind::Sin, {g.input(0)})))};
}
std::vector<GradVar> TanhGrad(GradBuilder& g) {
  GradVar y = g.output(0);
  return {Mul(g, Dy(g), Sub(g, g.Scalar(1.0), Mul(g, y, y)))};
}
std::vector<GradVar> SigmoidGrad(GradBuilder& g) {
  GradVar y = g.output(0);
  return {Mul(g, Dy(g), Mul(g, y, Sub(g, g.Scalar(1.0), y)))};
}
// silu = x s(x): d = s (1 + x (1 - s))
std::vector<GradVar> SiluGrad(GradBuilder& g) {
  GradVar x = g.input(0), s = g.Emit1(OpKind::Sigmoid, {x});
  GradVar inner = Add(g, g.Scalar(1.0), Mul(g, x, Sub(g, g.Scalar(1.0), s)));
  return {Mul(g, Dy(g), Mul(g, s, inner))};
}
// Through the output: y > 0 exactly where x > 0 (a NaN x gives a NaN y, and neither is > 0), and
// y is kept anyway as the next layer's input, so x need not live until the backward and a
// compiled graph can fold the relu into the product before it (fuse_epilogue).
std::vector<GradVar> ReluGrad(GradBuilder& g) {
  return {g.Emit1(OpKind::ReluGrad, {Dy(g), g.output(0)})};
}
// relu_grad is linear in dy (its gradient there is relu_grad itself) and flat in x almost
// everywhere (relu's second derivative is 0).
std::vector<GradVar> ReluGradGrad(GradBuilder& g) {
  std::vector<GradVar> grads(2);
  if (g.wants_input_grad(0))
    grads[0] = ToInput(g, g.Emit1(OpKind::ReluGrad, {g.out_grad(0), g.input(1)}), 0);
  return grads;
}
std::vector<GradVar> GeluGradRule(GradBuilder& g) {
  return {g.Emit1(OpKind::GeluGrad, {Dy(g), g.input(0)}, {g.attrs()[0]})};
}

// gelu_grad's own rule (gelu's second derivative). dy * gelu'(x) is linear in dy, so dy's
// gradient is gelu_grad itself; x's is gdx * dy * gelu''(x), with
//   exact: gelu''(x) = phi(x) * (2 - x^2), phi the standard normal density;
//   tanh:  gelu''(x) = (1 - t^2) * (u' - x t u'^2 + x u'' / 2), t = tanh(u), u = k (x + c x^3).
GradVar GeluSecondDerivative(GradBuilder& g, GradVar x, bool tanh) {
  auto s = [&](double v) { return g.Scalar(v); };
  GradVar x2 = Mul(g, x, x);
  if (!tanh) {
    GradVar phi = Mul(g, s(0.3989422804014327), g.Emit1(OpKind::Exp, {Mul(g, s(-0.5), x2)}));
    return Mul(g, phi, Sub(g, s(2.0), x2));
  }
  const double k = 0.7978845608028654, c = 0.044715;
  GradVar t = g.Emit1(OpKind::Tanh, {Mul(g, s(k), Add(g, x, Mul(g, s(c), Mul(g, x2, x))))});
  GradVar du = Mul(g, s(k), Add(g, s(1.0), Mul(g, s(3 * c), x2)));
  GradVar half_x_ddu = Mul(g, s(3 * k * c), x2);  // x u'' / 2, u'' = 6 k c x
  GradVar inner = Add(g, Sub(g, du, Mul(g, Mul(g, x, t), Mul(g, du, du))), half_x_ddu);
  return Mul(g, Sub(g, s(1.0), Mul(g, t, t)), inner);
}

std::vector<GradVar> GeluGradGrad(GradBuilder& g) {
  std::vector<GradVar> grads(2);
  GradVar dy = g.input(0), x = g.input(1), gdx = g.out_grad(0);
  if (g.wants_input_grad(0))
    grads[0] = ToInput(g, g.Emit1(OpKind::GeluGrad, {gdx, x}, {g.attrs()[0]}), 0);
  if (g.wants_input_grad(1)) {
    GradVar second = GeluSecondDerivative(g, x, AttrString(g.attrs(), 0) == "tanh");
    grads[1] = ToInput(g, Mul(g, Mul(g, gdx, dy), second), 1);
  }
  return grads;
}
std::vector<GradVar> SquareGrad(GradBuilder& g) {
  return {Mul(g, Dy(g), Mul(g, g.input(0), g.Scalar(2.0)))};
}
std::vector<GradVar> CastGrad(GradBuilder& g) {
  return {CastTo(g, Dy(g), g.meta(g.input(0)).dtype)};
}
// clamp passes the gradient where the input was inside [min, max].
std::vector<GradVar> ClampGrad(GradBuilder& g) {
  GradVar x = g.input(0), y = g.output(0);
  GradVar same =
      CastTo(g, g.Emit1(OpKind::Equal, {CastTo(g, x, g.meta(y).dtype), y}), g.meta(y).dtype);
  return {ToInput(g, Mul(g, Dy(g), same), 0)};
}
std::vector<GradVar> WhereGrad(GradBuilder& g) {
  GradVar cond = g.input(0), dy = Dy(g), zero = g.Scalar(0.0);
  GradVar dx, dz;
  if (g.wants_input_grad(1)) dx = ToInput(g, g.Emit1(OpKind::Where, {cond, dy, zero}), 1);
  if (g.wants_input_grad(2)) dz = ToInput(g, g.Emit1(OpKind::Where, {cond, zero, dy}), 2);
  return {GradVar{}, dx, dz};
}

// What a rule reads, for the tape (OpDef::grad_reads_*): x, y, or only their shapes.
OpDef InputRead(OpDef def) { return GradReads(std::move(def), {0}, {}); }
OpDef OutputRead(OpDef def) { return GradReads(std::move(def), {}, {0}); }
OpDef NothingRead(OpDef def) { return GradReads(std::move(def), {}, {}); }

OpDef Unary(OpKind kind, InferFn infer, KernelFn kernel, GradRuleFn grad,
            Promotion promotion = Promotion::None) {
  OpDef def;
  def.kind = kind;
  def.inputs = {"input"};
  def.infer = infer;
  def.kernel = kernel;
  def.grad = grad;
  def.promotion = promotion;
  def.elementwise = true;
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

// Clamp bound `i` in T's compute type, and whether it limits anything. An integer bound outside
// T's range limits nothing on its open side (a min below T's lowest value, a max above its
// highest; NumPy's clip allows these); on the other side every result would be a value T cannot
// hold, an OverflowError as in NumPy.
template <typename T>
std::pair<compute_t<T>, bool> ClampBound(const KernelContext& ctx, size_t i) {
  using C = compute_t<T>;
  if (AttrIsNone(ctx.attrs, i)) return {C{}, false};
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    const int64_t v = AttrInt(ctx.attrs, i);
    if (IntFitsDType(v, DTypeOf<T>::value)) return {static_cast<C>(v), true};
    const bool is_min = i == 0, below = v < 0;
    KILN_CHECK(is_min == below, Overflow, ctx.def.name, ": Python integer ", v,
               " out of bounds for ", DTypeName(DTypeOf<T>::value));
    return {C{}, false};
  } else {
    return {static_cast<C>(AttrFloat(ctx.attrs, i)), true};
  }
}

void ClampKernel(KernelContext& ctx) {
  Tensor in = ctx.inputs[0].To(ctx.outputs[0].dtype());
  DispatchDType(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const auto lo = ClampBound<T>(ctx, 0), hi = ClampBound<T>(ctx, 1);
    const C lo_c = lo.first, hi_c = hi.first;
    const bool has_lo = lo.second, has_hi = hi.second;
    cpu::UnaryKernel<T, T>(in, ctx.outputs[0], [=](C a) {
      if (has_lo && a < lo_c) a = lo_c;  // NumPy order: min first, then max wins
      if (has_hi && a > hi_c) a = hi_c;
      return a;
    });
  });
}

std::vector<TensorMeta> InferWhere(const OpDef& def, const std::vector<TensorMeta>& in,
                                   const Attrs&) {
  Shape shape =
      BroadcastShapes(BroadcastShapes(in[0].shape, in[1].shape, def.name), in[2].shape, def.name);
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
  r.Add(NothingRead(Unary(OpKind::Neg, InferNoBool, UnaryOpKernel<NegFn, false>, NegGrad)));
  r.Add(InputRead(Unary(OpKind::Abs, InferSame, UnaryOpKernel<AbsFn, false>, AbsGrad)));
  const auto kFloat = Promotion::CommonFloat;
  r.Add(OutputRead(Unary(OpKind::Exp, InferSame, UnaryOpKernel<ExpFn, true>, ExpGrad, kFloat)));
  r.Add(InputRead(Unary(OpKind::Log, InferSame, UnaryOpKernel<LogFn, true>, LogGrad, kFloat)));
  r.Add(OutputRead(Unary(OpKind::Sqrt, InferSame, UnaryOpKernel<SqrtFn, true>, SqrtGrad, kFloat)));
  r.Add(
      OutputRead(Unary(OpKind::Rsqrt, InferSame, UnaryOpKernel<RsqrtFn, true>, RsqrtGrad, kFloat)));
  r.Add(InputRead(Unary(OpKind::Sin, InferSame, UnaryOpKernel<SinFn, true>, SinGrad, kFloat)));
  r.Add(InputRead(Unary(OpKind::Cos, InferSame, UnaryOpKernel<CosFn, true>, CosGrad, kFloat)));
  r.Add(OutputRead(Unary(OpKind::Tanh, InferSame, UnaryOpKernel<TanhFn, true>, TanhGrad, kFloat)));
  r.Add(OutputRead(
      Unary(OpKind::Sigmoid, InferSame, UnaryOpKernel<SigmoidFn, true>, SigmoidGrad, kFloat)));
  r.Add(InputRead(Unary(OpKind::Silu, InferSame, UnaryOpKernel<SiluFn, true>, SiluGrad, kFloat)));
  r.Add(OutputRead(Unary(OpKind::Relu, InferNoBool, UnaryOpKernel<ReluFn, false>, ReluGrad)));
  OpDef gelu = Unary(OpKind::Gelu, InferGelu, GeluKernel, GeluGradRule, kFloat);
  gelu.attrs = {{"approximate", std::string("none")}};
  r.Add(InputRead(std::move(gelu)));
  r.Add(Unary(OpKind::LogicalNot, InferBool, LogicalNotKernel, NotDifferentiable));
  r.Add(Unary(OpKind::BitwiseNot, InferBitwiseNot, UnaryOpKernel<BitwiseNotFn, false>,
              NotDifferentiable));
  r.Add(Unary(OpKind::Sign, InferNoBool, UnaryOpKernel<SignFn, false>, NotDifferentiable));
  r.Add(InputRead(Unary(OpKind::Square, InferNoBool, UnaryOpKernel<SquareFn, false>, SquareGrad)));
  r.Add(Unary(OpKind::Floor, InferNoBool, UnaryOpKernel<FloorFn, false>, NotDifferentiable));

  OpDef cast = Unary(OpKind::Cast, InferCast, CastKernel, CastGrad);
  cast.attrs = {{"dtype", DType::Float32}};
  r.Add(NothingRead(std::move(cast)));
  OpDef clamp = Unary(OpKind::Clamp, InferClamp, ClampKernel, ClampGrad);
  clamp.attrs = {{"min", std::monostate{}}, {"max", std::monostate{}}};
  r.Add(std::move(clamp));
  OpDef where;
  where.kind = OpKind::Where;
  where.inputs = {"condition", "x", "y"};
  where.infer = InferWhere;
  where.kernel = WhereKernel;
  where.promotion = Promotion::Common;
  where.promoted_inputs = {1, 2};
  where.grad = WhereGrad;
  r.Add(InputRead(std::move(where)));

  for (auto [kind, grad] : {std::pair{OpKind::StopGradient, &NotDifferentiable},
                            std::pair{OpKind::Identity, &IdentityGrad}}) {
    OpDef alias = Unary(kind, InferSame, AliasKernel, grad);
    alias.allocates_outputs = true;
    alias.is_view = true;
    r.Add(NothingRead(std::move(alias)));
  }
  OpDef gelu_grad;
  gelu_grad.kind = OpKind::GeluGrad;
  gelu_grad.inputs = {"dy", "x"};
  gelu_grad.attrs = {{"approximate", std::string("none")}};
  gelu_grad.infer = InferGradOfX;
  gelu_grad.kernel = GeluGradKernel;
  gelu_grad.grad = GeluGradGrad;
  gelu_grad.promotion = Promotion::CommonFloat;
  r.Add(std::move(gelu_grad));
  OpDef relu_grad;
  relu_grad.kind = OpKind::ReluGrad;
  relu_grad.inputs = {"dy", "x"};
  relu_grad.infer = InferGradOfX;
  relu_grad.kernel = ReluGradKernel;
  relu_grad.grad = ReluGradGrad;
  relu_grad.promotion = Promotion::Common;
  relu_grad.elementwise = true;
  r.Add(std::move(relu_grad));
}

}  // namespace kiln
