// optim.cc - fused, in-place optimizer updates (ApplyMomentum, SGD, Adam/AdamW), one pass per
// tensor, and the low-precision weight copies they keep in sync for mixed-precision forwards.
//
// An optimizer step written with elementwise ops reads and writes each parameter-sized tensor
// six times (scale, add, assign, scale, subtract, assign); the fused kernel does it once, which
// matters because parameters are the largest tensors of a training step.
//
// Mixed precision (kiln.amp) reads float32 master weights through `cached_cast`: the bfloat16
// copy of a weight is derived from its bytes (kernels/cpu/derived_cache.h). An update kernel
// that finds such a copy requested writes it in the same pass as the new master weight, so the
// next forward reads it instead of casting the weight again. An update also accepts a gradient
// of lower precision than the weight (the bf16 gradient of a bf16 forward), accumulating in the
// weight's precision: passes/absorb_grad_casts.cc hands it the bf16 gradient uncast.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/derived_cache.h"
#include "kernels/cpu/elementwise.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln {
namespace {

double ScalarValue(const Tensor& t) { return *t.To(DType::Float64).Contiguous().data<double>(); }

// ---- schema checks shared by the updates ----

void CheckFloating(const OpDef& def, const std::vector<TensorMeta>& in) {
  for (size_t i = 0; i < in.size(); ++i)
    KILN_CHECK(IsFloating(in[i].dtype), Type, def.name, ": expected floating-point tensors, got ",
               DTypeName(in[i].dtype), " for ", def.inputs[i]);
}

// var and its state tensors share shape and dtype; the gradient has the shape and the var's
// dtype or a 16-bit float type below it (a mixed-precision gradient).
void CheckUpdated(const OpDef& def, const std::vector<TensorMeta>& in,
                  const std::vector<int>& state, int grad) {
  const TensorMeta& var = in[0];
  for (int s : state) {
    KILN_CHECK(in[s].shape == var.shape, Value, def.name, ": variable ", ShapeStr(var.shape),
               " and ", def.inputs[s], " ", ShapeStr(in[s].shape), " must have one shape");
    KILN_CHECK(in[s].dtype == var.dtype, Type, def.name, ": variable and ", def.inputs[s],
               " must share a dtype, got ", DTypeName(var.dtype), " and ", DTypeName(in[s].dtype));
  }
  const TensorMeta& g = in[grad];
  KILN_CHECK(g.shape == var.shape, Value, def.name, ": variable ", ShapeStr(var.shape),
             " and gradient ", ShapeStr(g.shape), " must have one shape");
  const bool lower = (g.dtype == DType::BFloat16 || g.dtype == DType::Float16) &&
                     (var.dtype == DType::Float32 || var.dtype == DType::Float64);
  KILN_CHECK(g.dtype == var.dtype || lower, Type, def.name,
             ": the gradient must have the variable's dtype (or be bfloat16/float16 for a "
             "float32 variable), got ",
             DTypeName(g.dtype), " for a ", DTypeName(var.dtype), " variable");
}

void CheckScalars(const OpDef& def, const std::vector<TensorMeta>& in,
                  const std::vector<int>& scalars) {
  for (int s : scalars)
    KILN_CHECK(NumElements(in[s].shape) == 1, Value, def.name, ": ", def.inputs[s],
               " must be a scalar, got ", ShapeStr(in[s].shape));
}

// ---- the one-pass loop ----

struct NoCopy {};

// The low-precision copy of `var` that a forward reads through cached_cast, made afresh for the
// update to fill (a new buffer: tensors handed out before keep the old values); undefined when
// nothing asked for one.
Tensor RequestedCopy(const Tensor& var) {
  if (!var.is_contiguous()) return Tensor();
  for (const auto& key : cpu::DerivedKeysFor(var, cpu::kLowPrecisionCopyTag)) {
    const DType dtype = static_cast<DType>(key.at(1));
    if (dtype == DType::BFloat16 || dtype == DType::Float16)
      return Tensor::Empty(var.shape(), dtype);
  }
  return Tensor();
}

// The gradient as compute-type values for elements [i0, i0 + m): the tensor's own memory when it
// has that type, else converted into `buf` (bfloat16 widened as elementwise.h's bf16 runs are).
template <typename C, typename G>
const C* GradChunk(const G* g, int64_t i0, int64_t m, C* buf) {
  if constexpr (std::is_same_v<G, C>) {
    return g + i0;
  } else if constexpr (std::is_same_v<G, BFloat16> && std::is_same_v<C, float>) {
    cpu::Bf16Widen(g + i0, buf, m);
    return buf;
  } else {
    for (int64_t i = 0; i < m; ++i) buf[i] = static_cast<C>(static_cast<compute_t<G>>(g[i0 + i]));
    return buf;
  }
}

// v[i] = step(i, v[i], g[i]) over every element, in the var's compute type; writes the copy
// (the new v[i] converted as `cast` converts) in the same pass when there is one. Chunks of
// kBf16Chunk elements keep the conversions out of the update's loop, so each loop vectorizes
// (a rounding's NaN branch inside the update's loop would stop that).
template <typename T, typename G, typename K, typename Step>
void UpdateLoop(const Tensor& var, const Tensor& grad, const Tensor& copy, const Step& step) {
  using C = compute_t<T>;
  T* v = var.data<T>();
  const G* g = grad.data<G>();
  K* k = nullptr;
  if constexpr (!std::is_same_v<K, NoCopy>) k = copy.data<K>();
  ParallelFor(var.numel(), 16384, [&](int64_t begin, int64_t end) {
    C buf[cpu::kBf16Chunk];
    for (int64_t i0 = begin; i0 < end; i0 += cpu::kBf16Chunk) {
      const int64_t m = std::min(cpu::kBf16Chunk, end - i0);
      const C* gc = GradChunk<C>(g, i0, m, buf);
      T* vc = v + i0;
      for (int64_t i = 0; i < m; ++i)
        vc[i] = static_cast<T>(step(i0 + i, static_cast<C>(vc[i]), gc[i]));
      if constexpr (std::is_same_v<K, BFloat16> && std::is_same_v<T, float>) {
        cpu::Bf16Narrow(vc, k + i0, m);
      } else if constexpr (!std::is_same_v<K, NoCopy>) {
        for (int64_t i = 0; i < m; ++i) k[i0 + i] = cpu::Convert<K>(vc[i]);
      }
    }
  });
}

template <typename T, typename G, typename Step>
void UpdateWithCopy(const Tensor& var, const Tensor& grad, const Tensor& copy, const Step& step) {
  if (!copy.defined()) return UpdateLoop<T, G, NoCopy>(var, grad, copy, step);
  if (copy.dtype() == DType::BFloat16) return UpdateLoop<T, G, BFloat16>(var, grad, copy, step);
  UpdateLoop<T, G, Half>(var, grad, copy, step);
}

// Runs Step<T> (built from the kernel context) over the variable (input 0) and the gradient
// (input `grad_index`), then records the refreshed copy as derived from the new bytes.
template <template <typename> class Step>
void RunUpdate(KernelContext& ctx, int grad_index) {
  const Tensor& var = ctx.inputs[0];
  KILN_CHECK(var.is_contiguous(), Value, ctx.def.name,
             ": variable and its state must be contiguous (Parameters always are)");
  for (int s : ctx.def.mutated_inputs)
    KILN_CHECK(ctx.inputs[s].is_contiguous(), Value, ctx.def.name, ": ", ctx.def.inputs[s],
               " must be contiguous (optimizer state always is)");
  const Tensor grad = ctx.inputs[grad_index].Contiguous();
  const Tensor copy = RequestedCopy(var);
  const uint64_t written = var.storage()->write_version() + 1;  // after RunKernel marks it
  DispatchDType(var.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      const Step<T> step(ctx);
      if (grad.dtype() == var.dtype()) return UpdateWithCopy<T, T>(var, grad, copy, step);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        if (grad.dtype() == DType::BFloat16)
          return UpdateWithCopy<T, BFloat16>(var, grad, copy, step);
        UpdateWithCopy<T, Half>(var, grad, copy, step);
      }
    }
  });
  if (copy.defined())
    cpu::DerivedStore(var, {cpu::kLowPrecisionCopyTag, static_cast<int64_t>(copy.dtype())}, written,
                      std::make_shared<Tensor>(copy));
  ctx.outputs = {var.AsStrided(var.shape(), var.strides(), var.offset())};
}

