// reduce.cc - the reduce op family: sum, mean, prod, max, min over axes, and argmax/argmin.
//
// Result dtypes follow NumPy: sums and products of bool/int give int64, the mean of ints gives
// float32 (kiln's default float), extrema keep the input dtype, arg-reductions give int64.
// Float sums accumulate in double (16-bit floats included), so results do not depend on the
// summation order beyond the final rounding.
#include "kernels/cpu/reduce.h"

#include <limits>
#include <type_traits>

#include "core/error.h"
#include "kernels/cpu/copy.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln {
namespace {

// ---- Axis handling shared by inference and kernels

// The axes attribute (None, an int or ints; None and () mean every axis) as a mask over `shape`.
std::vector<bool> ReducedAxes(const OpDef& def, const Shape& shape, const AttrValue& axes) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  std::vector<bool> mask(ndim, false);
  std::vector<int64_t> list;
  if (auto* v = std::get_if<std::vector<int64_t>>(&axes))
    list = *v;
  else if (auto* i = std::get_if<int64_t>(&axes))
    list = {*i};
  else if (!std::holds_alternative<std::monostate>(axes))
    Throw(ErrorKind::Type, def.name, ": axis must be None, an int or a tuple of ints, got ",
          AttrToString(axes));
  if (list.empty()) return std::vector<bool>(ndim, true);
  // A 0-d tensor accepts axis 0 and -1, as PyTorch and MindSpore do: the reduction is a no-op.
  const int64_t rank = std::max<int64_t>(ndim, 1);
  for (int64_t axis : list) {
    KILN_CHECK(axis >= -rank && axis < rank, Axis, def.name, ": axis ", axis,
               " is out of range for input of shape ", ShapeStr(shape));
    if (ndim == 0) continue;
    int64_t d = axis < 0 ? axis + ndim : axis;
    KILN_CHECK(!mask[d], Value, def.name, ": duplicate axis ", axis, " in axes ", ShapeStr(list),
               " for input of shape ", ShapeStr(shape));
    mask[d] = true;
  }
  return mask;
}

Shape ReducedShape(const Shape& shape, const std::vector<bool>& mask, bool keepdims) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d])
      out.push_back(shape[d]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

// Extrema and arg-reductions have no identity: reducing over nothing is an error (NumPy too).
void RequireNonEmpty(const OpDef& def, const Shape& shape, const std::vector<bool>& mask) {
  for (size_t d = 0; d < shape.size(); ++d)
    KILN_CHECK(!(mask[d] && shape[d] == 0), Value, def.name,
               ": cannot reduce over a zero-size dimension (axis ", d, " of input shape ",
               ShapeStr(shape), "); the operation has no identity");
}

enum class Kind { Sum, Mean, Prod, Max, Min };

// Sums and products of integers and bools accumulate in a 64-bit integer: uint64 for uint16,
// uint32 and uint64 (NumPy's; int64 would wrap a uint64 sum past 2**63), int64 for the rest
// (uint8 too, as PyTorch).
DType IntegerSumDType(DType in) {
  return IsUnsigned(in) && in != DType::UInt8 ? DType::UInt64 : DType::Int64;
}

DType ResultDType(Kind kind, DType in, const Attrs& attrs) {
  switch (kind) {
    case Kind::Sum:
      if (!AttrIsNone(attrs, 2)) return AttrDType(attrs, 2);
      return IsFloating(in) ? in : IntegerSumDType(in);
    case Kind::Prod:
      return IsFloating(in) ? in : IntegerSumDType(in);
    case Kind::Mean:
      return IsFloating(in) ? in : DType::Float32;
    default:
      return in;
  }
}

template <Kind K>
std::vector<TensorMeta> InferReduce(const OpDef& def, const std::vector<TensorMeta>& in,
                                    const Attrs& attrs) {
  std::vector<bool> mask = ReducedAxes(def, in[0].shape, attrs[0]);
  if constexpr (K == Kind::Max || K == Kind::Min) RequireNonEmpty(def, in[0].shape, mask);
  return {TensorMeta{ResultDType(K, in[0].dtype, attrs),
                     ReducedShape(in[0].shape, mask, AttrBool(attrs, 1))}};
}

// ---- Reduction functors on compute types (see cpu::ReduceLoop for the protocol)

template <typename C>
using SumAcc = std::conditional_t<std::is_floating_point_v<C>, double,
                                  std::conditional_t<std::is_unsigned_v<C>, uint64_t, int64_t>>;

// Integer sums and products wrap on overflow like NumPy's (done unsigned: no signed-overflow UB).
template <typename A>
A WrapAdd(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}
template <typename A>
A WrapMul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  } else {
    return a * b;
  }
}

