// creation.cc - tensors made from attributes alone: fill, arange, uniform and normal samples.
//
// Random ops draw from a local engine seeded by the op's `seed` attribute, or by the global
// generator (NextKernelSeed) when it is None, so results depend only on set_seed and call order.
// Samples come from the engine's raw bits (not std:: distributions, whose output differs between
// standard libraries), so a seed gives the same values everywhere.
#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "core/random.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/vector_libm.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln {
namespace {

OpDef MakeOp(OpKind kind, std::vector<AttrSpec> attrs, InferFn infer, KernelFn kernel) {
  OpDef def;
  def.kind = kind;
  def.attrs = std::move(attrs);
  def.infer = infer;
  def.kernel = kernel;
  def.grad = NotDifferentiable;  // no tensor inputs: nothing to differentiate
  return def;
}

Shape CheckedShape(const Attrs& attrs, size_t i, const char* op) {
  const Shape& shape = AttrInts(attrs, i);
  for (int64_t d : shape)
    KILN_CHECK(d >= 0, Value, op, ": shape dimensions must be non-negative, got ", d);
  return shape;
}

// Writes fn(i) converted to the output dtype at every position of a fresh contiguous tensor.
template <typename Fn>
void Generate(const Tensor& out, Fn&& fn) {
  DispatchDType(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i) o[i] = cpu::Convert<T>(fn(i));
  });
}

// ---- fill(shape, value, dtype)

std::vector<TensorMeta> InferFill(const OpDef& def, const std::vector<TensorMeta>&,
                                  const Attrs& attrs) {
  return {TensorMeta{AttrDType(attrs, 2), CheckedShape(attrs, 0, def.name)}};
}

// Writes attribute `value_attr` into every element of out.
void FillWith(const Tensor& out, const Attrs& attrs, size_t value_attr) {
  // Integer values stay integers so int64 fills beyond 2**53 are exact.
  if (auto* v = std::get_if<int64_t>(&attrs[value_attr])) {
    int64_t value = *v;
    Generate(out, [value](int64_t) { return value; });
  } else {
    double value = AttrFloat(attrs, value_attr);
    Generate(out, [value](int64_t) { return value; });
  }
}

void FillKernel(KernelContext& ctx) { FillWith(ctx.outputs[0], ctx.attrs, 1); }

// ---- fill_like(like; value, dtype): like's shape as the graph runs (a graph compiled for
// dimensions of any size knows it only then), filled with value

std::vector<TensorMeta> InferFillLike(const OpDef&, const std::vector<TensorMeta>& in,
                                      const Attrs& attrs) {
  return {TensorMeta{AttrDType(attrs, 1), in[0].shape}};
}

void FillLikeKernel(KernelContext& ctx) { FillWith(ctx.outputs[0], ctx.attrs, 0); }

// The output does not depend on like's values: no gradient reaches it.
std::vector<GradVar> FillLikeGrad(GradBuilder&) { return {GradVar{}}; }

// ---- arange(start, end, step, dtype): NumPy's length ceil((end - start) / step)

bool AllInts(const Attrs& attrs) {
  for (size_t i = 0; i < 3; ++i)
    if (!std::holds_alternative<int64_t>(attrs[i])) return false;
  return true;
}

