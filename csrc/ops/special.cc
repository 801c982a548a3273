// special.cc - Bessel functions (i0..y1 and the scaled i0e/i1e/k0e/k1e), polygamma, the Hurwitz
// zeta function and the regularized incomplete gamma functions, computed in double.
//
// Bessel values come from libstdc++'s C++17 special functions (std::cyl_bessel_i/j/k,
// std::cyl_neumann) with the parity and domain MindSpore 2.10 gives: i0/j0 even, i1/j1 odd,
// k and y at x <= 0 are +inf and -inf. The scaled forms switch to the asymptotic series for
// large |x|, where the unscaled value overflows or underflows. Zeta and the incomplete gamma
// functions follow Cephes (zeta.c, igam.c).
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/elementwise.h"
#include "ops/grad.h"
#include "ops/registry.h"
#include "ops/special_internal.h"

namespace kiln {
namespace special {
namespace {

constexpr double kEps = 1.11022302462515654042e-16;  // half a double ulp at 1 (Cephes' MACHEP)
constexpr double kMaxLog = 7.09782712893383996843e2;
constexpr double kAsymptotic = 500;  // |x| from which the scaled Bessel forms use the series

// e^{-x} I_nu(x) (sign = -1) or e^{x} K_nu(x) sqrt(2x/pi)... for x >= kAsymptotic: the
// Hankel series sum_k c_k / x^k with c_k = prod_{j<=k} (4 nu^2 - (2j-1)^2) / (j 8), alternating
// for I.
double HankelSeries(double nu, double x, double sign) {
  double term = 1, sum = 1;
  for (int k = 1; k < 8; ++k) {
    term *= sign * (4 * nu * nu - (2 * k - 1) * (2 * k - 1)) / (k * 8 * x);
    sum += term;
  }
  return sum;
}

double ScaledI(double nu, double x) {  // e^{-x} I_nu(x), x >= 0
  if (std::isinf(x)) return 0;
  if (x < kAsymptotic) return std::exp(-x) * std::cyl_bessel_i(nu, x);
  return HankelSeries(nu, x, -1) / std::sqrt(2 * M_PI * x);
}

double ScaledK(double nu, double x) {  // e^{x} K_nu(x), x > 0
  if (std::isinf(x)) return 0;
  if (x < kAsymptotic) return std::exp(x) * std::cyl_bessel_k(nu, x);
  return HankelSeries(nu, x, 1) * std::sqrt(M_PI / (2 * x));
}

double Odd(double x, double magnitude) { return x < 0 ? -magnitude : magnitude; }

double I0(double x) { return std::isnan(x) ? x : std::cyl_bessel_i(0.0, std::fabs(x)); }
double I0e(double x) { return std::isnan(x) ? x : ScaledI(0, std::fabs(x)); }
double I1(double x) { return std::isnan(x) ? x : Odd(x, std::cyl_bessel_i(1.0, std::fabs(x))); }
double I1e(double x) { return std::isnan(x) ? x : Odd(x, ScaledI(1, std::fabs(x))); }
double J(double nu, double x) {
  if (std::isinf(x)) return 0;
  return std::cyl_bessel_j(nu, std::fabs(x));
}
double J0(double x) { return std::isnan(x) ? x : J(0, x); }
double J1(double x) { return std::isnan(x) ? x : Odd(x, J(1, x)); }
double Y(double nu, double x) {
  if (std::isnan(x)) return x;
  if (x <= 0) return -INFINITY;
  return std::isinf(x) ? 0 : std::cyl_neumann(nu, x);
}
double K(double nu, double x, bool scaled) {
  if (std::isnan(x)) return x;
  if (x <= 0) return INFINITY;
  if (scaled) return ScaledK(nu, x);
  return std::isinf(x) ? 0 : std::cyl_bessel_k(nu, x);
}

}  // namespace

// Hurwitz zeta sum_k (k + q)^-x: Euler-Maclaurin summation (Cephes zeta.c).
double HurwitzZeta(double x, double q) {
  static const double kA[] = {12.0,
                              -720.0,
                              30240.0,
                              -1209600.0,
                              47900160.0,
                              -1.8924375803183791606e9,
                              7.47242496e10,
                              -2.950130727918164224e12,
                              1.1646782814350067249e14,
                              -4.5979787224074726105e15,
                              1.8152105401943546773e17,
                              -7.1661652561756670113e18};
  if (std::isnan(x) || std::isnan(q)) return NAN;
  if (x == 1) return INFINITY;
  if (x < 1) return NAN;
  if (q <= 0) {
    if (q == std::floor(q)) return INFINITY;  // a pole
    if (x != std::floor(x)) return NAN;       // q^-x is not real
  }
  if (q > 1e8) return (1 / (x - 1) + 1 / (2 * q)) * std::pow(q, 1 - x);
  // Below, the direct sum runs until q + k > 9: a very negative q would take ~|q| terms (and
  // lose every digit to cancellation), so it is refused as not computable here.
  if (q < -1e6) return NAN;
  double s = std::pow(q, -x), a = q, b = 0;
  int i = 0;
  while (i < 9 || a <= 9) {
    ++i, a += 1;
    b = std::pow(a, -x);
    s += b;
    if (std::fabs(b / s) < kEps) return s;
  }
  const double w = a;
  s += b * w / (x - 1) - 0.5 * b;
  double fac = 1, k = 0;
  for (double coef : kA) {
    fac *= x + k;
    b /= w;
    const double t = fac * b / coef;
    s += t;
    if (std::fabs(t / s) < kEps) break;
    k += 1, fac *= x + k;
    b /= w, k += 1;
  }
  return s;
}

// psi^(n)(x): digamma for n = 0, else (-1)^(n+1) n! zeta(n + 1, x).
double Polygamma(int64_t n, double x) {
  if (n < 0 || std::isnan(x)) return NAN;
  if (n == 0) return DigammaD(x);
  const double sign = n % 2 == 1 ? 1 : -1;
  return sign * std::exp(std::lgamma(n + 1.0)) * HurwitzZeta(n + 1.0, x);
}

double IgammaC(double a, double x);

// P(a, x), the regularized lower incomplete gamma function (Cephes igam: the power series).
double Igamma(double a, double x) {
  if (std::isnan(a) || std::isnan(x) || a <= 0 || x < 0) return NAN;
  if (x == 0) return 0;
  if (std::isinf(x)) return 1;
  if (x > 1 && x > a) return 1 - IgammaC(a, x);
  const double ax = a * std::log(x) - x - std::lgamma(a);
  if (ax < -kMaxLog) return 0;
  double r = a, c = 1, sum = 1;
  do {
    r += 1, c *= x / r, sum += c;
  } while (c / sum > kEps);
  return sum * std::exp(ax) / a;
}

// Q(a, x) = 1 - P(a, x) (Cephes igamc: the continued fraction).
double IgammaC(double a, double x) {
  constexpr double kBig = 4.503599627370496e15, kBigInv = 2.22044604925031308085e-16;
  if (std::isnan(a) || std::isnan(x) || a <= 0 || x < 0) return NAN;
  if (x == 0) return 1;
  if (std::isinf(x)) return 0;
  if (x < 1 || x < a) return 1 - Igamma(a, x);
  const double ax = a * std::log(x) - x - std::lgamma(a);
  if (ax < -kMaxLog) return 0;
  double y = 1 - a, z = x + y + 1, c = 0, pkm2 = 1, qkm2 = x, pkm1 = x + 1, qkm1 = z * x;
  double ans = pkm1 / qkm1, t;
  do {
    c += 1, y += 1, z += 2;
    const double yc = y * c, pk = pkm1 * z - pkm2 * yc, qk = qkm1 * z - qkm2 * yc;
    t = 1;
    if (qk != 0) {
      const double ratio = pk / qk;
      t = std::fabs((ans - ratio) / ratio);
      ans = ratio;
    }
    pkm2 = pkm1, pkm1 = pk, qkm2 = qkm1, qkm1 = qk;
    if (std::fabs(pk) > kBig) pkm2 *= kBigInv, pkm1 *= kBigInv, qkm2 *= kBigInv, qkm1 *= kBigInv;
  } while (t > kEps);
  return ans * std::exp(ax);
}

// dP(a, x)/da from the series P = sum_k t_k, t_k = e^{-x} x^{a+k} / Gamma(a+k+1):
// dP/da = sum_k t_k (log x - psi(a+k+1)). Terms are summed in log space (t_0 underflows for
// large x while later terms do not) until they stop mattering past the peak near k = x.
double IgammaGradA(double a, double x) {
  if (std::isnan(a) || std::isnan(x) || a <= 0 || x < 0) return NAN;
  if (x == 0 || std::isinf(x)) return 0;
  const double lx = std::log(x);
  double log_t = -x + a * lx - std::lgamma(a + 1), psi = DigammaD(a + 1), sum = 0;
  for (int64_t k = 0; k < 10000000; ++k) {
    const double t = std::exp(log_t), term = t * (lx - psi);
    sum += term;
    if (k > x && std::fabs(term) <= kEps * std::fabs(sum) && t < kEps) break;
    log_t += lx - std::log(a + k + 1);
    psi += 1 / (a + k + 1);
  }
  return sum;
}

namespace {

using UnaryFn = double (*)(double);

template <UnaryFn F>
struct Fn1 {
  template <typename C>
  C operator()(C a) const {
    return static_cast<C>(F(static_cast<double>(a)));
  }
};
double K0(double x) { return K(0, x, false); }
double K0e(double x) { return K(0, x, true); }
double K1(double x) { return K(1, x, false); }
double K1e(double x) { return K(1, x, true); }
double Y0(double x) { return Y(0, x); }
double Y1(double x) { return Y(1, x); }

void RequireFloatMeta(const OpDef& def, const TensorMeta& m, const char* name) {
  KILN_CHECK(IsFloating(m.dtype), Type, def.name, ": '", name,
             "' must be a floating-point tensor (float16, bfloat16, float32 or float64), got ",
             DTypeName(m.dtype));
}

std::vector<TensorMeta> InferUnary(const OpDef& def, const std::vector<TensorMeta>& in,
                                   const Attrs&) {
  RequireFloatMeta(def, in[0], "input");
  return {TensorMeta{in[0].dtype, in[0].shape}};
}

template <typename Fn>
void UnarySpecialKernel(KernelContext& ctx) {
  DispatchDType(ctx.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>)
      cpu::UnaryKernel<T, T>(ctx.inputs[0], ctx.outputs[0], Fn{});
  });
}

// Two float operands of one dtype (MindSpore refuses mixed dtypes here), broadcast.
std::vector<TensorMeta> InferBinary(const OpDef& def, const std::vector<TensorMeta>& in,
                                    const Attrs&) {
  RequireFloatMeta(def, in[0], def.inputs[0]);
  RequireFloatMeta(def, in[1], def.inputs[1]);
  KILN_CHECK(in[0].dtype == in[1].dtype, Type, def.name, ": '", def.inputs[0], "' and '",
             def.inputs[1], "' must have the same dtype, got ", DTypeName(in[0].dtype), " and ",
             DTypeName(in[1].dtype));
  return {TensorMeta{in[0].dtype, BroadcastShapes(in[0].shape, in[1].shape, def.name)}};
}

template <double (*F)(double, double)>
void BinarySpecialKernel(KernelContext& ctx) {
  DispatchDType(ctx.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (std::is_floating_point_v<C>)
      cpu::BinaryKernel<T, T>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0], [](C a, C b) {
        return static_cast<C>(F(static_cast<double>(a), static_cast<double>(b)));
      });
  });
}

