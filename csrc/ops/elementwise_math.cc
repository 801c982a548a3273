// elementwise_math.cc - special functions (inverse trig, hyperbolic, erf, gamma), ceil/trunc,
// and the scans along one axis (cumsum, argsort) that cannot be composed from other ops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/activation_math.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/vector_libm.h"
#include "ops/axis_runs.h"
#include "ops/grad.h"
#include "ops/registry.h"
#include "ops/special_internal.h"

namespace kiln {
namespace special {

// Digamma for doubles: reflection below 1/2, the recurrence up to 6, then the asymptotic
// series (error below 1e-15 there). Poles (0, -1, -2, ...) give NaN, as in SciPy... except
// SciPy gives -inf at 0; the sign of the pole is ambiguous, so NaN is the honest answer there.
double DigammaD(double x) {
  if (std::isnan(x)) return x;
  if (x <= 0 && x == std::floor(x)) return x == 0 ? -INFINITY : NAN;
  double result = 0;
  if (x < 0.5) {
    result -= M_PI / std::tan(M_PI * x);
    x = 1 - x;
  }
  while (x < 6) {
    result -= 1 / x;
    x += 1;
  }
  const double r = 1 / (x * x);
  result += std::log(x) - 0.5 / x -
            r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240 - r / 132))));
  return result;
}

}  // namespace special

namespace {

using special::DigammaD;

// erfinv: Giles' single-precision starting point, then two Newton steps on erf (double).
double ErfinvD(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return NAN;
  if (y == 1) return INFINITY;
  if (y == -1) return -INFINITY;
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 5) {
    w -= 2.5;
    double p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                     -0.00417768164, 0.246640727, 1.50140941})
      p = c + p * w;
    x = p * y;
  } else {
    w = std::sqrt(w) - 3;
    double p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                     0.00943887047, 1.00167406, 2.83297682})
      p = c + p * w;
    x = p * y;
  }
  for (int i = 0; i < 2; ++i) x -= (std::erf(x) - y) / (M_2_SQRTPI * std::exp(-x * x));
  return x;
}

#define KILN_MATH_FN(Name, expr)   \
  struct Name {                    \
    template <typename C>          \
    C operator()(C a) const {      \
      return static_cast<C>(expr); \
    }                              \
  };
KILN_MATH_FN(TanFn, cpu::VecTan(a))
KILN_MATH_FN(AsinFn, cpu::VecAsin(a))
KILN_MATH_FN(AcosFn, cpu::VecAcos(a))
KILN_MATH_FN(AtanFn, cpu::VecAtan(a))
KILN_MATH_FN(SinhFn, cpu::VecSinh(a))
KILN_MATH_FN(CoshFn, cpu::VecCosh(a))
KILN_MATH_FN(AsinhFn, cpu::VecAsinh(a))
KILN_MATH_FN(AcoshFn, cpu::VecAcosh(a))
KILN_MATH_FN(AtanhFn, cpu::VecAtanh(a))
KILN_MATH_FN(ErfFn, cpu::VecErf(a))
KILN_MATH_FN(ErfcFn, cpu::VecErfc(a))
KILN_MATH_FN(Log1pFn, cpu::VecLog1p(a))
KILN_MATH_FN(LgammaFn, std::lgamma(a))
KILN_MATH_FN(DigammaFn, DigammaD(static_cast<double>(a)))
KILN_MATH_FN(ErfinvFn, ErfinvD(static_cast<double>(a)))
#undef KILN_MATH_FN
// expm1 through cpu::Expm1 (activation_math.h): float's vectorizes; libm's does not.
struct Expm1Fn {
  template <typename C>
  C operator()(C a) const {
    return cpu::Expm1(a);
  }
};

// ceil and trunc leave integer tensors as they are.
struct CeilFn {
  template <typename C>
  C operator()(C a) const {
    if constexpr (std::is_floating_point_v<C>) return std::ceil(a);
    return a;
  }
};
struct TruncFn {
  template <typename C>
  C operator()(C a) const {
    if constexpr (std::is_floating_point_v<C>) return std::trunc(a);
    return a;
  }
};
// Half to even (NumPy's and MindSpore's rule): nearbyint in the default rounding mode, which
// kiln never changes; it raises no inexact flag, and GCC turns it into one vroundps.
struct RoundFn {
  template <typename C>
  C operator()(C a) const {
    if constexpr (std::is_floating_point_v<C>) return std::nearbyint(a);
    return a;
  }
};

