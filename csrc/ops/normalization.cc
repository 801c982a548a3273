// normalization.cc - softmax, log-softmax, layer norm, batch norm and dropout (their backward
// kernels are in normalization_grad.cc).
//
// All compute in compute_t<T> (float for 16-bit floats) with statistics accumulated in double,
// so results are stable for long rows and large offsets. The statistics the gradients need
// (layer norm's mean/rstd, batch norm's saved mean/invstd) come out in the compute type:
// float32 for float16/bfloat16 inputs, the input dtype otherwise.
#include "kernels/cpu/normalization.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "core/random.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/reduce.h"
#include "ops/normalization_internal.h"

namespace kiln {
namespace norm {

// A per-channel tensor as doubles (`fill` when omitted).
std::vector<double> LoadChannels(const Tensor& t, int64_t channels, double fill) {
  std::vector<double> values(channels, fill);
  if (!t.defined()) return values;
  Tensor d = t.To(DType::Float64).Contiguous();
  const double* p = d.data<double>();
  std::copy(p, p + channels, values.begin());
  return values;
}

// Writes doubles into a 1-d tensor of any float dtype and stride (the running statistics).
void StoreChannels(const Tensor& t, const std::vector<double>& values) {
  DispatchDType(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    const int64_t stride = t.strides()[0];
    for (size_t c = 0; c < values.size(); ++c) p[c * stride] = cpu::Convert<T>(values[c]);
  });
}

}  // namespace norm

namespace {

using namespace norm;  // NOLINT: this file is the normalization family

// ---- Softmax / LogSoftmax over one axis

int64_t SoftmaxAxis(const OpDef& def, const Shape& shape, int64_t axis) {
  const int64_t rank = std::max<int64_t>(static_cast<int64_t>(shape.size()), 1);
  KILN_CHECK(axis >= -rank && axis < rank, Axis, def.name, ": axis ", axis,
             " is out of range for input of shape ", ShapeStr(shape));
  return axis < 0 ? axis + rank : axis;
}

std::vector<TensorMeta> InferSoftmax(const OpDef& def, const std::vector<TensorMeta>& in,
                                     const Attrs& attrs) {
  RequireFloating(in[0], def.name);
  SoftmaxAxis(def, in[0].shape, AttrInt(attrs, 0));
  return {TensorMeta{in[0].dtype, in[0].shape}};
}

// y = exp(x - max) / sum, or (x - max) - log(sum), over r in an [outer, reduce, inner] block.
template <typename T, bool kLog>
void SoftmaxBlock(const T* x, T* y, const cpu::ReduceShape& s) {
  using C = compute_t<T>;
  const int64_t R = s.reduce, I = s.inner;
  constexpr int64_t kB = cpu::kReduceBlock;
  const int64_t blocks = (I + kB - 1) / kB;
  const int64_t grain = std::max<int64_t>(1, cpu::kParallelGrain / (R * std::min(I, kB)));
  ParallelFor(s.outer * blocks, grain, [&](int64_t begin, int64_t end) {
    C mx[kB], ex[kB];
    double sum[kB];
    int32_t nan[kB];
    for (int64_t task = begin; task < end; ++task) {
      const int64_t a = task / blocks, j0 = (task % blocks) * kB, n = std::min(kB, I - j0);
      const T* in = x + a * R * I + j0;
      T* out = y + a * R * I + j0;
      for (int64_t j = 0; j < n; ++j) {
        mx[j] = -std::numeric_limits<C>::infinity();
        sum[j] = 0;
        nan[j] = 0;
      }
      // Plain selects plus a NaN flag, as in cpu::RunExtremum, so each pass vectorizes.
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < n; ++j) {
          const C v = static_cast<C>(in[r * I + j]);
          mx[j] = mx[j] >= v ? mx[j] : v;
          nan[j] |= v != v;
        }
      for (int64_t j = 0; j < n; ++j)
        if (nan[j]) mx[j] = std::numeric_limits<C>::quiet_NaN();  // the whole slice is NaN
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t j = 0; j < n; ++j)
          ex[j] = cpu::ExpShifted(static_cast<C>(in[r * I + j]) - mx[j]);
        for (int64_t j = 0; j < n; ++j) sum[j] += ex[j];
      }
      for (int64_t j = 0; j < n; ++j) sum[j] = kLog ? std::log(sum[j]) : 1.0 / sum[j];
      for (int64_t j = 0; j < n; ++j) ex[j] = static_cast<C>(sum[j]);
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < n; ++j) {
          const C shifted = static_cast<C>(in[r * I + j]) - mx[j];
          out[r * I + j] =
              cpu::Convert<T>(kLog ? shifted - ex[j] : cpu::ExpShifted(shifted) * ex[j]);
        }
    }
  });
}