template <typename T>
struct SumOp {
  using C = compute_t<T>;
  using Acc = SumAcc<C>;
  // 32 partial sums: eight vector registers of doubles, enough independent additions to hide
  // their latency (with 8, a float sum ran at half of PyTorch's speed, latency-bound).
  static constexpr int kLanes = 32;
  double scale = 1;  // 1 / count for the mean
  bool mean = false;
  Acc Init() const { return 0; }
  void Step(Acc& a, C v, int64_t) const { a = WrapAdd(a, static_cast<Acc>(v)); }
  void Combine(Acc& a, const Acc& b) const { a = WrapAdd(a, b); }
  T Finish(const Acc& a) const {
    if (mean) return cpu::Convert<T>(static_cast<double>(a) * scale);
    return cpu::Convert<T>(a);
  }
};

template <typename T>
struct ProdOp {
  using C = compute_t<T>;
  using Acc = SumAcc<C>;
  static constexpr int kLanes = 8;
  Acc Init() const { return 1; }
  void Step(Acc& a, C v, int64_t) const { a = WrapMul(a, static_cast<Acc>(v)); }
  void Combine(Acc& a, const Acc& b) const { a = WrapMul(a, b); }
  T Finish(const Acc& a) const { return cpu::Convert<T>(a); }
};

// NaN wins once seen: `v != v` takes a NaN, and nothing compares greater than a NaN held.
template <typename T, bool kMax>
struct ExtremumOp {
  using C = compute_t<T>;
  using Acc = C;
  static constexpr int kLanes = 0;  // rows go through cpu::RunExtremum
  Acc Run(const T* p, int64_t begin, int64_t end) const {
    return cpu::RunExtremum<T, kMax>(p, begin, end);
  }
  Acc Init() const {
    if constexpr (std::is_floating_point_v<C>)
      return kMax ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
    else
      return kMax ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
  }
  void Step(Acc& a, C v, int64_t) const {
    const bool better = kMax ? v > a : v < a;
    a = (better || v != v) ? v : a;  // a select, not a branch: the lanes vectorize
  }
  void Combine(Acc& a, const Acc& b) const { Step(a, b, 0); }
  T Finish(const Acc& a) const { return cpu::Convert<T>(a); }
};

// First occurrence wins ties; a NaN counts as the extreme for both argmax and argmin (NumPy).
template <typename T, bool kMax>
struct ArgOp {
  using C = compute_t<T>;
  struct Acc {
    C value;
    int64_t index;
  };
  static constexpr int kLanes = 1;  // lanes would interleave indices and break first-occurrence
  Acc Init() const { return Acc{C{}, -1}; }
  static bool Better(C v, C held) {
    if (held != held) return false;
    return (kMax ? v > held : v < held) || v != v;
  }
  void Step(Acc& a, C v, int64_t r) const {
    if (a.index < 0 || Better(v, a.value)) a = Acc{v, r};
  }
  void Combine(Acc& a, const Acc& later) const {
    if (later.index >= 0 && (a.index < 0 || Better(later.value, a.value))) a = later;
  }
  int64_t Finish(const Acc& a) const { return a.index; }
};

// ---- Kernels

