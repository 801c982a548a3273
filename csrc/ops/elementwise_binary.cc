// elementwise_binary.cc - arithmetic, comparison and logical ops on two broadcast tensors.
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "kernels/cpu/elementwise.h"
#include "ops/registry.h"

namespace kiln {
namespace {

template <typename C>
constexpr bool kIsFloat = std::is_floating_point_v<C>;

// ---- Functors on compute types. Integer division by zero gives 0 (as NumPy) instead of a trap.

struct AddFn { template <typename C> auto operator()(C a, C b) const { return a + b; } };
struct SubFn { template <typename C> auto operator()(C a, C b) const { return a - b; } };
struct MulFn { template <typename C> auto operator()(C a, C b) const { return a * b; } };
struct DivFn { template <typename C> auto operator()(C a, C b) const { return a / b; } };

struct FloorDivFn {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (kIsFloat<C>) {
      if (b == 0) return a / b;
      C mod = std::fmod(a, b);
      C div = (a - mod) / b;
      if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
      C floor_div = std::floor(div);
      if (div - floor_div > C(0.5)) floor_div += 1;
      return floor_div;
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
      C r = std::fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
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

struct PowFn {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (kIsFloat<C>) {
      return std::pow(a, b);
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
struct MaximumFn { template <typename C> C operator()(C a, C b) const { return (a > b || a != a) ? a : b; } };
struct MinimumFn { template <typename C> C operator()(C a, C b) const { return (a < b || a != a) ? a : b; } };
struct EqualFn { template <typename C> bool operator()(C a, C b) const { return a == b; } };
struct NotEqualFn { template <typename C> bool operator()(C a, C b) const { return a != b; } };
struct LessFn { template <typename C> bool operator()(C a, C b) const { return a < b; } };
struct LessEqualFn { template <typename C> bool operator()(C a, C b) const { return a <= b; } };
struct GreaterFn { template <typename C> bool operator()(C a, C b) const { return a > b; } };
struct GreaterEqualFn { template <typename C> bool operator()(C a, C b) const { return a >= b; } };
struct AndFn { template <typename C> bool operator()(C a, C b) const { return a != C(0) && b != C(0); } };
struct OrFn { template <typename C> bool operator()(C a, C b) const { return a != C(0) || b != C(0); } };
struct XorFn { template <typename C> bool operator()(C a, C b) const { return (a != C(0)) != (b != C(0)); } };

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

std::vector<TensorMeta> InferPredicate(const OpDef& def, const std::vector<TensorMeta>& in,
                                       const Attrs& attrs) {
  auto out = InferBinarySameType(def, in, attrs);
  out[0].dtype = DType::Bool;
  return out;
}

OpDef Binary(OpKind kind, InferFn infer, KernelFn kernel, Promotion promotion = Promotion::Common) {
  OpDef def;
  def.kind = kind;
  def.inputs = {"input", "other"};
  def.infer = infer;
  def.kernel = kernel;
  def.promotion = promotion;
  return def;
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  r.Add(Binary(OpKind::Add, InferBinarySameType, BinaryOpKernel<AddFn, false>));
  r.Add(Binary(OpKind::Sub, InferArithNoBool, BinaryOpKernel<SubFn, false>));
  r.Add(Binary(OpKind::Mul, InferBinarySameType, BinaryOpKernel<MulFn, false>));
  r.Add(Binary(OpKind::Div, InferBinarySameType, BinaryOpKernel<DivFn, false>,
               Promotion::CommonFloat));
  r.Add(Binary(OpKind::FloorDiv, InferArithNoBool, BinaryOpKernel<FloorDivFn, false>));
  r.Add(Binary(OpKind::Mod, InferArithNoBool, BinaryOpKernel<ModFn, false>));
  r.Add(Binary(OpKind::Pow, InferArithNoBool, BinaryOpKernel<PowFn, false>));
  r.Add(Binary(OpKind::Maximum, InferBinarySameType, BinaryOpKernel<MaximumFn, false>));
  r.Add(Binary(OpKind::Minimum, InferBinarySameType, BinaryOpKernel<MinimumFn, false>));
  r.Add(Binary(OpKind::Equal, InferPredicate, BinaryOpKernel<EqualFn, true>));
  r.Add(Binary(OpKind::NotEqual, InferPredicate, BinaryOpKernel<NotEqualFn, true>));
  r.Add(Binary(OpKind::Less, InferPredicate, BinaryOpKernel<LessFn, true>));
  r.Add(Binary(OpKind::LessEqual, InferPredicate, BinaryOpKernel<LessEqualFn, true>));
  r.Add(Binary(OpKind::Greater, InferPredicate, BinaryOpKernel<GreaterFn, true>));
  r.Add(Binary(OpKind::GreaterEqual, InferPredicate, BinaryOpKernel<GreaterEqualFn, true>));
  r.Add(Binary(OpKind::LogicalAnd, InferPredicate, BinaryOpKernel<AndFn, true>));
  r.Add(Binary(OpKind::LogicalOr, InferPredicate, BinaryOpKernel<OrFn, true>));
  r.Add(Binary(OpKind::LogicalXor, InferPredicate, BinaryOpKernel<XorFn, true>));
}

}  // namespace kiln