// polygamma(n, input): n a 0-d integer tensor (MindSpore's rule), input float.
std::vector<TensorMeta> InferPolygamma(const OpDef& def, const std::vector<TensorMeta>& in,
                                       const Attrs&) {
  KILN_CHECK(IsIntegral(in[0].dtype), Type, def.name, ": 'n' must be an integer tensor, got ",
             DTypeName(in[0].dtype));
  KILN_CHECK(in[0].shape.empty(), Value, def.name, ": 'n' must be a 0-d tensor, got shape ",
             ShapeStr(in[0].shape));
  RequireFloatMeta(def, in[1], "input");
  return {TensorMeta{in[1].dtype, in[1].shape}};
}

void PolygammaKernel(KernelContext& ctx) {
  const int64_t n = *ctx.inputs[0].To(DType::Int64).Contiguous().data<int64_t>();
  DispatchDType(ctx.inputs[1].dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (std::is_floating_point_v<C>)
      cpu::UnaryKernel<T, T>(ctx.inputs[1], ctx.outputs[0], [n](C x) {
        return static_cast<C>(Polygamma(n, static_cast<double>(x)));
      });
  });
}

// ---- Gradient rules
GradVar Dy(GradBuilder& g) { return g.out_grad(0); }
GradVar X(GradBuilder& g) { return g.input(0); }
GradVar Call(GradBuilder& g, OpKind kind, GradVar x) { return g.Emit1(kind, {x}); }
std::vector<GradVar> Times(GradBuilder& g, GradVar derivative) {
  return {Mul(g, Dy(g), derivative)};
}
// f'(x) = base - f(x)/x, with the limit `at_zero` at x = 0 (I1, J1: 1/2).
GradVar MinusOverX(GradBuilder& g, GradVar base, GradVar f, double at_zero) {
  GradVar x = X(g);
  GradVar d = Sub(g, base, Div(g, f, x));
  return g.Emit1(OpKind::Where, {g.Emit1(OpKind::Equal, {x, g.Scalar(0)}), g.Scalar(at_zero), d});
}
GradVar SignX(GradBuilder& g) { return Call(g, OpKind::Sign, X(g)); }