// ---- sum_to_like(input, like): input summed over the axes that broadcasting input's shape from
// like's added or stretched, so it takes like's shape. The gradient rules' way back to a shape
// with dimensions of any size, where only the run tells a stretched 1 from a matching size.

std::vector<TensorMeta> InferSumToLike(const OpDef& def, const std::vector<TensorMeta>& in,
                                       const Attrs&) {
  const Shape &from = in[0].shape, &to = in[1].shape;
  const size_t lead = from.size() >= to.size() ? from.size() - to.size() : 0;
  bool ok = from.size() >= to.size();
  for (size_t i = 0; ok && i < to.size(); ++i)
    ok = to[i] == 1 || to[i] == -1 || from[lead + i] == -1 || to[i] == from[lead + i];
  KILN_CHECK(ok, Value, def.name, ": cannot sum a tensor of shape ", ShapeStr(from), " to shape ",
             ShapeStr(to));
  return {TensorMeta{in[0].dtype, to}};
}

// The output is the input itself (a view) when no axis needs summing.
void SumToLikeKernel(KernelContext& ctx) {
  const Tensor &input = ctx.inputs[0], &like = ctx.inputs[1];
  const TensorMeta out = InferSumToLike(
      ctx.def, {{input.dtype(), input.shape()}, {like.dtype(), like.shape()}}, ctx.attrs)[0];
  const int64_t lead = input.ndim() - like.ndim();
  std::vector<bool> mask(input.ndim(), false);
  bool any = false;
  for (int64_t i = 0; i < input.ndim(); ++i) {
    mask[i] = i < lead || (like.dim(i - lead) == 1 && input.dim(i) != 1);
    any |= mask[i];
  }
  if (!any) {
    ctx.outputs = {input.AsStrided(out.shape, input.strides(), input.offset())};
    return;
  }
  Tensor result = Tensor::Empty(out.shape, input.dtype());
  cpu::ReduceShape s;
  Tensor x = cpu::PrepareReduce(input, mask, &s);
  DispatchDType(input.dtype(), [&](auto tag) {
    using T = decltype(tag);
    cpu::ReduceLoop(x.data<T>(), result.data<T>(), s, SumOp<T>{});
  });
  ctx.outputs = {result};
}

std::vector<GradVar> SumToLikeGrad(GradBuilder& g) {
  std::vector<GradVar> grads(2);
  if (g.wants_input_grad(0))
    grads[0] = Add(g, g.Emit1(OpKind::FillLike, {g.input(0)}, {0.0, g.meta(g.input(0)).dtype}),
                   g.out_grad(0));
  return grads;
}

template <Kind K>
void ReduceKernel(KernelContext& ctx) {
  const Tensor& out = ctx.outputs[0];
  const Tensor& input = ctx.inputs[0];
  std::vector<bool> mask = ReducedAxes(ctx.def, input.shape(), ctx.attrs[0]);
  // The mean of integers accumulates from float64 so large int64 values keep their precision.
  DType compute = out.dtype();
  if (K == Kind::Mean && !IsFloating(input.dtype())) compute = DType::Float64;
  cpu::ReduceShape s;
  Tensor x = cpu::PrepareReduce(input.To(compute), mask, &s);
  Tensor dst = compute == out.dtype() ? out : Tensor::Empty(out.shape(), compute);
  DispatchDType(compute, [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    T* o = dst.data<T>();
    if constexpr (K == Kind::Sum || K == Kind::Mean) {
      SumOp<T> op;
      op.mean = K == Kind::Mean;
      op.scale = 1.0 / static_cast<double>(s.reduce);
      cpu::ReduceLoop(src, o, s, op);
    } else if constexpr (K == Kind::Prod) {
      cpu::ReduceLoop(src, o, s, ProdOp<T>{});
    } else {
      cpu::ReduceLoop(src, o, s, ExtremumOp<T, K == Kind::Max>{});
    }
  });
  if (dst.impl() != out.impl()) cpu::CopyInto(dst, out);
}

// ---- Argmax / argmin: one axis, or the flattened input when axis is None