// The common case, softmax over the last (contiguous) axis: one row per output row. The
// exponentials are computed once, into the output itself when it has the compute type (a
// float buffer for 16-bit outputs, which could not hold them at full precision).
template <typename T, bool kLog>
void SoftmaxRows(const T* x, T* y, const cpu::ReduceShape& s) {
  using C = compute_t<T>;
  constexpr bool kInPlace = std::is_same_v<T, C>;
  const int64_t R = s.reduce;
  const int64_t grain = std::max<int64_t>(1, cpu::kParallelGrain / R);
  ParallelFor(s.outer, grain, [&](int64_t begin, int64_t end) {
    std::vector<C> buffer(kInPlace ? 0 : R);
    for (int64_t a = begin; a < end; ++a) {
      const T* in = x + a * R;
      T* out = y + a * R;
      C* e = buffer.data();
      if constexpr (kInPlace) e = out;
      const C m = cpu::RunExtremum<T, true>(in, 0, R);
      for (int64_t r = 0; r < R; ++r) e[r] = cpu::ExpShifted(static_cast<C>(in[r]) - m);
      const double sum = RowSum(e, R, [](C v) { return static_cast<double>(v); });
      if constexpr (kLog) {
        const C log_sum = static_cast<C>(std::log(sum));
        for (int64_t r = 0; r < R; ++r)
          out[r] = cpu::Convert<T>((static_cast<C>(in[r]) - m) - log_sum);
      } else {
        const C inv = static_cast<C>(1.0 / sum);
        for (int64_t r = 0; r < R; ++r) out[r] = cpu::Convert<T>(e[r] * inv);
      }
    }
  });
}

template <bool kLog>
void SoftmaxKernel(KernelContext& ctx) {
  const Tensor& input = ctx.inputs[0];
  if (input.numel() == 0) return;
  const int64_t axis = SoftmaxAxis(ctx.def, input.shape(), AttrInt(ctx.attrs, 0));
  std::vector<bool> mask(input.ndim(), false);
  if (input.ndim() > 0) mask[axis] = true;
  cpu::ReduceShape s;
  // One axis is always an adjacent run, so x keeps the input's (and output's) C order.
  Tensor x = cpu::PrepareReduce(input, mask, &s);
  DispatchDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!kFloatType<T>) {
      Throw(ErrorKind::Type, ctx.def.name, ": expected a floating-point tensor, got ",
            DTypeName(x.dtype()));
    } else if (s.inner == 1) {
      SoftmaxRows<T, kLog>(x.data<T>(), ctx.outputs[0].data<T>(), s);
    } else {
      SoftmaxBlock<T, kLog>(x.data<T>(), ctx.outputs[0].data<T>(), s);
    }
  });
}

// ---- LayerNorm: normalizes each row over the dims from begin_norm_axis on