template <typename Fn, bool kFloatOnly>
void MathKernel(KernelContext& ctx) {
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

std::vector<TensorMeta> InferSameMath(const OpDef&, const std::vector<TensorMeta>& in,
                                      const Attrs&) {
  return {TensorMeta{in[0].dtype, in[0].shape}};
}

std::vector<TensorMeta> InferNoBoolMath(const OpDef& def, const std::vector<TensorMeta>& in,
                                        const Attrs& attrs) {
  KILN_CHECK(in[0].dtype != DType::Bool, Type, def.name, ": not supported for bool tensors");
  return InferSameMath(def, in, attrs);
}

// ---- Gradient rules: dy times the derivative, built from registry ops.
GradVar Dy(GradBuilder& g) { return g.out_grad(0); }
GradVar X(GradBuilder& g) { return g.input(0); }
GradVar Sq(GradBuilder& g, GradVar v) { return Mul(g, v, v); }
GradVar Rsqrt(GradBuilder& g, GradVar v) { return g.Emit1(OpKind::Rsqrt, {v}); }
GradVar One(GradBuilder& g) { return g.Scalar(1.0); }

std::vector<GradVar> TanGrad(GradBuilder& g) {  // 1 + tan^2
  return {Mul(g, Dy(g), Add(g, One(g), Sq(g, g.output(0))))};
}
std::vector<GradVar> AsinGrad(GradBuilder& g) {
  return {Mul(g, Dy(g), Rsqrt(g, Sub(g, One(g), Sq(g, X(g)))))};
}
std::vector<GradVar> AcosGrad(GradBuilder& g) { return {Neg(g, AsinGrad(g)[0])}; }
std::vector<GradVar> AtanGrad(GradBuilder& g) {
  return {Div(g, Dy(g), Add(g, One(g), Sq(g, X(g))))};
}
std::vector<GradVar> SinhGrad(GradBuilder& g) {
  return {Mul(g, Dy(g), g.Emit1(OpKind::Cosh, {X(g)}))};
}
std::vector<GradVar> CoshGrad(GradBuilder& g) {
  return {Mul(g, Dy(g), g.Emit1(OpKind::Sinh, {X(g)}))};
}
std::vector<GradVar> AsinhGrad(GradBuilder& g) {
  return {Mul(g, Dy(g), Rsqrt(g, Add(g, Sq(g, X(g)), One(g))))};
}
std::vector<GradVar> AcoshGrad(GradBuilder& g) {
  return {Mul(g, Dy(g), Rsqrt(g, Sub(g, Sq(g, X(g)), One(g))))};
}
std::vector<GradVar> AtanhGrad(GradBuilder& g) {
  return {Div(g, Dy(g), Sub(g, One(g), Sq(g, X(g))))};
}
GradVar Gauss(GradBuilder& g, GradVar v) {  // 2/sqrt(pi) exp(-v^2)
  return Mul(g, g.Scalar(M_2_SQRTPI), g.Emit1(OpKind::Exp, {Neg(g, Sq(g, v))}));
}
std::vector<GradVar> ErfGrad(GradBuilder& g) { return {Mul(g, Dy(g), Gauss(g, X(g)))}; }
std::vector<GradVar> ErfcGrad(GradBuilder& g) { return {Neg(g, ErfGrad(g)[0])}; }
std::vector<GradVar> ErfinvGrad(GradBuilder& g) {  // 1 / erf'(y)
  return {Div(g, Dy(g), Gauss(g, g.output(0)))};
}
std::vector<GradVar> Expm1Grad(GradBuilder& g) {
  return {Mul(g, Dy(g), Add(g, g.output(0), One(g)))};
}
std::vector<GradVar> Log1pGrad(GradBuilder& g) { return {Div(g, Dy(g), Add(g, X(g), One(g)))}; }
std::vector<GradVar> LgammaGrad(GradBuilder& g) {
  return {Mul(g, Dy(g), g.Emit1(OpKind::Digamma, {X(g)}))};
}

std::vector<GradVar> DigammaGrad(GradBuilder& g) {  // polygamma(1, x) (ops/special.cc)
  GradVar one = CastTo(g, g.Scalar(1.0), DType::Int64);
  return {Mul(g, Dy(g), g.Emit1(OpKind::Polygamma, {one, X(g)}))};
}

// ---- softplus(x) = log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (no
// threshold: None), as max(z, 0) + log1p(exp(-|z|)) with z = beta x, which cannot overflow. One
// op where the composition of ten took 4.4 ms over 2^20 floats in PyNative.
struct SoftplusParams {
  double beta, limit;  // limit: the threshold, or +inf for none
};

template <typename C>
C Softplus(C a, C beta, C inv_beta, C limit) {
  const C z = a * beta;
  const C smooth = ((z > C(0) ? z : C(0)) + cpu::VecLog1p(cpu::Exp(-std::fabs(z)))) * inv_beta;
  return z > limit ? a : smooth;
}

// A contiguous float32 run in chunks of three loops: GCC vectorizes a loop with a vector-library
// call only when nothing in it needs if-conversion (the selects of ExpF and of the threshold), so
// the exponential, the log1p and the selects each get their own loop.
void SoftplusRun(const float* in, float* out, int64_t n, const SoftplusParams& p) {
  constexpr int64_t kChunk = 256;
  const float beta = static_cast<float>(p.beta), inv_beta = 1.0f / beta;
  const float limit = static_cast<float>(p.limit);
  float tail[kChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t m = std::min(kChunk, n - i0);
    const float* a = in + i0;
    for (int64_t i = 0; i < m; ++i) tail[i] = cpu::ExpF(-std::fabs(a[i] * beta));
    for (int64_t i = 0; i < m; ++i) tail[i] = cpu::VecLog1p(tail[i]);
    for (int64_t i = 0; i < m; ++i) {
      const float z = a[i] * beta;
      const float smooth = ((z > 0.0f ? z : 0.0f) + tail[i]) * inv_beta;
      out[i0 + i] = z > limit ? a[i] : smooth;
    }
  }
}

void SoftplusKernel(KernelContext& ctx) {
  const Tensor &in = ctx.inputs[0], &out = ctx.outputs[0];
  SoftplusParams p{AttrFloat(ctx.attrs, 0), std::numeric_limits<double>::infinity()};
  KILN_CHECK(p.beta != 0, Value, ctx.def.name, ": beta must not be 0");
  if (!AttrIsNone(ctx.attrs, 1)) p.limit = AttrFloat(ctx.attrs, 1);
  if (in.dtype() == DType::Float32 && in.is_contiguous() && out.is_contiguous() &&
      in.shape() == out.shape())
    return ParallelFor(in.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
      SoftplusRun(in.data<float>() + begin, out.data<float>() + begin, end - begin, p);
    });
  DispatchDType(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (!std::is_floating_point_v<C>) {
      Throw(ErrorKind::Type, ctx.def.name, ": expected a floating-point tensor, got ",
            DTypeName(in.dtype()));
    } else {
      const C beta = static_cast<C>(p.beta), inv_beta = C(1) / beta;
      const C limit = static_cast<C>(p.limit);
      cpu::UnaryKernel<T, T>(in, out, [=](C a) { return Softplus(a, beta, inv_beta, limit); });
    }
  });
}