std::vector<bool> ArgAxes(const OpDef& def, const Shape& shape, const Attrs& attrs) {
  if (AttrIsNone(attrs, 0)) return std::vector<bool>(shape.size(), true);
  return ReducedAxes(def, shape, AttrValue(AttrInt(attrs, 0)));
}

std::vector<TensorMeta> InferArg(const OpDef& def, const std::vector<TensorMeta>& in,
                                 const Attrs& attrs) {
  std::vector<bool> mask = ArgAxes(def, in[0].shape, attrs);
  RequireNonEmpty(def, in[0].shape, mask);
  return {TensorMeta{DType::Int64, ReducedShape(in[0].shape, mask, AttrBool(attrs, 1))}};
}

template <bool kMax>
void ArgKernel(KernelContext& ctx) {
  std::vector<bool> mask = ArgAxes(ctx.def, ctx.inputs[0].shape(), ctx.attrs);
  cpu::ReduceShape s;
  Tensor x = cpu::PrepareReduce(ctx.inputs[0], mask, &s);
  DispatchDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* src = x.data<T>();
    int64_t* out = ctx.outputs[0].data<int64_t>();
    if (s.inner != 1) {
      cpu::ReduceLoop(src, out, s, ArgOp<T, kMax>{});
      return;
    }
    // Rows: the extremum with the vectorized lanes, then a scan for its first occurrence (the
    // first NaN when it is NaN). Faster than carrying indices through every comparison.
    const int64_t R = s.reduce;
    const int64_t grain = std::max<int64_t>(1, cpu::kParallelGrain / std::max<int64_t>(R, 1));
    ParallelFor(s.outer, grain, [&](int64_t begin, int64_t end) {
      const ExtremumOp<T, kMax> op;
      for (int64_t a = begin; a < end; ++a) {
        const T* row = src + a * R;
        const C best = cpu::ReduceRun(row, 0, R, op);
        int64_t i = 0;
        if (best != best) {
          while (i < R && static_cast<C>(row[i]) == static_cast<C>(row[i])) ++i;
        } else {
          while (i < R && static_cast<C>(row[i]) != best) ++i;
        }
        out[a] = i;
      }
    });
  });
}

// ---- Gradient rules (dy: the output gradient, brought back to the input's rank and dtype)

// The reduced axes of input 0 as the ints the reduction ops take, and dy with the reduced
// dimensions kept (size 1), cast to the input's dtype: it broadcasts against the input.
struct ReduceGradCtx {
  TensorMeta in;
  std::vector<int64_t> axes;  // reduced axes (non-negative); empty for a 0-d input
  Shape kept;                 // the input's shape with reduced dims set to 1
  int64_t count = 1;          // elements reduced into each output element
  bool any_size = false;      // the input has a dimension of any size (-1; known when run)
  bool count_known = true;    // no reduced dimension is of any size
};

ReduceGradCtx ReduceGradInfo(GradBuilder& g, OpKind kind, const AttrValue& axes_attr) {
  ReduceGradCtx c;
  c.in = g.meta(g.input(0));
  std::vector<bool> mask = ReducedAxes(GetOpDef(kind), c.in.shape, axes_attr);
  c.kept = ReducedShape(c.in.shape, mask, true);
  for (size_t d = 0; d < mask.size(); ++d) {
    c.any_size |= c.in.shape[d] < 0;
    if (mask[d]) {
      c.axes.push_back(static_cast<int64_t>(d));
      c.count *= c.in.shape[d];
      c.count_known &= c.in.shape[d] >= 0;
    }
  }
  return c;
}

// v (an output-shaped tensor) reshaped so its reduced dims are kept as size 1. With dimensions
// of any size, which a reshape could name only one of, the reduced axes are inserted instead.
GradVar Kept(GradBuilder& g, const ReduceGradCtx& c, GradVar v) {
  if (g.meta(v).shape == c.kept) return v;
  if (!c.any_size || g.meta(v).shape.size() + c.axes.size() != c.kept.size())
    return g.Emit1(OpKind::Reshape, {v}, {c.kept});
  for (int64_t axis : c.axes) v = g.Emit1(OpKind::ExpandDims, {v}, {axis});
  return v;
}