std::vector<TensorMeta> InferLayerNorm(const OpDef& def, const std::vector<TensorMeta>& in,
                                       const Attrs& attrs) {
  const Shape& shape = in[0].shape;
  const int64_t ndim = static_cast<int64_t>(shape.size());
  RequireFloating(in[0], def.name);
  KILN_CHECK(ndim >= 1, Value, def.name,
             ": expected an input with at least one dimension, got shape ", ShapeStr(shape));
  int64_t axis = AttrInt(attrs, 0);
  KILN_CHECK(axis >= -ndim && axis < ndim, Axis, def.name, ": begin_norm_axis ", axis,
             " is out of range for input of shape ", ShapeStr(shape));
  if (axis < 0) axis += ndim;
  Shape normalized(shape.begin() + axis, shape.end());
  for (size_t i = 1; i < 3; ++i) {
    if (!in[i].present) continue;
    KILN_CHECK(ShapesMatch(in[i].shape, normalized), Value, def.name, ": ", InputName(def, i),
               " of shape ", ShapeStr(in[i].shape), " does not match the normalized shape ",
               ShapeStr(normalized), " of input shape ", ShapeStr(shape));
  }
  Shape stat(shape.begin(), shape.begin() + axis);
  stat.resize(ndim, 1);
  DType sd = StatDType(in[0].dtype);
  return {TensorMeta{in[0].dtype, shape}, TensorMeta{sd, stat}, TensorMeta{sd, stat}};
}

void LayerNormKernel(KernelContext& ctx) {
  const Tensor& input = ctx.inputs[0];
  int64_t axis = AttrInt(ctx.attrs, 0);
  if (axis < 0) axis += input.ndim();
  int64_t rows = 1, n = 1;
  for (int64_t d = 0; d < input.ndim(); ++d) (d < axis ? rows : n) *= input.dim(d);
  const double eps = AttrFloat(ctx.attrs, 1);
  Tensor x = input.Contiguous();
  Tensor w = ctx.inputs[1].defined() ? ctx.inputs[1].Contiguous() : Tensor();
  Tensor b = ctx.inputs[2].defined() ? ctx.inputs[2].Contiguous() : Tensor();
  DispatchDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (!kFloatType<T>) {
      Throw(ErrorKind::Type, ctx.def.name, ": expected a floating-point tensor");
    } else {
      const T* xp = x.data<T>();
      const T* wp = w.defined() ? w.data<T>() : nullptr;
      const T* bp = b.defined() ? b.data<T>() : nullptr;
      T* yp = ctx.outputs[0].data<T>();
      C* mean_p = ctx.outputs[1].data<C>();  // StatDType(T) is compute_t<T>
      C* rstd_p = ctx.outputs[2].data<C>();
      const int64_t grain = std::max<int64_t>(1, cpu::kParallelGrain / std::max<int64_t>(n, 1));
      ParallelFor(rows, grain, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const T* in = xp + row * n;
          T* out = yp + row * n;
          // Two passes (mean, then squared deviations): no cancellation for large offsets.
          const double mu = RowSum(in, n, [](T v) { return static_cast<double>(v); }) / n;
          const double var = RowSum(in, n,
                                    [mu](T v) {
                                      double d = static_cast<double>(v) - mu;
                                      return d * d;
                                    }) /
                             n;
          const double rs = 1.0 / std::sqrt(var + eps);
          mean_p[row] = static_cast<C>(mu);
          rstd_p[row] = static_cast<C>(rs);
          const C m = static_cast<C>(mu), r = static_cast<C>(rs);
          for (int64_t i = 0; i < n; ++i) {
            C v = (static_cast<C>(in[i]) - m) * r;
            if (wp) v *= static_cast<C>(wp[i]);
            if (bp) v += static_cast<C>(bp[i]);
            out[i] = cpu::Convert<T>(v);
          }
        }
      });
    }
  });
}

// ---- BatchNorm over (N, C, ...): statistics per channel (axis 1)