// d/dx = sigmoid(beta x), and 1 where beta x passed the threshold.
std::vector<GradVar> SoftplusGrad(GradBuilder& g) {
  const GradVar z = Mul(g, X(g), g.Scalar(AttrFloat(g.attrs(), 0)));
  GradVar slope = g.Emit1(OpKind::Sigmoid, {z});
  if (!AttrIsNone(g.attrs(), 1)) {
    const GradVar passed = g.Emit1(OpKind::Greater, {z, g.Scalar(AttrFloat(g.attrs(), 1))});
    slope = g.Emit1(OpKind::Where, {passed, One(g), slope});
  }
  return {Mul(g, Dy(g), slope)};
}

OpDef MathOp(OpKind kind, InferFn infer, KernelFn kernel, GradRuleFn grad, bool float_only) {
  OpDef def;
  def.kind = kind;
  def.inputs = {"input"};
  def.infer = infer;
  def.kernel = kernel;
  def.grad = grad;
  def.promotion = float_only ? Promotion::CommonFloat : Promotion::None;
  def.elementwise = true;
  return def;
}

// ---- Scans along one axis: [outer, n, inner] views of a contiguous copy.
std::vector<TensorMeta> InferScan(const OpDef& def, const std::vector<TensorMeta>& in,
                                  const Attrs& attrs) {
  ScanAxis(def, in[0].shape, AttrInt(attrs, 0));
  KILN_CHECK(in[0].dtype != DType::Bool, Type, def.name, ": not supported for bool tensors");
  return {TensorMeta{in[0].dtype, in[0].shape}};
}