// v broadcast to the input's shape. broadcast_to cannot name a size the graph learns only when
// it runs (its -1 keeps v's own size): there v is added to zeros shaped like the input.
GradVar BroadcastToInput(GradBuilder& g, const ReduceGradCtx& c, GradVar v) {
  if (g.meta(v).shape == c.in.shape) return v;
  if (c.any_size) return Add(g, g.Emit1(OpKind::FillLike, {g.input(0)}, {0.0, c.in.dtype}), v);
  return g.Emit1(OpKind::BroadcastTo, {v}, {c.in.shape});
}

// A ReduceSum over the reduced axes, dims kept (the rule's own shape bookkeeping).
GradVar SumKept(GradBuilder& g, const ReduceGradCtx& c, GradVar v) {
  if (c.axes.empty()) return v;
  return g.Emit1(OpKind::ReduceSum, {v}, {c.axes, true, std::monostate{}});
}

// sum: dy broadcast back over the reduced axes.
std::vector<GradVar> ReduceSumGrad(GradBuilder& g) {
  if (!g.wants_input_grad(0)) return {GradVar{}};
  ReduceGradCtx c = ReduceGradInfo(g, OpKind::ReduceSum, g.attrs()[0]);
  GradVar dy = CastTo(g, g.out_grad(0), c.in.dtype);
  return {BroadcastToInput(g, c, Kept(g, c, dy))};
}

// mean: the same, divided by the number of elements each mean took.
std::vector<GradVar> ReduceMeanGrad(GradBuilder& g) {
  if (!g.wants_input_grad(0)) return {GradVar{}};
  ReduceGradCtx c = ReduceGradInfo(g, OpKind::ReduceMean, g.attrs()[0]);
  GradVar dy = CastTo(g, g.out_grad(0), c.in.dtype);
  if (!c.count_known) {  // the count is known when the graph runs: a sum of ones gives it
    GradVar ones = g.Emit1(OpKind::FillLike, {g.input(0)}, {1.0, c.in.dtype});
    return {BroadcastToInput(g, c, Div(g, Kept(g, c, dy), SumKept(g, c, ones)))};
  }
  if (c.count != 1)
    dy = Mul(g, dy, g.Scalar(1.0 / static_cast<double>(std::max<int64_t>(c.count, 1))));
  return {BroadcastToInput(g, c, Kept(g, c, dy))};
}

// prod: d prod / d x_i is the product of the other elements. Written without dividing by x,
// so zeros are exact: with no zero in the slice it is prod / x_i; with one zero, the product
// of the nonzero elements at the zero and 0 elsewhere; with two or more, 0 everywhere.
std::vector<GradVar> ReduceProdGrad(GradBuilder& g) {
  if (!g.wants_input_grad(0)) return {GradVar{}};
  ReduceGradCtx c = ReduceGradInfo(g, OpKind::ReduceProd, g.attrs()[0]);
  GradVar x = g.input(0), zero = g.Scalar(0.0), one = g.Scalar(1.0);
  GradVar dy = Kept(g, c, CastTo(g, g.out_grad(0), c.in.dtype));
  GradVar is_zero = g.Emit1(OpKind::Equal, {x, zero});
  GradVar x_safe = g.Emit1(OpKind::Where, {is_zero, one, x});
  GradVar prod_nonzero =
      c.axes.empty() ? x_safe : g.Emit1(OpKind::ReduceProd, {x_safe}, {c.axes, true});
  GradVar zeros = SumKept(g, c, CastTo(g, is_zero, c.in.dtype));
  GradVar none_zero = g.Emit1(OpKind::Equal, {zeros, zero});
  GradVar one_zero = g.Emit1(OpKind::Equal, {zeros, one});
  GradVar at_nonzero = g.Emit1(OpKind::Where, {none_zero, Div(g, prod_nonzero, x_safe), zero});
  GradVar at_zero = g.Emit1(OpKind::Where, {one_zero, prod_nonzero, zero});
  GradVar others = g.Emit1(OpKind::Where, {is_zero, at_zero, at_nonzero});
  return {Mul(g, others, dy)};
}