std::vector<TensorMeta> InferBatchNorm(const OpDef& def, const std::vector<TensorMeta>& in,
                                       const Attrs& attrs) {
  const Shape& shape = in[0].shape;
  RequireFloating(in[0], def.name);
  KILN_CHECK(shape.size() >= 2, Value, def.name,
             ": expected an input of shape (N, C) or (N, C, ...), got shape ", ShapeStr(shape));
  const Shape channels{shape[1]};
  for (size_t i = 1; i < 5; ++i) {
    if (!in[i].present) continue;
    KILN_CHECK(IsFloating(in[i].dtype), Type, def.name, ": ", InputName(def, i),
               " must be a floating-point tensor, got ", DTypeName(in[i].dtype));
    KILN_CHECK(ShapesMatch(in[i].shape, channels), Value, def.name, ": ", InputName(def, i),
               " of shape ", ShapeStr(in[i].shape), " does not match the ", shape[1],
               " channels of input shape ", ShapeStr(shape));
  }
  KILN_CHECK(in[1].present == in[2].present, Value, def.name,
             ": running_mean and running_var must be given together");
  const bool training = AttrBool(attrs, 0);
  KILN_CHECK(training || in[1].present, Value, def.name,
             ": running_mean and running_var are required when training=False");
  if (training) {
    // The unbiased variance of one value is undefined (PyTorch and MindSpore refuse it too).
    bool known = true;
    int64_t count = shape[0];
    for (size_t d = 2; d < shape.size(); ++d) count *= shape[d];
    for (int64_t d : shape) known = known && d >= 0;
    KILN_CHECK(!known || count != 1, Value, def.name,
               ": expected more than 1 value per channel when training, got input of shape ",
               ShapeStr(shape));
  }
  DType sd = StatDType(in[0].dtype);
  return {TensorMeta{in[0].dtype, shape}, TensorMeta{sd, channels}, TensorMeta{sd, channels}};
}

void BatchNormKernel(KernelContext& ctx) {
  const Tensor& input = ctx.inputs[0];
  const Tensor &running_mean = ctx.inputs[1], &running_var = ctx.inputs[2];
  const bool training = AttrBool(ctx.attrs, 0);
  const double momentum = AttrFloat(ctx.attrs, 1), eps = AttrFloat(ctx.attrs, 2);
  const int64_t batch = input.dim(0), channels = input.dim(1);
  int64_t spatial = 1;
  for (int64_t d = 2; d < input.ndim(); ++d) spatial *= input.dim(d);
  const int64_t count = batch * spatial;
  Tensor x = input.Contiguous();

  std::vector<double> mean(channels), var(channels);
  DispatchDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kFloatType<T>) {
      const T* xp = x.data<T>();
      if (!training) return;
      const int64_t grain = std::max<int64_t>(1, cpu::kParallelGrain / std::max<int64_t>(count, 1));
      ParallelFor(channels, grain, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) {
          double sum = 0, sq = 0;
          for (int64_t b = 0; b < batch; ++b)
            sum += RowSum(xp + (b * channels + c) * spatial, spatial,
                          [](T v) { return static_cast<double>(v); });
          const double mu = sum / count;
          for (int64_t b = 0; b < batch; ++b)
            sq += RowSum(xp + (b * channels + c) * spatial, spatial, [mu](T v) {
              double d = static_cast<double>(v) - mu;
              return d * d;
            });
          mean[c] = mu;
          var[c] = sq;  // the sum of squared deviations; divided below
        }
      });
    }
  });
  if (training) {
    std::vector<double> unbiased(channels);
    for (int64_t c = 0; c < channels; ++c) {
      unbiased[c] = var[c] / static_cast<double>(count - 1);
      var[c] /= static_cast<double>(count);
    }
    if (running_mean.defined() && count > 0) {
      // running = (1 - momentum) * running + momentum * batch, with the unbiased variance.
      std::vector<double> rm = LoadChannels(running_mean, channels, 0);
      std::vector<double> rv = LoadChannels(running_var, channels, 1);
      for (int64_t c = 0; c < channels; ++c) {
        rm[c] = (1 - momentum) * rm[c] + momentum * mean[c];
        rv[c] = (1 - momentum) * rv[c] + momentum * unbiased[c];
      }
      StoreChannels(running_mean, rm);
      StoreChannels(running_var, rv);
    }
  } else {
    mean = LoadChannels(running_mean, channels, 0);
    var = LoadChannels(running_var, channels, 1);
  }
  std::vector<double> weight = LoadChannels(ctx.inputs[3], channels, 1);
  std::vector<double> bias = LoadChannels(ctx.inputs[4], channels, 0);
  std::vector<double> invstd(channels), alpha(channels), beta(channels);
  for (int64_t c = 0; c < channels; ++c) {
    invstd[c] = 1.0 / std::sqrt(var[c] + eps);
    alpha[c] = invstd[c] * weight[c];  // y = x * alpha + beta folds the affine transform in
    beta[c] = bias[c] - mean[c] * alpha[c];
  }
  StoreChannels(ctx.outputs[1], mean);
  StoreChannels(ctx.outputs[2], invstd);

  DispatchDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (kFloatType<T>) {
      const T* xp = x.data<T>();
      T* yp = ctx.outputs[0].data<T>();
      const int64_t grain =
          std::max<int64_t>(1, cpu::kParallelGrain / std::max<int64_t>(spatial, 1));
      ParallelFor(batch * channels, grain, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const int64_t c = row % channels;
          const C a = static_cast<C>(alpha[c]), b = static_cast<C>(beta[c]);
          const T* in = xp + row * spatial;
          T* out = yp + row * spatial;
          for (int64_t i = 0; i < spatial; ++i)
            out[i] = cpu::Convert<T>(static_cast<C>(in[i]) * a + b);
        }
      });
    }
  });
}

