// elementwise_binary.cc - arithmetic, comparison, logical and bitwise ops on two broadcast tensors.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/vector_libm.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln {
namespace {

template <typename C>
constexpr bool kIsFloat = std::is_floating_point_v<C>;

// ---- Functors on compute types. Integer division by zero gives 0 (as NumPy) instead of a trap.

struct AddFn {
  template <typename C>
  auto operator()(C a, C b) const {
    return a + b;
  }
};
struct SubFn {
  template <typename C>
  auto operator()(C a, C b) const {
    return a - b;
  }
};
struct MulFn {
  template <typename C>
  auto operator()(C a, C b) const {
    return a * b;
  }
};
struct DivFn {
  template <typename C>
  auto operator()(C a, C b) const {
    return a / b;
  }
};

// r is not zero and its sign is not b's. For float, one product in double (it cannot underflow
// from floats).
template <typename C>
bool OppositeSigns(C r, C b) {
  if constexpr (std::is_same_v<C, float>) {
    return static_cast<double>(r) * b < 0;
  } else {
    return r != 0 && (r < 0) != (b < 0);
  }
}

// c ? x : y through a bit mask: GCC compiled the ternary on these data-dependent conditions to
// a branch that mispredicted half the time on mixed signs (remainder 2.8x slower).
template <typename C>
C Select(bool c, C x, C y) {
  using Bits = std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>;
  Bits xb, yb;
  std::memcpy(&xb, &x, sizeof(C));
  std::memcpy(&yb, &y, sizeof(C));
  const Bits mask = Bits{0} - static_cast<Bits>(c);
  const Bits out = (xb & mask) | (yb & ~mask);
  C result;
  std::memcpy(&result, &out, sizeof(C));
  return result;
}

// fmod(a, b) for floats without libm's loop over the exponent difference (13 ns an element):
// in double, a - trunc(a / b) * b is exact while |a / b| < 2^29 (the product has at most 53
// significant bits, and the difference at most 26). Only the quotient's rounding can overshoot
// to the next integer, which leaves the remainder with the sign opposite to a's, undone by one
// b towards a. Larger quotients, infinite or NaN operands and b = 0 take libm's. A zero result
// has a's sign, as fmod's.
template <typename C>
C Fmod(C a, C b) {
  if constexpr (std::is_same_v<C, float>) {
    const double x = a, y = b, q = std::trunc(x / y);
    if (!(std::fabs(q) < 0x1p29) || std::isinf(b)) return std::fmod(a, b);
    double r = x - q * y;
    r = Select(r * x < 0, r + std::copysign(y, x), r);
    return r == 0 ? std::copysign(0.0f, a) : static_cast<float>(r);
  } else {
    return std::fmod(a, b);
  }
}

struct FloorDivFn {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (kIsFloat<C>) {
      if (b == 0) return a / b;
      C mod = Fmod(a, b);
      C div = (a - mod) / b;
      div = Select(OppositeSigns(mod, b), div - 1, div);
      C floor_div = std::floor(div);
      return Select(div - floor_div > C(0.5), floor_div + 1, floor_div);
    } else {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return static_cast<C>(-static_cast<std::make_unsigned_t<C>>(a));
        C q = a / b;
        if (a % b != 0 && ((a < 0) != (b < 0))) --q;
        return q;
      } else {
        return a / b;
      }
    }
  }
};

struct ModFn {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (kIsFloat<C>) {
      if (b == 0) return std::fmod(a, b);
      C r = Fmod(a, b);
      return Select(OppositeSigns(r, b), r + b, r);
    } else {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return 0;
        C r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
      } else {
        return a % b;
      }
    }
  }
};

// C's fmod: the remainder of truncating division, with a's sign (integers: a % b; b = 0 gives 0
// as the other integer divisions do).
struct FmodFn {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (kIsFloat<C>) {
      return Fmod(a, b);
    } else {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return 0;
      }
      return a % b;
    }
  }
};

struct PowFn {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (kIsFloat<C>) {
      return cpu::VecPow(a, b);  // vector_libm.h: the loop vectorizes
    } else {
      if constexpr (std::is_signed_v<C>) {
        if (b < 0) return a == 1 ? 1 : (a == -1 ? (b % 2 ? -1 : 1) : 0);
      }
      C result = 1, base = a;
      for (auto e = b; e > 0; e >>= 1) {  // square-and-multiply; wraps like NumPy on overflow
        if (e & 1) result = static_cast<C>(result * base);
        base = static_cast<C>(base * base);
      }
      return result;
    }
  }
};