std::vector<GradVar> I0Grad(GradBuilder& g) { return Times(g, Call(g, OpKind::BesselI1, X(g))); }
std::vector<GradVar> I0eGrad(GradBuilder& g) {  // i1e - sign(x) i0e
  return Times(g, Sub(g, Call(g, OpKind::BesselI1e, X(g)), Mul(g, SignX(g), g.output(0))));
}
std::vector<GradVar> I1Grad(GradBuilder& g) {  // i0 - i1/x
  return Times(g, MinusOverX(g, Call(g, OpKind::BesselI0, X(g)), g.output(0), 0.5));
}
std::vector<GradVar> I1eGrad(GradBuilder& g) {  // i0e - i1e/x - sign(x) i1e
  GradVar base = Sub(g, Call(g, OpKind::BesselI0e, X(g)), Mul(g, SignX(g), g.output(0)));
  return Times(g, MinusOverX(g, base, g.output(0), 0.5));
}
std::vector<GradVar> J0Grad(GradBuilder& g) {
  return Times(g, Neg(g, Call(g, OpKind::BesselJ1, X(g))));
}
std::vector<GradVar> J1Grad(GradBuilder& g) {  // j0 - j1/x
  return Times(g, MinusOverX(g, Call(g, OpKind::BesselJ0, X(g)), g.output(0), 0.5));
}
std::vector<GradVar> Y0Grad(GradBuilder& g) {
  return Times(g, Neg(g, Call(g, OpKind::BesselY1, X(g))));
}
std::vector<GradVar> Y1Grad(GradBuilder& g) {  // y0 - y1/x
  return Times(g, Sub(g, Call(g, OpKind::BesselY0, X(g)), Div(g, g.output(0), X(g))));
}
std::vector<GradVar> K0Grad(GradBuilder& g) {
  return Times(g, Neg(g, Call(g, OpKind::BesselK1, X(g))));
}
std::vector<GradVar> K0eGrad(GradBuilder& g) {  // k0e - k1e
  return Times(g, Sub(g, g.output(0), Call(g, OpKind::BesselK1e, X(g))));
}
std::vector<GradVar> K1Grad(GradBuilder& g) {  // -k0 - k1/x
  GradVar k0 = Call(g, OpKind::BesselK0, X(g));
  return Times(g, Neg(g, Add(g, k0, Div(g, g.output(0), X(g)))));
}
std::vector<GradVar> K1eGrad(GradBuilder& g) {  // k1e - k0e - k1e/x
  GradVar k0e = Call(g, OpKind::BesselK0e, X(g));
  return Times(g, Sub(g, Sub(g, g.output(0), k0e), Div(g, g.output(0), X(g))));
}