// max / min: dy goes to the elements equal to the result, split evenly among ties (PyTorch's
// amax/amin). A NaN result sends it to the slice's NaNs.
std::vector<GradVar> ExtremumGrad(GradBuilder& g, OpKind kind) {
  if (!g.wants_input_grad(0)) return {GradVar{}};
  ReduceGradCtx c = ReduceGradInfo(g, kind, g.attrs()[0]);
  GradVar x = g.input(0);
  GradVar y = Kept(g, c, g.output(0));
  GradVar dy = Kept(g, c, CastTo(g, g.out_grad(0), c.in.dtype));
  GradVar hit = g.Emit1(OpKind::Equal, {x, y});
  hit = g.Emit1(OpKind::LogicalOr, {hit, g.Emit1(OpKind::NotEqual, {x, x})});
  GradVar hits = CastTo(g, hit, c.in.dtype);
  GradVar share = Div(g, dy, SumKept(g, c, hits));
  return {Mul(g, hits, share)};
}
std::vector<GradVar> ReduceMaxGrad(GradBuilder& g) { return ExtremumGrad(g, OpKind::ReduceMax); }
std::vector<GradVar> ReduceMinGrad(GradBuilder& g) { return ExtremumGrad(g, OpKind::ReduceMin); }

OpDef Reduce(OpKind kind, InferFn infer, KernelFn kernel, GradRuleFn grad) {
  OpDef def;
  def.kind = kind;
  def.inputs = {"input"};
  def.attrs = {{"axes", std::monostate{}}, {"keepdims", false}};
  def.infer = infer;
  def.kernel = kernel;
  def.grad = grad;
  return def;
}

}  // namespace

void RegisterReduceOps(OpRegistry& r) {
  OpDef sum =
      Reduce(OpKind::ReduceSum, InferReduce<Kind::Sum>, ReduceKernel<Kind::Sum>, ReduceSumGrad);
  sum.attrs.push_back({"dtype", std::monostate{}});
  r.Add(GradReads(std::move(sum), {}, {}));  // the rules read shapes only
  r.Add(GradReads(
      Reduce(OpKind::ReduceMean, InferReduce<Kind::Mean>, ReduceKernel<Kind::Mean>, ReduceMeanGrad),
      {}, {}));
  OpDef sum_to_like =
      MakeOpDef(OpKind::SumToLike, {"input", "like"}, {}, InferSumToLike, SumToLikeKernel);
  sum_to_like.grad = SumToLikeGrad;
  sum_to_like.allocates_outputs = true;  // the input itself where nothing is summed
  sum_to_like.is_view = true;
  r.Add(GradReads(std::move(sum_to_like), {0}, {}));
  r.Add(Reduce(OpKind::ReduceProd, InferReduce<Kind::Prod>, ReduceKernel<Kind::Prod>,
               ReduceProdGrad));
  r.Add(Reduce(OpKind::ReduceMax, InferReduce<Kind::Max>, ReduceKernel<Kind::Max>, ReduceMaxGrad));
  r.Add(Reduce(OpKind::ReduceMin, InferReduce<Kind::Min>, ReduceKernel<Kind::Min>, ReduceMinGrad));
  for (auto [kind, kernel] : {std::pair{OpKind::Argmax, &ArgKernel<true>},
                              std::pair{OpKind::Argmin, &ArgKernel<false>}}) {
    // Integer indices: no gradient.
    OpDef def = Reduce(kind, InferArg, kernel, NotDifferentiable);
    def.attrs[0] = {"axis", std::monostate{}};
    r.Add(std::move(def));
  }
}

}  // namespace kiln