// NaN propagates through maximum and minimum, as in NumPy.
struct MaximumFn {
  template <typename C>
  C operator()(C a, C b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct MinimumFn {
  template <typename C>
  C operator()(C a, C b) const {
    return (a < b || a != a) ? a : b;
  }
};
struct EqualFn {
  template <typename C>
  bool operator()(C a, C b) const {
    return a == b;
  }
};
struct NotEqualFn {
  template <typename C>
  bool operator()(C a, C b) const {
    return a != b;
  }
};
struct LessFn {
  template <typename C>
  bool operator()(C a, C b) const {
    return a < b;
  }
};
struct LessEqualFn {
  template <typename C>
  bool operator()(C a, C b) const {
    return a <= b;
  }
};
struct GreaterFn {
  template <typename C>
  bool operator()(C a, C b) const {
    return a > b;
  }
};
struct GreaterEqualFn {
  template <typename C>
  bool operator()(C a, C b) const {
    return a >= b;
  }
};
// & and |, not && and ||: both sides are cheap, and a branch per element keeps the loop
// scalar (logical_and of two random masks: 4.6 ms per 2^20 elements with &&).
struct AndFn {
  template <typename C>
  bool operator()(C a, C b) const {
    return static_cast<bool>((a != C(0)) & (b != C(0)));
  }
};
struct OrFn {
  template <typename C>
  bool operator()(C a, C b) const {
    return static_cast<bool>((a != C(0)) | (b != C(0)));
  }
};
struct XorFn {
  template <typename C>
  bool operator()(C a, C b) const {
    return (a != C(0)) != (b != C(0));
  }
};

// ---- Kernels: one dtype switch each; R is the input type (arithmetic) or bool (predicates).

template <typename Fn, bool kPredicate>
void BinaryOpKernel(KernelContext& ctx) {
  const Tensor &a = ctx.inputs[0], &b = ctx.inputs[1], &out = ctx.outputs[0];
  DispatchDType(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using R = std::conditional_t<kPredicate, bool, T>;
    cpu::BinaryKernel<T, R>(a, b, out, Fn{});
  });
}

// ---- pow by one exponent with a cheaper form, as NumPy's and PyTorch's power take for arrays:
// x * x for 2, 1 / x for -1 and sqrt(x) for 0.5 are each one correctly rounded operation, as
// pow's result is, so they agree with it; x * x * x for 3, (x * x)^2 for 4, 1 / (x * x) for -2 and
// 1 / sqrt(x) for -0.5 round twice (within 2 ulp; PyTorch's forms). Over 2^20 floats x ** 2 took
// 6.8 ms through pow, 28x a multiply, and x ** 3 on negative bases 20 ms (glibc's vector powf
// leaves those to its scalar path).
struct CubeFn {
  template <typename C>
  C operator()(C a) const {
    return a * a * a;
  }
};
struct FourthPowerFn {
  template <typename C>
  C operator()(C a) const {
    const C square = a * a;
    return square * square;
  }
};
struct InverseSquareFn {
  template <typename C>
  C operator()(C a) const {
    return C(1) / (a * a);
  }
};
// 1 / sqrt(x) but for pow's values at -0 (+inf, not -inf) and -inf (+0, not NaN).
struct RsqrtPowFn {
  template <typename C>
  C operator()(C a) const {
    const C inf = std::numeric_limits<C>::infinity();
    return a == C(0) ? inf : (a == -inf ? C(0) : C(1) / std::sqrt(a));
  }
};
struct SquareFn {
  template <typename C>
  C operator()(C a) const {
    return a * a;
  }
};
struct ReciprocalFn {
  template <typename C>
  C operator()(C a) const {
    return C(1) / a;
  }
};
// sqrt but for pow's two differences: pow(-0, 0.5) is +0 (-0 + 0 is +0), pow(-inf, 0.5) is +inf.
struct SqrtPowFn {
  template <typename C>
  C operator()(C a) const {
    const C inf = std::numeric_limits<C>::infinity();
    return a == -inf ? inf : std::sqrt(a) + C(0);
  }
};
struct IdentityFn {
  template <typename C>
  C operator()(C a) const {
    return a;
  }
};
struct OneFn {  // pow(x, 0) is 1 for every x, NaN included
  template <typename C>
  C operator()(C) const {
    return C(1);
  }
};

// True when it wrote a ** b: a floating a, b one value with a cheaper form, out a's shape.
template <typename T>
bool PowByScalar(const Tensor& a, const Tensor& b, const Tensor& out) {
  using C = compute_t<T>;
  if constexpr (!std::is_floating_point_v<C>) {
    return false;
  } else {
    if (b.numel() != 1 || a.shape() != out.shape()) return false;
    const C e = static_cast<C>(*b.Contiguous().data<T>());
    if (e == C(2)) {
      cpu::UnaryKernel<T, T>(a, out, SquareFn{});
    } else if (e == C(-1)) {
      cpu::UnaryKernel<T, T>(a, out, ReciprocalFn{});
    } else if (e == C(0.5)) {
      cpu::UnaryKernel<T, T>(a, out, SqrtPowFn{});
    } else if (e == C(1)) {
      cpu::UnaryKernel<T, T>(a, out, IdentityFn{});
    } else if (e == C(0)) {
      cpu::UnaryKernel<T, T>(a, out, OneFn{});
    } else if (e == C(3)) {
      cpu::UnaryKernel<T, T>(a, out, CubeFn{});
    } else if (e == C(4)) {
      cpu::UnaryKernel<T, T>(a, out, FourthPowerFn{});
    } else if (e == C(-2)) {
      cpu::UnaryKernel<T, T>(a, out, InverseSquareFn{});
    } else if (e == C(-0.5)) {
      cpu::UnaryKernel<T, T>(a, out, RsqrtPowFn{});
    } else {
      return false;
    }
    return true;
  }
}

void PowKernel(KernelContext& ctx) {
  const Tensor &a = ctx.inputs[0], &b = ctx.inputs[1], &out = ctx.outputs[0];
  DispatchDType(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (!PowByScalar<T>(a, b, out)) cpu::BinaryKernel<T, T>(a, b, out, PowFn{});
  });
}