// d/dx polygamma(n, x) = polygamma(n + 1, x); n is an integer: no gradient.
std::vector<GradVar> PolygammaGrad(GradBuilder& g) {
  GradVar next = Add(g, g.input(0), CastTo(g, g.Scalar(1.0), g.meta(g.input(0)).dtype));
  return {GradVar{}, Mul(g, Dy(g), g.Emit1(OpKind::Polygamma, {next, g.input(1)}))};
}

// d/dq zeta(x, q) = -x zeta(x + 1, q). The derivative in x has no closed form here; MindSpore
// gives zeros for it, and so does kiln (no gradient).
std::vector<GradVar> ZetaGrad(GradBuilder& g) {
  GradVar x = g.input(0), q = g.input(1);
  if (!g.wants_input_grad(1)) return {GradVar{}, GradVar{}};
  GradVar z = g.Emit1(OpKind::Zeta, {Add(g, x, g.Scalar(1.0)), q});
  return {GradVar{}, ToInput(g, Neg(g, Mul(g, Dy(g), Mul(g, x, z))), 1)};
}

// dP/dx = x^{a-1} e^{-x} / Gamma(a), dP/da from igamma_grad_a; Q = 1 - P negates both.
std::vector<GradVar> IgammaGradSigned(GradBuilder& g, double sign) {
  GradVar a = g.input(0), x = g.input(1), dy = Dy(g);
  std::vector<GradVar> grads(2);
  if (g.wants_input_grad(0)) {
    GradVar da = g.Emit1(OpKind::IgammaGradA, {a, x});
    grads[0] = ToInput(g, Mul(g, Mul(g, dy, da), g.Scalar(sign)), 0);
  }
  if (g.wants_input_grad(1)) {
    GradVar log_x = g.Emit1(OpKind::Log, {x});
    GradVar expo =
        Sub(g, Sub(g, Mul(g, Sub(g, a, g.Scalar(1.0)), log_x), x), g.Emit1(OpKind::Lgamma, {a}));
    GradVar dx = g.Emit1(OpKind::Exp, {expo});
    grads[1] = ToInput(g, Mul(g, Mul(g, dy, dx), g.Scalar(sign)), 1);
  }
  return grads;
}
std::vector<GradVar> IgammaGrad(GradBuilder& g) { return IgammaGradSigned(g, 1.0); }
std::vector<GradVar> IgammacGrad(GradBuilder& g) { return IgammaGradSigned(g, -1.0); }