// cumsum(input; axis, reverse): running sums in the compute type (float32 for 16-bit floats).
void CumsumKernel(KernelContext& ctx) {
  const Tensor in = ctx.inputs[0].Contiguous();
  if (in.numel() == 0) return;
  const AxisRuns r = RunsOf(in.shape(), ScanAxis(ctx.def, in.shape(), AttrInt(ctx.attrs, 0)));
  const bool reverse = AttrBool(ctx.attrs, 1);
  DispatchDType(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* x = in.data<T>();
    T* y = ctx.outputs[0].data<T>();
    ParallelFor(r.outer * r.inner, 64, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t base = (row / r.inner) * r.n * r.inner + row % r.inner;
        C acc{};
        for (int64_t k = 0; k < r.n; ++k) {
          const int64_t i = base + (reverse ? r.n - 1 - k : k) * r.inner;
          acc = static_cast<C>(acc + static_cast<C>(x[i]));
          y[i] = static_cast<T>(acc);
        }
      }
    });
  });
}

std::vector<GradVar> CumsumGrad(GradBuilder& g) {
  Attrs attrs = g.attrs();
  attrs[1] = !AttrBool(attrs, 1);
  return {g.Emit1(OpKind::Cumsum, {Dy(g)}, attrs)};
}

OpDef ScanOp(OpKind kind, InferFn infer, KernelFn kernel, GradRuleFn grad, const char* flag) {
  OpDef def;
  def.kind = kind;
  def.inputs = {"input"};
  def.attrs = {{"axis", int64_t{-1}}, {flag, false}};
  def.infer = infer;
  def.kernel = kernel;
  def.grad = grad;
  return def;
}

}  // namespace

void RegisterMathOps(OpRegistry& r) {
  struct Entry {
    OpKind kind;
    KernelFn kernel;
    GradRuleFn grad;
  };
  const Entry float_ops[] = {
      {OpKind::Tan, MathKernel<TanFn, true>, TanGrad},
      {OpKind::Asin, MathKernel<AsinFn, true>, AsinGrad},
      {OpKind::Acos, MathKernel<AcosFn, true>, AcosGrad},
      {OpKind::Atan, MathKernel<AtanFn, true>, AtanGrad},
      {OpKind::Sinh, MathKernel<SinhFn, true>, SinhGrad},
      {OpKind::Cosh, MathKernel<CoshFn, true>, CoshGrad},
      {OpKind::Asinh, MathKernel<AsinhFn, true>, AsinhGrad},
      {OpKind::Acosh, MathKernel<AcoshFn, true>, AcoshGrad},
      {OpKind::Atanh, MathKernel<AtanhFn, true>, AtanhGrad},
      {OpKind::Erf, MathKernel<ErfFn, true>, ErfGrad},
      {OpKind::Erfc, MathKernel<ErfcFn, true>, ErfcGrad},
      {OpKind::Erfinv, MathKernel<ErfinvFn, true>, ErfinvGrad},
      {OpKind::Expm1, MathKernel<Expm1Fn, true>, Expm1Grad},
      {OpKind::Log1p, MathKernel<Log1pFn, true>, Log1pGrad},
      {OpKind::Lgamma, MathKernel<LgammaFn, true>, LgammaGrad},
      {OpKind::Digamma, MathKernel<DigammaFn, true>, DigammaGrad},
  };
  for (const Entry& e : float_ops) r.Add(MathOp(e.kind, InferSameMath, e.kernel, e.grad, true));
  OpDef softplus = MathOp(OpKind::Softplus, InferSameMath, SoftplusKernel, SoftplusGrad, true);
  softplus.attrs = {{"beta", 1.0}, {"threshold", std::monostate{}}};  // the API passes 20
  r.Add(std::move(softplus));
  r.Add(MathOp(OpKind::Ceil, InferNoBoolMath, MathKernel<CeilFn, false>, NotDifferentiable, false));
  r.Add(
      MathOp(OpKind::Trunc, InferNoBoolMath, MathKernel<TruncFn, false>, NotDifferentiable, false));
  r.Add(
      MathOp(OpKind::Round, InferNoBoolMath, MathKernel<RoundFn, false>, NotDifferentiable, false));
  r.Add(ScanOp(OpKind::Cumsum, InferScan, CumsumKernel, CumsumGrad, "reverse"));
}

}  // namespace kiln