template <typename T>
T* State(KernelContext& ctx, int i) {
  return ctx.inputs[i].data<T>();
}

// ---- apply_momentum(variable, accumulation, learning_rate, gradient, momentum) ----

std::vector<TensorMeta> InferApplyMomentum(const OpDef& def, const std::vector<TensorMeta>& in,
                                           const Attrs&) {
  CheckFloating(def, in);
  CheckUpdated(def, in, {1}, 3);
  CheckScalars(def, in, {2, 4});
  return {in[0]};
}

template <typename T>
struct MomentumStep {
  using C = compute_t<T>;
  T* a;
  C lr, m;
  bool nesterov;
  explicit MomentumStep(KernelContext& ctx)
      : a(State<T>(ctx, 1)),
        lr(static_cast<C>(ScalarValue(ctx.inputs[2]))),
        m(static_cast<C>(ScalarValue(ctx.inputs[4]))),
        nesterov(AttrBool(ctx.attrs, 0)) {}
  C operator()(int64_t i, C v, C g) const {
    const C ai = static_cast<C>(a[i]) * m + g;
    a[i] = static_cast<T>(ai);
    return v - lr * (nesterov ? g + ai * m : ai);
  }
};

void ApplyMomentumKernel(KernelContext& ctx) { RunUpdate<MomentumStep>(ctx, 3); }