// ---- Bitwise functors: integer (and bool) operands only, which inference guarantees; the float
// instantiations the dtype dispatch makes are never run.
template <typename Op>
struct BitwiseFn {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) return static_cast<C>(Op{}(a, b));
    return a;
  }
};

template <typename C>
bool IsNegative(C v) {
  if constexpr (std::is_signed_v<C>) return v < 0;
  return false;
}

// NumPy's shifts: a shift by a negative count or by the bit width or more gives 0 (or -1 for a
// right shift of a negative value) instead of C++'s undefined behaviour; left shifts wrap, and
// right shifts are arithmetic for signed types and logical for unsigned ones. (uint16 computes
// in uint32: counts 16..31 shift every bit out of the 16 kept, as NumPy's.)
struct LeftShiftFn {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
      if (IsNegative(b) || b >= static_cast<C>(sizeof(C) * 8)) return C(0);
      using U = std::make_unsigned_t<C>;
      return static_cast<C>(static_cast<U>(static_cast<U>(a) << b));
    }
    return a;
  }
};
struct RightShiftFn {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
      if (IsNegative(b) || b >= static_cast<C>(sizeof(C) * 8)) return IsNegative(a) ? C(-1) : C(0);
      return static_cast<C>(a >> b);  // arithmetic for signed types (C++20, and GCC always)
    }
    return a;
  }
};

// ---- Inference

std::vector<TensorMeta> InferBinarySameType(const OpDef& def, const std::vector<TensorMeta>& in,
                                            const Attrs&) {
  KILN_CHECK(in[0].dtype == in[1].dtype, Type, def.name, ": operand dtypes ",
             DTypeName(in[0].dtype), " and ", DTypeName(in[1].dtype), " differ after promotion");
  return {TensorMeta{in[0].dtype, BroadcastShapes(in[0].shape, in[1].shape, def.name)}};
}

std::vector<TensorMeta> InferArithNoBool(const OpDef& def, const std::vector<TensorMeta>& in,
                                         const Attrs& attrs) {
  KILN_CHECK(in[0].dtype != DType::Bool, Type, def.name,
             ": not supported for bool tensors; cast them to an integer or float type first");
  return InferBinarySameType(def, in, attrs);
}

// Bitwise and/or/xor take integers or bools; shifts take integers only.
template <bool kAllowBool>
std::vector<TensorMeta> InferBitwise(const OpDef& def, const std::vector<TensorMeta>& in,
                                     const Attrs& attrs) {
  const bool ok = IsIntegral(in[0].dtype) || (kAllowBool && in[0].dtype == DType::Bool);
  KILN_CHECK(ok, Type, def.name, ": expected ", kAllowBool ? "integer or bool" : "integer",
             " tensors, got ", DTypeName(in[0].dtype));
  return InferBinarySameType(def, in, attrs);
}

