// optim.cc - fused, in-place optimizer updates (MindSpore's ApplyMomentum), one pass per tensor.
//
// An optimizer step written with elementwise ops reads and writes each parameter-sized tensor
// six times (scale, add, assign, scale, subtract, assign); the fused kernel does it once, which
// matters because parameters are the largest tensors of a training step.
#include "core/error.h"
#include "core/parallel.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln {
namespace {

// inputs: variable, accumulation, learning_rate, gradient, momentum; attrs: use_nesterov
std::vector<TensorMeta> InferApplyMomentum(const OpDef& def, const std::vector<TensorMeta>& in,
                                           const Attrs&) {
  const TensorMeta &var = in[0], &accum = in[1], &lr = in[2], &grad = in[3], &mom = in[4];
  for (const TensorMeta* m : {&var, &accum, &lr, &grad, &mom})
    KILN_CHECK(IsFloating(m->dtype), Type, def.name, ": expected floating-point tensors, got ",
               DTypeName(m->dtype));
  KILN_CHECK(var.shape == accum.shape && var.shape == grad.shape, Value, def.name, ": variable ",
             ShapeStr(var.shape), ", accumulation ", ShapeStr(accum.shape), " and gradient ",
             ShapeStr(grad.shape), " must have one shape");
  KILN_CHECK(var.dtype == accum.dtype && var.dtype == grad.dtype, Type, def.name,
             ": variable, accumulation and gradient must share a dtype, got ", DTypeName(var.dtype),
             ", ", DTypeName(accum.dtype), ", ", DTypeName(grad.dtype));
  KILN_CHECK(NumElements(lr.shape) == 1 && NumElements(mom.shape) == 1, Value, def.name,
             ": learning_rate and momentum must be scalars, got ", ShapeStr(lr.shape), " and ",
             ShapeStr(mom.shape));
  return {var};
}

double ScalarValue(const Tensor& t) { return *t.To(DType::Float64).Contiguous().data<double>(); }

void ApplyMomentumKernel(KernelContext& ctx) {
  const Tensor &var = ctx.inputs[0], &accum = ctx.inputs[1];
  KILN_CHECK(var.is_contiguous() && accum.is_contiguous(), Value, ctx.def.name,
             ": variable and accumulation must be contiguous (Parameters always are)");
  const Tensor grad = ctx.inputs[3].Contiguous();
  const double lr = ScalarValue(ctx.inputs[2]), momentum = ScalarValue(ctx.inputs[4]);
  const bool nesterov = AttrBool(ctx.attrs, 0);
  DispatchDType(var.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      using C = compute_t<T>;
      T* v = var.data<T>();
      T* a = accum.data<T>();
      const T* g = grad.data<T>();
      const C lr_c = static_cast<C>(lr), m_c = static_cast<C>(momentum);
      ParallelFor(var.numel(), 16384, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const C gi = static_cast<C>(g[i]);
          const C ai = static_cast<C>(a[i]) * m_c + gi;
          a[i] = static_cast<T>(ai);
          const C step = nesterov ? gi + ai * m_c : ai;
          v[i] = static_cast<T>(static_cast<C>(v[i]) - lr_c * step);
        }
      });
    }
  });
  ctx.outputs = {var.AsStrided(var.shape(), var.strides(), var.offset())};
}

}  // namespace

void RegisterOptimOps(OpRegistry& r) {
  OpDef def;
  def.kind = OpKind::ApplyMomentum;
  def.inputs = {"variable", "accumulation", "learning_rate", "gradient", "momentum"};
  def.attrs = {{"use_nesterov", false}};
  def.infer = InferApplyMomentum;
  def.kernel = ApplyMomentumKernel;
  def.grad = NotDifferentiable;  // an update, not a function of its inputs to differentiate
  def.allocates_outputs = true;
  def.is_view = true;
  def.mutated_inputs = {0, 1};
  r.Add(std::move(def));
}

}  // namespace kiln