// ---- apply_sgd(variable, accumulation, stat, learning_rate, gradient) ----
// MindSpore's SGD: the first step (stat set) starts the buffer at the gradient.

std::vector<TensorMeta> InferApplySGD(const OpDef& def, const std::vector<TensorMeta>& in,
                                      const Attrs&) {
  CheckFloating(def, in);
  CheckUpdated(def, in, {1, 2}, 4);
  CheckScalars(def, in, {3});
  return {in[0]};
}

template <typename T>
struct SGDStep {
  using C = compute_t<T>;
  T *a, *stat;
  C lr, m, keep;
  bool nesterov;
  explicit SGDStep(KernelContext& ctx)
      : a(State<T>(ctx, 1)),
        stat(State<T>(ctx, 2)),
        lr(static_cast<C>(ScalarValue(ctx.inputs[3]))),
        m(static_cast<C>(AttrFloat(ctx.attrs, 0))),
        keep(static_cast<C>(1.0 - AttrFloat(ctx.attrs, 1))),
        nesterov(AttrBool(ctx.attrs, 2)) {}
  // Written with selects and unconditional stores (accumulation unchanged when momentum is 0),
  // so the loop vectorizes.
  C operator()(int64_t i, C v, C g) const {
    const C old = static_cast<C>(a[i]);
    const C ai = static_cast<C>(stat[i]) > C(0) ? g : old * m + g * keep;
    a[i] = static_cast<T>(m > C(0) ? ai : old);
    stat[i] = static_cast<T>(C(0));
    const C step = m > C(0) ? (nesterov ? g + ai * m : ai) : g;
    return v - step * lr;
  }
};

void ApplySGDKernel(KernelContext& ctx) { RunUpdate<SGDStep>(ctx, 4); }

// ---- apply_adam(variable, m, v, learning_rate, gradient, c1, c2, decay) ----
// One rule for Adam, AdamW and AdamWeightDecay (the optimizer picks the scalars):
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  n = nesterov ? b1 m + (1 - b1) g : m
//   variable = variable * (1 - decay) - lr * (n c1) / (sqrt(v c2) + eps)

std::vector<TensorMeta> InferApplyAdam(const OpDef& def, const std::vector<TensorMeta>& in,
                                       const Attrs&) {
  CheckFloating(def, in);
  CheckUpdated(def, in, {1, 2}, 4);
  CheckScalars(def, in, {3, 5, 6, 7});
  return {in[0]};
}