int64_t ArangeLength(const Attrs& attrs, const char* op) {
  static const char* const kNames[] = {"start", "end", "step"};
  for (size_t i = 0; i < 3; ++i)
    KILN_CHECK(std::holds_alternative<int64_t>(attrs[i]) ||
                   std::holds_alternative<double>(attrs[i]) ||
                   std::holds_alternative<bool>(attrs[i]),
               Type, op, ": attribute '", kNames[i], "' must be an int or a float");
  if (AllInts(attrs)) {
    int64_t start = AttrInt(attrs, 0), end = AttrInt(attrs, 1), step = AttrInt(attrs, 2);
    KILN_CHECK(step != 0, Value, op, ": step must not be zero");
    int64_t span = end - start;
    // Ceiling division that rounds toward +inf for either sign of step.
    int64_t n = span / step + ((span % step != 0) && ((span < 0) == (step < 0)) ? 1 : 0);
    return std::max<int64_t>(n, 0);
  }
  double start = AttrFloat(attrs, 0), end = AttrFloat(attrs, 1), step = AttrFloat(attrs, 2);
  KILN_CHECK(step != 0, Value, op, ": step must not be zero");
  double n = std::ceil((end - start) / step);
  KILN_CHECK(std::isfinite(n), Value, op, ": start, end and step must be finite");
  return n > 0 ? static_cast<int64_t>(n) : 0;
}

std::vector<TensorMeta> InferArange(const OpDef& def, const std::vector<TensorMeta>&,
                                    const Attrs& attrs) {
  return {TensorMeta{AttrDType(attrs, 3), Shape{ArangeLength(attrs, def.name)}}};
}

void ArangeKernel(KernelContext& ctx) {
  const Attrs& a = ctx.attrs;
  if (AllInts(a)) {
    int64_t start = AttrInt(a, 0), step = AttrInt(a, 2);
    Generate(ctx.outputs[0], [=](int64_t i) { return start + i * step; });
  } else {
    double start = AttrFloat(a, 0), step = AttrFloat(a, 2);
    Generate(ctx.outputs[0], [=](int64_t i) { return start + static_cast<double>(i) * step; });
  }
}

// ---- uniform_real / standard_normal

class Sampler {
 public:
  explicit Sampler(const Attrs& attrs, size_t seed_attr)
      : engine_(AttrIsNone(attrs, seed_attr) ? NextKernelSeed()
                                             : static_cast<uint64_t>(AttrInt(attrs, seed_attr))) {}
  // A double in [0, 1) from the top 53 bits.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  static constexpr int64_t kChunk = 512;  // Normals' most values per call (even)
  // m <= kChunk standard normal values by Box-Muller: each pair of uniforms (u1, u2), drawn in
  // that order, gives r cos(theta) then r sin(theta). The transforms run over a whole chunk in
  // loops that vectorize through glibc's vector log, cos and sin (vector_libm.h): a call of each
  // per value made 2^20 normals take 21 ms. The loops always run the full chunk (the pairs not
  // drawn are u1 = 1, theta = 0), so no value falls in a scalar remainder loop, whose library
  // functions may round differently: a value depends only on the seed and its index. Only the last
  // chunk may be odd; its last sine is dropped.
  void Normals(double* out, int64_t m) {
    constexpr int64_t kPairs = kChunk / 2;
    alignas(64) double u1[kPairs], theta[kPairs], r[kPairs];
    const int64_t pairs = (m + 1) / 2;
    for (int64_t k = 0; k < kPairs; ++k) {
      const bool drawn = k < pairs;
      u1[k] = drawn ? 1.0 - Uniform() : 1.0;  // in (0, 1]: the log is finite
      theta[k] = drawn ? 2.0 * M_PI * Uniform() : 0.0;
    }
    for (int64_t k = 0; k < kPairs; ++k) r[k] = std::sqrt(-2.0 * cpu::VecLog(u1[k]));
    for (int64_t k = 0; k < kPairs; ++k) u1[k] = r[k] * cpu::VecCos(theta[k]);
    for (int64_t k = 0; k < kPairs; ++k) theta[k] = r[k] * cpu::VecSin(theta[k]);
    for (int64_t k = 0; k < m / 2; ++k) {
      out[2 * k] = u1[k];
      out[2 * k + 1] = theta[k];
    }
    if (m % 2) out[m - 1] = u1[pairs - 1];
  }

 private:
  std::mt19937_64 engine_;
};