std::vector<TensorMeta> InferPredicate(const OpDef& def, const std::vector<TensorMeta>& in,
                                       const Attrs& attrs) {
  auto out = InferBinarySameType(def, in, attrs);
  out[0].dtype = DType::Bool;
  return out;
}

// ---- Gradient rules. Operands were promoted to one dtype, so rules only reduce to shape.

std::vector<GradVar> AddGrad(GradBuilder& g) {
  GradVar dy = g.out_grad(0);
  return {ToInput(g, dy, 0), ToInput(g, dy, 1)};
}

std::vector<GradVar> SubGrad(GradBuilder& g) {
  GradVar dy = g.out_grad(0);
  return {ToInput(g, dy, 0), g.wants_input_grad(1) ? ToInput(g, Neg(g, dy), 1) : GradVar{}};
}

std::vector<GradVar> MulGrad(GradBuilder& g) {
  GradVar dy = g.out_grad(0), a = g.input(0), b = g.input(1);
  return {g.wants_input_grad(0) ? ToInput(g, Mul(g, dy, b), 0) : GradVar{},
          g.wants_input_grad(1) ? ToInput(g, Mul(g, dy, a), 1) : GradVar{}};
}

// d(a/b) = dy/b, -dy*(a/b)/b
std::vector<GradVar> DivGrad(GradBuilder& g) {
  GradVar dy = g.out_grad(0), b = g.input(1), out = g.output(0);
  GradVar da = Div(g, dy, b);
  return {g.wants_input_grad(0) ? ToInput(g, da, 0) : GradVar{},
          g.wants_input_grad(1) ? ToInput(g, Neg(g, Mul(g, da, out)), 1) : GradVar{}};
}

// a mod b = a - b*floor(a/b): da = dy, db = -dy*floor(a/b)
std::vector<GradVar> ModGrad(GradBuilder& g) {
  GradVar dy = g.out_grad(0);
  GradVar db;
  if (g.wants_input_grad(1)) {
    GradVar q = g.Emit1(OpKind::FloorDiv, {g.input(0), g.input(1)});
    db = ToInput(g, Neg(g, Mul(g, dy, q)), 1);
  }
  return {ToInput(g, dy, 0), db};
}

// fmod(a, b) = a - trunc(a / b) * b: dy, and -dy * trunc(a / b), whose exact value is
// (a - fmod(a, b)) / b.
std::vector<GradVar> FmodGrad(GradBuilder& g) {
  GradVar dy = g.out_grad(0);
  GradVar db;
  if (g.wants_input_grad(1)) {
    GradVar q = Div(g, Sub(g, g.input(0), g.output(0)), g.input(1));
    db = ToInput(g, Neg(g, Mul(g, dy, q)), 1);
  }
  return {ToInput(g, dy, 0), db};
}

// d(a^b) = dy*b*a^(b-1), dy*a^b*log(a) (taken as 0 where a <= 0, as the limit for a -> 0+)
std::vector<GradVar> PowGrad(GradBuilder& g) {
  GradVar dy = g.out_grad(0), a = g.input(0), b = g.input(1), out = g.output(0);
  GradVar da, db;
  if (g.wants_input_grad(0)) {
    GradVar b_minus_1 = Sub(g, b, g.Scalar(1.0));
    da = ToInput(g, Mul(g, dy, Mul(g, b, g.Emit1(OpKind::Pow, {a, b_minus_1}))), 0);
  }
  if (g.wants_input_grad(1)) {
    GradVar positive = g.Emit1(OpKind::Greater, {a, g.Scalar(0.0)});
    GradVar safe_a = g.Emit1(OpKind::Where, {positive, a, g.Scalar(1.0)});
    GradVar log_a = g.Emit1(OpKind::Log, {safe_a});
    db = ToInput(g, Mul(g, dy, Mul(g, out, log_a)), 1);
  }
  return {da, db};
}

// The larger operand gets the gradient; ties split it evenly.
template <OpKind kWins>
std::vector<GradVar> ExtremumGrad(GradBuilder& g) {
  GradVar dy = g.out_grad(0), a = g.input(0), b = g.input(1);
  DType dtype = g.meta(a).dtype;
  GradVar a_wins = CastTo(g, g.Emit1(kWins, {a, b}), dtype);
  GradVar tie = CastTo(g, g.Emit1(OpKind::Equal, {a, b}), dtype);
  GradVar weight_a = Add(g, a_wins, Mul(g, tie, g.Scalar(0.5)));
  GradVar weight_b = Sub(g, g.Scalar(1.0), weight_a);
  return {g.wants_input_grad(0) ? ToInput(g, Mul(g, dy, weight_a), 0) : GradVar{},
          g.wants_input_grad(1) ? ToInput(g, Mul(g, dy, weight_b), 1) : GradVar{}};
}