template <typename T>
struct AdamStep {
  using C = compute_t<T>;
  T *m1, *m2;
  C lr, c1, c2, keep, b1, b2, eps;
  bool nesterov;
  explicit AdamStep(KernelContext& ctx)
      : m1(State<T>(ctx, 1)),
        m2(State<T>(ctx, 2)),
        lr(static_cast<C>(ScalarValue(ctx.inputs[3]))),
        c1(static_cast<C>(ScalarValue(ctx.inputs[5]))),
        c2(static_cast<C>(ScalarValue(ctx.inputs[6]))),
        keep(static_cast<C>(1.0 - ScalarValue(ctx.inputs[7]))),
        b1(static_cast<C>(AttrFloat(ctx.attrs, 0))),
        b2(static_cast<C>(AttrFloat(ctx.attrs, 1))),
        eps(static_cast<C>(AttrFloat(ctx.attrs, 2))),
        nesterov(AttrBool(ctx.attrs, 3)) {}
  C operator()(int64_t i, C v, C g) const {
    const C mi = static_cast<C>(m1[i]) * b1 + g * (C(1) - b1);
    const C vi = static_cast<C>(m2[i]) * b2 + g * g * (C(1) - b2);
    m1[i] = static_cast<T>(mi);
    m2[i] = static_cast<T>(vi);
    const C n = nesterov ? mi * b1 + g * (C(1) - b1) : mi;
    return v * keep - lr * (n * c1) / (std::sqrt(vi * c2) + eps);
  }
};

void ApplyAdamKernel(KernelContext& ctx) { RunUpdate<AdamStep>(ctx, 4); }

// ---- cached_cast(x) {dtype}: cast, served from x's derived copy when it is current ----

std::vector<TensorMeta> InferCachedCast(const OpDef& def, const std::vector<TensorMeta>& in,
                                        const Attrs& attrs) {
  const DType to = AttrDType(attrs, 0);
  KILN_CHECK(IsFloating(in[0].dtype) && IsFloating(to), Type, def.name,
             ": casts a floating tensor to a floating type, got ", DTypeName(in[0].dtype), " to ",
             DTypeName(to));
  KILN_CHECK(in[0].dtype != to, Type, def.name, ": the tensor is already ", DTypeName(to));
  return {TensorMeta{to, in[0].shape}};
}

// The result may be the cached tensor itself: it is never written in place (the executor
// reuses only buffers nothing else holds) and an update stores a new one instead of writing it.
void CachedCastKernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const DType to = AttrDType(ctx.attrs, 0);
  auto made = cpu::DerivedLookup(x, {cpu::kLowPrecisionCopyTag, static_cast<int64_t>(to)},
                                 [&] { return std::make_shared<Tensor>(x.To(to)); });
  ctx.outputs = {made ? *std::static_pointer_cast<Tensor>(made) : x.To(to)};
}

std::vector<GradVar> CachedCastGrad(GradBuilder& g) {
  return {CastTo(g, g.out_grad(0), g.meta(g.input(0)).dtype)};
}

OpDef Update(OpKind kind, std::vector<const char*> inputs, std::vector<int> mutated, InferFn infer,
             KernelFn kernel) {
  OpDef def;
  def.kind = kind;
  def.inputs = std::move(inputs);
  def.infer = infer;
  def.kernel = kernel;
  def.grad = NotDifferentiable;  // an update, not a function of its inputs to differentiate
  def.allocates_outputs = true;
  def.is_view = true;
  def.mutated_inputs = std::move(mutated);
  return def;
}

}  // namespace

void RegisterOptimOps(OpRegistry& r) {
  OpDef momentum = Update(OpKind::ApplyMomentum,
                          {"variable", "accumulation", "learning_rate", "gradient", "momentum"},
                          {0, 1}, InferApplyMomentum, ApplyMomentumKernel);
  momentum.attrs = {{"use_nesterov", false}};
  r.Add(std::move(momentum));
  OpDef sgd =
      Update(OpKind::ApplySGD, {"variable", "accumulation", "stat", "learning_rate", "gradient"},
             {0, 1, 2}, InferApplySGD, ApplySGDKernel);
  sgd.attrs = {{"momentum", 0.0}, {"dampening", 0.0}, {"nesterov", false}};
  r.Add(std::move(sgd));
  OpDef adam = Update(OpKind::ApplyAdam,
                      {"variable", "m", "v", "learning_rate", "gradient", "c1", "c2", "decay"},
                      {0, 1, 2}, InferApplyAdam, ApplyAdamKernel);
  adam.attrs = {{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"nesterov", false}};
  r.Add(std::move(adam));
  OpDef cached;
  cached.kind = OpKind::CachedCast;
  cached.inputs = {"x"};
  cached.attrs = {{"dtype", DType::BFloat16}};
  cached.infer = InferCachedCast;
  cached.kernel = CachedCastKernel;
  cached.grad = CachedCastGrad;
  cached.allocates_outputs = true;
  r.Add(std::move(cached));
}

}  // namespace kiln