// uniform_real / standard_normal(like?; shape, dtype, ...): `like`, where given, gives the shape as
// the graph runs (rand_like of a tensor with a dimension of any size).
std::vector<TensorMeta> InferRandom(const OpDef& def, const std::vector<TensorMeta>& in,
                                    const Attrs& attrs) {
  DType dtype = AttrDType(attrs, 1);
  KILN_CHECK(IsFloating(dtype), Type, def.name, ": dtype must be a floating type, got ",
             DTypeName(dtype));
  if (!in.empty() && in[0].present) return {TensorMeta{dtype, in[0].shape}};
  return {TensorMeta{dtype, CheckedShape(attrs, 0, def.name)}};
}

void UniformRealKernel(KernelContext& ctx) {
  double low = AttrFloat(ctx.attrs, 2), high = AttrFloat(ctx.attrs, 3);
  KILN_CHECK(low <= high, Value, ctx.def.name, ": low (", low, ") must not exceed high (", high,
             ")");
  Sampler sampler(ctx.attrs, 4);
  const Tensor& out = ctx.outputs[0];
  DispatchDType(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i) {
      double v = low + (high - low) * sampler.Uniform();
      T t = cpu::Convert<T>(v);
      // Rounding to a narrow type can reach `high`; keep the interval half-open.
      if (low < high && static_cast<double>(static_cast<compute_t<T>>(t)) >= high)
        t = cpu::Convert<T>(low);
      o[i] = t;
    }
  });
}

void StandardNormalKernel(KernelContext& ctx) {
  double mean = AttrFloat(ctx.attrs, 2), stddev = AttrFloat(ctx.attrs, 3);
  KILN_CHECK(stddev >= 0, Value, ctx.def.name, ": std must be non-negative, got ", stddev);
  Sampler sampler(ctx.attrs, 4);
  const Tensor& out = ctx.outputs[0];
  DispatchDType(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    double values[Sampler::kChunk];
    for (int64_t i0 = 0, n = out.numel(); i0 < n; i0 += Sampler::kChunk) {
      const int64_t m = std::min(Sampler::kChunk, n - i0);
      sampler.Normals(values, m);
      for (int64_t i = 0; i < m; ++i) o[i0 + i] = cpu::Convert<T>(mean + stddev * values[i]);
    }
  });
}

}  // namespace

void RegisterCreationOps(OpRegistry& r) {
  const AttrValue none = std::monostate{};
  r.Add(MakeOp(OpKind::Fill, {{"shape", Shape{}}, {"value", 0.0}, {"dtype", DType::Float32}},
               InferFill, FillKernel));
  OpDef fill_like = MakeOp(OpKind::FillLike, {{"value", 0.0}, {"dtype", DType::Float32}},
                           InferFillLike, FillLikeKernel);
  fill_like.inputs = {"like"};
  fill_like.grad = FillLikeGrad;
  r.Add(GradReads(std::move(fill_like), {}, {}));
  // start, end and step are ints or floats (None defaults accept either; inference checks).
  r.Add(MakeOp(OpKind::Arange,
               {{"start", none}, {"end", none}, {"step", none}, {"dtype", DType::Int64}},
               InferArange, ArangeKernel));
  OpDef uniform = MakeOp(
      OpKind::UniformReal,
      {{"shape", Shape{}}, {"dtype", DType::Float32}, {"low", 0.0}, {"high", 1.0}, {"seed", none}},
      InferRandom, UniformRealKernel);
  uniform.inputs = {"like?"};
  uniform.is_random = true;
  r.Add(std::move(uniform));
  OpDef normal = MakeOp(
      OpKind::StandardNormal,
      {{"shape", Shape{}}, {"dtype", DType::Float32}, {"mean", 0.0}, {"std", 1.0}, {"seed", none}},
      InferRandom, StandardNormalKernel);
  normal.inputs = {"like?"};
  normal.is_random = true;
  r.Add(std::move(normal));
}

}  // namespace kiln