OpDef Binary(OpKind kind, InferFn infer, KernelFn kernel, GradRuleFn grad,
             Promotion promotion = Promotion::Common) {
  OpDef def;
  def.kind = kind;
  def.inputs = {"input", "other"};
  def.infer = infer;
  def.kernel = kernel;
  def.grad = grad;
  def.promotion = promotion;
  def.elementwise = true;
  return def;
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  r.Add(GradReads(Binary(OpKind::Add, InferBinarySameType, BinaryOpKernel<AddFn, false>, AddGrad),
                  {}, {}));
  r.Add(GradReads(Binary(OpKind::Sub, InferArithNoBool, BinaryOpKernel<SubFn, false>, SubGrad), {},
                  {}));
  OpDef mul = Binary(OpKind::Mul, InferBinarySameType, BinaryOpKernel<MulFn, false>, MulGrad);
  mul.grad_reads_factors_crosswise = true;
  r.Add(GradReads(std::move(mul), {0, 1}, {}));
  r.Add(GradReads(Binary(OpKind::Div, InferBinarySameType, BinaryOpKernel<DivFn, false>, DivGrad,
                         Promotion::CommonFloat),
                  {1}, {0}));
  r.Add(Binary(OpKind::FloorDiv, InferArithNoBool, BinaryOpKernel<FloorDivFn, false>,
               NotDifferentiable));
  r.Add(Binary(OpKind::Mod, InferArithNoBool, BinaryOpKernel<ModFn, false>, ModGrad));
  r.Add(Binary(OpKind::Fmod, InferArithNoBool, BinaryOpKernel<FmodFn, false>, FmodGrad));
  r.Add(Binary(OpKind::Pow, InferArithNoBool, PowKernel, PowGrad));
  r.Add(Binary(OpKind::Maximum, InferBinarySameType, BinaryOpKernel<MaximumFn, false>,
               ExtremumGrad<OpKind::Greater>));
  r.Add(Binary(OpKind::Minimum, InferBinarySameType, BinaryOpKernel<MinimumFn, false>,
               ExtremumGrad<OpKind::Less>));
  r.Add(Binary(OpKind::Equal, InferPredicate, BinaryOpKernel<EqualFn, true>, NotDifferentiable));
  r.Add(Binary(OpKind::NotEqual, InferPredicate, BinaryOpKernel<NotEqualFn, true>,
               NotDifferentiable));
  r.Add(Binary(OpKind::Less, InferPredicate, BinaryOpKernel<LessFn, true>, NotDifferentiable));
  r.Add(Binary(OpKind::LessEqual, InferPredicate, BinaryOpKernel<LessEqualFn, true>,
               NotDifferentiable));
  r.Add(
      Binary(OpKind::Greater, InferPredicate, BinaryOpKernel<GreaterFn, true>, NotDifferentiable));
  r.Add(Binary(OpKind::GreaterEqual, InferPredicate, BinaryOpKernel<GreaterEqualFn, true>,
               NotDifferentiable));
  r.Add(Binary(OpKind::LogicalAnd, InferPredicate, BinaryOpKernel<AndFn, true>, NotDifferentiable));
  r.Add(Binary(OpKind::LogicalOr, InferPredicate, BinaryOpKernel<OrFn, true>, NotDifferentiable));
  r.Add(Binary(OpKind::LogicalXor, InferPredicate, BinaryOpKernel<XorFn, true>, NotDifferentiable));
  r.Add(Binary(OpKind::BitwiseAnd, InferBitwise<true>,
               BinaryOpKernel<BitwiseFn<std::bit_and<>>, false>, NotDifferentiable));
  r.Add(Binary(OpKind::BitwiseOr, InferBitwise<true>,
               BinaryOpKernel<BitwiseFn<std::bit_or<>>, false>, NotDifferentiable));
  r.Add(Binary(OpKind::BitwiseXor, InferBitwise<true>,
               BinaryOpKernel<BitwiseFn<std::bit_xor<>>, false>, NotDifferentiable));
  r.Add(Binary(OpKind::LeftShift, InferBitwise<false>, BinaryOpKernel<LeftShiftFn, false>,
               NotDifferentiable));
  r.Add(Binary(OpKind::RightShift, InferBitwise<false>, BinaryOpKernel<RightShiftFn, false>,
               NotDifferentiable));
}

}  // namespace kiln