// ---- Dropout: a counter-based generator, so results do not depend on the thread count

std::vector<TensorMeta> InferDropout(const OpDef& def, const std::vector<TensorMeta>& in,
                                     const Attrs& attrs) {
  RequireFloating(in[0], def.name);
  const double p = AttrFloat(attrs, 0);
  KILN_CHECK(p >= 0 && p <= 1, Value, def.name, ": p must be in [0, 1], got ", p, " (input shape ",
             ShapeStr(in[0].shape), ")");
  return {TensorMeta{in[0].dtype, in[0].shape}, TensorMeta{in[0].dtype, in[0].shape}};
}

// SplitMix64's output function: draw k of stream `seed` is Mix(seed + k * kGolden).
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
inline uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Parameters by value, not captured references: the compiler then knows the stores cannot
// change them and vectorizes the loop (about 20x faster).
template <typename T>
void DropoutRange(const T* xp, T* yp, T* mp, int64_t begin, int64_t end, uint64_t stream,
                  uint64_t threshold, compute_t<T> keep_value) {
  using C = compute_t<T>;
  for (int64_t i = begin; i < end; ++i) {
    const uint64_t bits = Mix(stream + static_cast<uint64_t>(i >> 1) * kGolden);
    const uint64_t u = (i & 1) ? bits >> 32 : bits & 0xFFFFFFFFu;
    const C m = u >= threshold ? keep_value : C(0);
    mp[i] = cpu::Convert<T>(m);
    yp[i] = cpu::Convert<T>(static_cast<C>(xp[i]) * m);
  }
}

void DropoutKernel(KernelContext& ctx) {
  const double p = AttrFloat(ctx.attrs, 0);
  const uint64_t seed =
      AttrIsNone(ctx.attrs, 1) ? NextKernelSeed() : static_cast<uint64_t>(AttrInt(ctx.attrs, 1));
  const uint64_t stream = Mix(seed + kGolden);
  // Element i is kept when its 32 random bits u satisfy u >= p * 2^32: p = 0 keeps everything,
  // p = 1 (threshold 2^32) drops everything. Draw k serves elements 2k and 2k + 1.
  const uint64_t threshold = static_cast<uint64_t>(std::ceil(p * 4294967296.0));
  const double scale = p < 1 ? 1.0 / (1.0 - p) : 0.0;
  Tensor x = ctx.inputs[0].Contiguous();
  DispatchDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (kFloatType<T>) {
      const T* xp = x.data<T>();
      T* yp = ctx.outputs[0].data<T>();
      T* mp = ctx.outputs[1].data<T>();
      const C keep_value = static_cast<C>(scale);
      ParallelFor(x.numel(), cpu::kParallelGrain, [&](int64_t begin, int64_t end) {
        DropoutRange(xp, yp, mp, begin, end, stream, threshold, keep_value);
      });
    }
  });
}

// ---- Gradient rules