OpDef SpecialOp(OpKind kind, std::vector<const char*> inputs, InferFn infer, KernelFn kernel,
                GradRuleFn grad) {
  OpDef def;
  def.kind = kind;
  def.inputs = std::move(inputs);
  def.infer = infer;
  def.kernel = kernel;
  def.grad = grad;
  def.elementwise = true;
  return def;
}

}  // namespace
}  // namespace special

void RegisterSpecialOps(OpRegistry& r) {
  using namespace special;  // NOLINT: this file is the special-function family
  struct Entry {
    OpKind kind;
    KernelFn kernel;
    GradRuleFn grad;
  };
  const Entry bessel[] = {
      {OpKind::BesselI0, UnarySpecialKernel<Fn1<I0>>, I0Grad},
      {OpKind::BesselI0e, UnarySpecialKernel<Fn1<I0e>>, I0eGrad},
      {OpKind::BesselI1, UnarySpecialKernel<Fn1<I1>>, I1Grad},
      {OpKind::BesselI1e, UnarySpecialKernel<Fn1<I1e>>, I1eGrad},
      {OpKind::BesselJ0, UnarySpecialKernel<Fn1<J0>>, J0Grad},
      {OpKind::BesselJ1, UnarySpecialKernel<Fn1<J1>>, J1Grad},
      {OpKind::BesselK0, UnarySpecialKernel<Fn1<K0>>, K0Grad},
      {OpKind::BesselK0e, UnarySpecialKernel<Fn1<K0e>>, K0eGrad},
      {OpKind::BesselK1, UnarySpecialKernel<Fn1<K1>>, K1Grad},
      {OpKind::BesselK1e, UnarySpecialKernel<Fn1<K1e>>, K1eGrad},
      {OpKind::BesselY0, UnarySpecialKernel<Fn1<Y0>>, Y0Grad},
      {OpKind::BesselY1, UnarySpecialKernel<Fn1<Y1>>, Y1Grad},
  };
  for (const Entry& e : bessel) r.Add(SpecialOp(e.kind, {"input"}, InferUnary, e.kernel, e.grad));
  r.Add(
      SpecialOp(OpKind::Polygamma, {"n", "input"}, InferPolygamma, PolygammaKernel, PolygammaGrad));
  r.Add(SpecialOp(OpKind::Zeta, {"input", "other"}, InferBinary, BinarySpecialKernel<HurwitzZeta>,
                  ZetaGrad));
  r.Add(SpecialOp(OpKind::Igamma, {"input", "other"}, InferBinary, BinarySpecialKernel<Igamma>,
                  IgammaGrad));
  r.Add(SpecialOp(OpKind::Igammac, {"input", "other"}, InferBinary, BinarySpecialKernel<IgammaC>,
                  IgammacGrad));
  // The a-derivative of igamma; second derivatives are not provided.
  r.Add(SpecialOp(OpKind::IgammaGradA, {"input", "other"}, InferBinary,
                  BinarySpecialKernel<IgammaGradA>, NotDifferentiable));
}

}  // namespace kiln