// softmax: y * (dy - sum(dy * y)) over the axis.
std::vector<GradVar> SoftmaxGrad(GradBuilder& g) {
  GradVar y = g.output(0), dy = g.out_grad(0);
  std::vector<int64_t> axes{AttrInt(g.attrs(), 0)};
  GradVar dot = g.Emit1(OpKind::ReduceSum, {Mul(g, dy, y)}, {axes, true, std::monostate{}});
  return {Mul(g, y, Sub(g, dy, dot))};
}

// log_softmax: dy - exp(y) * sum(dy) over the axis.
std::vector<GradVar> LogSoftmaxGrad(GradBuilder& g) {
  GradVar y = g.output(0), dy = g.out_grad(0);
  std::vector<int64_t> axes{AttrInt(g.attrs(), 0)};
  GradVar total = g.Emit1(OpKind::ReduceSum, {dy}, {axes, true, std::monostate{}});
  return {Sub(g, dy, Mul(g, g.Emit1(OpKind::Exp, {y}), total))};
}

// Gradients that reach the saved statistics (mean, and rstd = (var + eps)^-1/2) of a
// normalization over `count` values: d mean/dx = 1/count, d rstd/dx = -rstd^3 (x - mean)/count.
// mean and rstd (and their gradients) are given shaped to broadcast against x.
GradVar AddStatGrads(GradBuilder& g, GradVar dx, GradVar x, GradVar mean, GradVar rstd,
                     GradVar dmean, GradVar drstd, int64_t count) {
  const double inv = 1.0 / static_cast<double>(std::max<int64_t>(count, 1));
  if (dmean.defined()) dx = Add(g, dx, Mul(g, dmean, g.Scalar(inv)));
  if (drstd.defined()) {
    GradVar cube = Mul(g, rstd, Mul(g, rstd, rstd));
    GradVar coef = Mul(g, Mul(g, drstd, cube), g.Scalar(-inv));
    dx = Add(g, dx, Mul(g, coef, Sub(g, x, mean)));
  }
  return dx;
}

std::vector<GradVar> LayerNormGradRule(GradBuilder& g) {
  GradVar x = g.input(0), w = g.input(1);
  const TensorMeta xm = g.meta(x);
  const bool has_w = g.meta(w).present, has_b = g.meta(g.input(2)).present;
  const bool affine = (has_w && g.wants_input_grad(1)) || (has_b && g.wants_input_grad(2));
  const AttrValue axis = g.attrs()[0];
  std::vector<GradVar> outs =
      g.Emit(OpKind::LayerNormGrad,
             {g.out_grad(0), x, g.output(1), g.output(2), has_w ? w : GradVar{}}, {axis, affine});
  std::vector<GradVar> grads(3);
  if (g.wants_input_grad(0)) {
    GradVar dx = outs[0];
    if (g.has_out_grad(1) || g.has_out_grad(2)) {
      const int64_t begin = NormAxis(xm.shape, g.attrs());
      int64_t n = 1;
      for (size_t d = begin; d < xm.shape.size(); ++d) n *= xm.shape[d];
      dx = AddStatGrads(g, dx, x, g.output(1), g.output(2),
                        g.has_out_grad(1) ? g.out_grad(1) : GradVar{},
                        g.has_out_grad(2) ? g.out_grad(2) : GradVar{}, n);
      dx = CastTo(g, dx, xm.dtype);
    }
    grads[0] = dx;
  }
  if (has_w && g.wants_input_grad(1)) grads[1] = ToInput(g, outs[1], 1);
  if (has_b && g.wants_input_grad(2)) grads[2] = ToInput(g, outs[2], 2);
  return grads;
}

// batch_norm: input, weight and bias; the running statistics get no gradient.
std::vector<GradVar> BatchNormGradRule(GradBuilder& g) {
  GradVar x = g.input(0), w = g.input(3);
  const TensorMeta xm = g.meta(x);
  const bool training = AttrBool(g.attrs(), 0);
  const bool has_w = g.meta(w).present, has_b = g.meta(g.input(4)).present;
  const bool affine = (has_w && g.wants_input_grad(3)) || (has_b && g.wants_input_grad(4));
  std::vector<GradVar> outs = g.Emit(
      OpKind::BatchNormGrad, {g.out_grad(0), x, g.output(1), g.output(2), has_w ? w : GradVar{}},
      {training, affine});
  std::vector<GradVar> grads(5);
  if (g.wants_input_grad(0)) {
    GradVar dx = outs[0];
    // In training the saved statistics are the batch's, functions of x; in eval mode they are
    // the running statistics and pass nothing to x.
    if (training && (g.has_out_grad(1) || g.has_out_grad(2))) {
      Shape stat(xm.shape.size(), 1);
      stat[1] = xm.shape[1];
      int64_t count = xm.shape[0];
      for (size_t d = 2; d < xm.shape.size(); ++d) count *= xm.shape[d];
      auto shaped = [&](GradVar v) { return g.Emit1(OpKind::Reshape, {v}, {stat}); };
      dx = AddStatGrads(g, dx, x, shaped(g.output(1)), shaped(g.output(2)),
                        g.has_out_grad(1) ? shaped(g.out_grad(1)) : GradVar{},
                        g.has_out_grad(2) ? shaped(g.out_grad(2)) : GradVar{}, count);
      dx = CastTo(g, dx, xm.dtype);
    }
    grads[0] = dx;
  }
  if (has_w && g.wants_input_grad(3)) grads[3] = ToInput(g, outs[1], 3);
  if (has_b && g.wants_input_grad(4)) grads[4] = ToInput(g, outs[2], 4);
  return grads;
}

// dropout: dy * mask (the mask holds 0 or 1 / (1 - p)).
std::vector<GradVar> DropoutGrad(GradBuilder& g) {
  if (!g.wants_input_grad(0)) return {GradVar{}};
  return {Mul(g, g.out_grad(0), g.output(1))};
}

}  // namespace

void RegisterNormalizationOps(OpRegistry& r) {
  const auto kFloat = Promotion::CommonFloat;
  OpDef softmax = Norm(OpKind::Softmax, {"input"}, InferSoftmax, SoftmaxKernel<false>, kFloat);
  softmax.attrs = {{"axis", int64_t{-1}}};
  softmax.grad = SoftmaxGrad;
  r.Add(GradReads(std::move(softmax), {}, {0}));
  OpDef log_softmax =
      Norm(OpKind::LogSoftmax, {"input"}, InferSoftmax, SoftmaxKernel<true>, kFloat);
  log_softmax.attrs = {{"axis", int64_t{-1}}};
  log_softmax.grad = LogSoftmaxGrad;
  r.Add(GradReads(std::move(log_softmax), {}, {0}));

  OpDef layer_norm = Norm(OpKind::LayerNorm, {"input", "weight?", "bias?"}, InferLayerNorm,
                          LayerNormKernel, kFloat);
  layer_norm.attrs = {{"begin_norm_axis", int64_t{-1}}, {"eps", 1e-5}};
  layer_norm.grad = LayerNormGradRule;
  r.Add(GradReads(std::move(layer_norm), {0, 1}, {1, 2}));  // x, weight, mean, rstd

  // Only the input is promoted: the running statistics are written in place, so they must be
  // the caller's tensors, never promoted copies; the per-channel tensors are read as doubles.
  OpDef batch_norm =
      Norm(OpKind::BatchNorm, {"input", "running_mean?", "running_var?", "weight?", "bias?"},
           InferBatchNorm, BatchNormKernel, kFloat);
  batch_norm.promoted_inputs = {0};
  batch_norm.attrs = {{"training", false}, {"momentum", 0.1}, {"eps", 1e-5}};
  batch_norm.mutated_inputs = {1, 2};
  batch_norm.grad = BatchNormGradRule;
  r.Add(GradReads(std::move(batch_norm), {0, 3}, {1, 2}));  // x, weight, mean, rstd

  OpDef dropout = Norm(OpKind::Dropout, {"input"}, InferDropout, DropoutKernel, Promotion::None);
  dropout.attrs = {{"p", 0.5}, {"seed", std::monostate{}}};
  dropout.is_random = true;
  dropout.grad = DropoutGrad;
  r.Add(GradReads(std::move(dropout), {}, {1}));  // the mask

  RegisterNormalizationGradOps(r);
}

}  // namespace kiln
