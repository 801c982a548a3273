// normalization_grad.cc - layer_norm_grad and batch_norm_grad: the backward kernels the
// normalization ops' gradient rules emit (normalization.cc).
#include <cmath>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/loop.h"
#include "kernels/cpu/normalization.h"
#include "kernels/cpu/reduce.h"
#include "ops/normalization_internal.h"

namespace kiln::norm {
namespace {

// ---- layer_norm_grad(dy, x, mean, rstd, weight?) -> (dx, dweight, dbias)
//
// With xhat = (x - mean) * rstd and g = dy * weight, per row of n elements:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),
// and over the rows dweight = sum(dy * xhat), dbias = sum(dy). dweight and dbias come out in
// the statistics' dtype (float32 for 16-bit inputs); with affine_grads=False they are zeros.

std::vector<TensorMeta> InferLayerNormGrad(const OpDef& def, const std::vector<TensorMeta>& in,
                                           const Attrs& attrs) {
  const Shape& shape = in[1].shape;
  const int64_t ndim = static_cast<int64_t>(shape.size());
  RequireFloating(in[1], def.name);
  const int64_t raw = AttrInt(attrs, 0);
  KILN_CHECK(ndim >= 1 && raw >= -ndim && raw < ndim, Axis, def.name, ": begin_norm_axis ", raw,
             " is out of range for input of shape ", ShapeStr(shape));
  const int64_t axis = NormAxis(shape, attrs);
  KILN_CHECK(ShapesMatch(in[0].shape, shape) && in[0].dtype == in[1].dtype, Value, def.name,
             ": dy (", DTypeName(in[0].dtype), ShapeStr(in[0].shape), ") must match x (",
             DTypeName(in[1].dtype), ShapeStr(shape), ")");
  Shape stat(shape.begin(), shape.begin() + axis);
  stat.resize(ndim, 1);
  const DType sd = StatDType(in[1].dtype);
  for (size_t i = 2; i < 4; ++i)
    KILN_CHECK(ShapesMatch(in[i].shape, stat) && in[i].dtype == sd, Value, def.name, ": ",
               InputName(def, i), " (", DTypeName(in[i].dtype), ShapeStr(in[i].shape), ") must be ",
               DTypeName(sd), ShapeStr(stat));
  Shape normalized(shape.begin() + axis, shape.end());
  if (in[4].present)
    KILN_CHECK(ShapesMatch(in[4].shape, normalized) && in[4].dtype == in[1].dtype, Value, def.name,
               ": weight (", DTypeName(in[4].dtype), ShapeStr(in[4].shape), ") must be ",
               DTypeName(in[1].dtype), ShapeStr(normalized));
  return {TensorMeta{in[1].dtype, shape}, TensorMeta{sd, normalized}, TensorMeta{sd, normalized}};
}

void LayerNormGradKernel(KernelContext& ctx) {
  const Tensor& input = ctx.inputs[1];
  const int64_t axis = NormAxis(input.shape(), ctx.attrs);
  const bool affine = AttrBool(ctx.attrs, 1);
  int64_t rows = 1, n = 1;
  for (int64_t d = 0; d < input.ndim(); ++d) (d < axis ? rows : n) *= input.dim(d);
  Tensor dy = ctx.inputs[0].Contiguous(), x = input.Contiguous();
  Tensor mean = ctx.inputs[2].Contiguous(), rstd = ctx.inputs[3].Contiguous();
  Tensor w = ctx.inputs[4].defined() ? ctx.inputs[4].Contiguous() : Tensor();
  DispatchDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (!kFloatType<T>) {
      Throw(ErrorKind::Type, ctx.def.name, ": expected a floating-point tensor");
    } else {
      const T* dyp = dy.data<T>();
      const T* xp = x.data<T>();
      const C* mp = mean.data<C>();
      const C* rp = rstd.data<C>();
      const T* wp = w.defined() ? w.data<T>() : nullptr;
      T* dxp = ctx.outputs[0].data<T>();
      C* dwp = ctx.outputs[1].data<C>();
      C* dbp = ctx.outputs[2].data<C>();
      const int64_t grain = std::max<int64_t>(1, cpu::kParallelGrain / std::max<int64_t>(n, 1));
      ParallelFor(rows, grain, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const T* d = dyp + row * n;
          const T* in = xp + row * n;
          T* out = dxp + row * n;
          const C m = mp[row], r = rp[row];
          double sum_g[8] = {0, 0, 0, 0, 0, 0, 0, 0}, sum_gx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          int64_t i = 0;
          for (; i + 8 <= n; i += 8)
            for (int l = 0; l < 8; ++l) {
              C gv = static_cast<C>(d[i + l]);
              if (wp) gv *= static_cast<C>(wp[i + l]);
              const C xh = (static_cast<C>(in[i + l]) - m) * r;
              sum_g[l] += gv;
              sum_gx[l] += static_cast<double>(gv) * xh;
            }
          for (; i < n; ++i) {
            C gv = static_cast<C>(d[i]);
            if (wp) gv *= static_cast<C>(wp[i]);
            const C xh = (static_cast<C>(in[i]) - m) * r;
            sum_g[0] += gv;
            sum_gx[0] += static_cast<double>(gv) * xh;
          }
          double tg = 0, tgx = 0;
          for (int l = 0; l < 8; ++l) {
            tg += sum_g[l];
            tgx += sum_gx[l];
          }
          const C mean_g = static_cast<C>(tg / n), mean_gx = static_cast<C>(tgx / n);
          for (int64_t j = 0; j < n; ++j) {
            C gv = static_cast<C>(d[j]);
            if (wp) gv *= static_cast<C>(wp[j]);
            const C xh = (static_cast<C>(in[j]) - m) * r;
            out[j] = cpu::Convert<T>(r * (gv - mean_g - xh * mean_gx));
          }
        }
      });
      if (!affine) {
        std::fill(dwp, dwp + n, C(0));
        std::fill(dbp, dbp + n, C(0));
        return;
      }
      // Column blocks, each summing down the rows: contiguous reads, no shared accumulators.
      constexpr int64_t kB = cpu::kReduceBlock;
      const int64_t blocks = (n + kB - 1) / kB;
      const int64_t col_grain =
          std::max<int64_t>(1, cpu::kParallelGrain / (std::max<int64_t>(rows, 1) * kB));
      ParallelFor(blocks, col_grain, [&](int64_t begin, int64_t end) {
        double acc_w[kB], acc_b[kB];
        for (int64_t blk = begin; blk < end; ++blk) {
          const int64_t j0 = blk * kB, len = std::min(kB, n - j0);
          for (int64_t j = 0; j < len; ++j) acc_w[j] = acc_b[j] = 0;
          for (int64_t row = 0; row < rows; ++row) {
            const T* d = dyp + row * n + j0;
            const T* in = xp + row * n + j0;
            const C m = mp[row], r = rp[row];
            for (int64_t j = 0; j < len; ++j) {
              const C dv = static_cast<C>(d[j]);
              acc_w[j] += static_cast<double>(dv * ((static_cast<C>(in[j]) - m) * r));
              acc_b[j] += static_cast<double>(dv);
            }
          }
          for (int64_t j = 0; j < len; ++j) {
            dwp[j0 + j] = static_cast<C>(acc_w[j]);
            dbp[j0 + j] = static_cast<C>(acc_b[j]);
          }
        }
      });
    }
  });
}

// ---- batch_norm_grad(dy, x, saved_mean, saved_invstd, weight?) -> (dx, dweight, dbias)
//
// Per channel, with xhat = (x - mean) * invstd over the count = N * spatial values:
//   training: dx = weight * invstd * (dy - mean(dy) - xhat * mean(dy * xhat))
//   eval:     dx = weight * invstd * dy   (the statistics are constants)
// and dweight = sum(dy * xhat), dbias = sum(dy), in the statistics' dtype.

std::vector<TensorMeta> InferBatchNormGrad(const OpDef& def, const std::vector<TensorMeta>& in,
                                           const Attrs&) {
  const Shape& shape = in[1].shape;
  RequireFloating(in[1], def.name);
  KILN_CHECK(shape.size() >= 2, Value, def.name,
             ": expected x of shape (N, C) or (N, C, ...), got shape ", ShapeStr(shape));
  KILN_CHECK(ShapesMatch(in[0].shape, shape) && in[0].dtype == in[1].dtype, Value, def.name,
             ": dy (", DTypeName(in[0].dtype), ShapeStr(in[0].shape), ") must match x (",
             DTypeName(in[1].dtype), ShapeStr(shape), ")");
  const Shape channels{shape[1]};
  for (size_t i = 2; i < 5; ++i) {
    if (!in[i].present) continue;
    KILN_CHECK(IsFloating(in[i].dtype) && ShapesMatch(in[i].shape, channels), Value, def.name, ": ",
               InputName(def, i), " (", DTypeName(in[i].dtype), ShapeStr(in[i].shape),
               ") must be a floating-point tensor of shape ", ShapeStr(channels));
  }
  KILN_CHECK(in[2].present && in[3].present, Value, def.name,
             ": saved_mean and saved_invstd are required");
  const DType sd = StatDType(in[1].dtype);
  return {TensorMeta{in[1].dtype, shape}, TensorMeta{sd, channels}, TensorMeta{sd, channels}};
}

void BatchNormGradKernel(KernelContext& ctx) {
  const Tensor& input = ctx.inputs[1];
  const bool training = AttrBool(ctx.attrs, 0);
  const int64_t batch = input.dim(0), channels = input.dim(1);
  int64_t spatial = 1;
  for (int64_t d = 2; d < input.ndim(); ++d) spatial *= input.dim(d);
  const int64_t count = batch * spatial;
  Tensor dy = ctx.inputs[0].Contiguous(), x = input.Contiguous();
  const std::vector<double> mean = LoadChannels(ctx.inputs[2], channels, 0);
  const std::vector<double> invstd = LoadChannels(ctx.inputs[3], channels, 1);
  const std::vector<double> weight = LoadChannels(ctx.inputs[4], channels, 1);
  std::vector<double> sum_dy(channels, 0), sum_dy_xhat(channels, 0);
  DispatchDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (!kFloatType<T>) {
      Throw(ErrorKind::Type, ctx.def.name, ": expected a floating-point tensor");
    } else {
      const T* dyp = dy.data<T>();
      const T* xp = x.data<T>();
      const int64_t grain = std::max<int64_t>(1, cpu::kParallelGrain / std::max<int64_t>(count, 1));
      // Per channel: sum(dy) and sum(dy * (x - mean)) (times invstd after).
      ParallelFor(channels, grain, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) {
          const C m = static_cast<C>(mean[c]);
          double s = 0, sx = 0;
          for (int64_t b = 0; b < batch; ++b) {
            const T* d = dyp + (b * channels + c) * spatial;
            const T* in = xp + (b * channels + c) * spatial;
            double lanes_s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, lanes_x[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            int64_t i = 0;
            for (; i + 8 <= spatial; i += 8)
              for (int l = 0; l < 8; ++l) {
                const C dv = static_cast<C>(d[i + l]);
                lanes_s[l] += dv;
                lanes_x[l] += static_cast<double>(dv) * (static_cast<C>(in[i + l]) - m);
              }
            for (; i < spatial; ++i) {
              const C dv = static_cast<C>(d[i]);
              lanes_s[0] += dv;
              lanes_x[0] += static_cast<double>(dv) * (static_cast<C>(in[i]) - m);
            }
            for (int l = 0; l < 8; ++l) {
              s += lanes_s[l];
              sx += lanes_x[l];
            }
          }
          sum_dy[c] = s;
          sum_dy_xhat[c] = sx * invstd[c];
        }
      });
      // dx = a * dy + b * x + k per channel:
      //   training: a = w*is, b = -w*is * is^2 * sum_dy_xc / count ... folded below.
      std::vector<double> a(channels), bx(channels), k(channels);
      for (int64_t c = 0; c < channels; ++c) {
        const double scale = weight[c] * invstd[c];
        a[c] = scale;
        bx[c] = 0;
        k[c] = 0;
        if (training && count > 0) {
          const double mean_dy = sum_dy[c] / count;
          const double mean_dy_xhat = sum_dy_xhat[c] / count;
          // scale * (dy - mean_dy - (x - mean) * invstd * mean_dy_xhat)
          bx[c] = -scale * invstd[c] * mean_dy_xhat;
          k[c] = -scale * mean_dy - bx[c] * mean[c];
        }
      }
      T* dxp = ctx.outputs[0].data<T>();
      const int64_t row_grain =
          std::max<int64_t>(1, cpu::kParallelGrain / std::max<int64_t>(spatial, 1));
      ParallelFor(batch * channels, row_grain, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const int64_t c = row % channels;
          const C ac = static_cast<C>(a[c]), bc = static_cast<C>(bx[c]), kc = static_cast<C>(k[c]);
          const T* d = dyp + row * spatial;
          const T* in = xp + row * spatial;
          T* out = dxp + row * spatial;
          for (int64_t i = 0; i < spatial; ++i)
            out[i] = cpu::Convert<T>(ac * static_cast<C>(d[i]) + bc * static_cast<C>(in[i]) + kc);
        }
      });
    }
  });
  StoreChannels(ctx.outputs[1], sum_dy_xhat);
  StoreChannels(ctx.outputs[2], sum_dy);
}

// ---- batch_norm_grad's own gradient: batch_norm's second derivatives
//
// With xh = (x - mean) * is (is: saved_invstd), w the weight (1 when absent), and per channel
// S() a sum and M() a mean over its N values, batch_norm_grad computes
//   training: dx = w*is*(dy - M(dy) - xh*M(dy*xh));  eval: dx = w*is*dy
//   dweight = S(dy*xh), dbias = S(dy).
// From the gradients gdx, gdw, gdb of those, its input gradients are (training / eval):
//   g_dy   = w*is*(gdx - M(gdx) - xh*M(gdx*xh)) + gdw*xh + gdb  /  w*is*gdx + gdw*xh + gdb
//   g_x    = -w*is^2*(gdx*M(dy*xh) + dy*M(gdx*xh)) + gdw*dy*is    /  gdw*dy*is
//   g_mean = -S(g_x)   (x and mean enter only as x - mean)
//   g_is   = S(gdx*w*(dy - M(dy))) - 3*w*S(dy*xh)*M(gdx*xh) + gdw*S(dy*xh)/is
//                                                            /  S(gdx*w*dy) + gdw*S(dy*xh)/is
//   g_w    = S(gdx*dx/w).
// Means rather than sums over N keep the rule valid where Graph mode knows N only at run time.

struct ChannelOps {
  GradBuilder& g;
  Attrs axes;  // (axes, keep_dims) of a per-channel reduction of x's shape
  Shape stat;  // (1, C, 1, ...): a per-channel value broadcast against x
  Shape flat;  // (C): a per-channel input's own shape

  GradVar Sum(GradVar v) { return g.Emit1(OpKind::ReduceSum, {v}, axes); }
  GradVar Mean(GradVar v) { return g.Emit1(OpKind::ReduceMean, {v}, {axes[0], axes[1]}); }
  GradVar Shaped(GradVar v) { return g.Emit1(OpKind::Reshape, {v}, {stat}); }
  GradVar Flat(GradVar v) { return g.Emit1(OpKind::Reshape, {v}, {flat}); }
};

std::vector<GradVar> BatchNormGradGrad(GradBuilder& g) {
  const TensorMeta xm = g.meta(g.input(1));
  const int64_t rank = static_cast<int64_t>(xm.shape.size());
  std::vector<int64_t> axes{0};
  for (int64_t d = 2; d < rank; ++d) axes.push_back(d);
  Shape stat(rank, 1);
  stat[1] = xm.shape[1];
  ChannelOps c{g, {axes, true, std::monostate{}}, stat, {xm.shape[1]}};
  const bool training = AttrBool(g.attrs(), 0), has_w = g.meta(g.input(4)).present;
  GradVar dy = g.input(0), x = g.input(1), is = c.Shaped(g.input(3));
  GradVar w = has_w ? c.Shaped(g.input(4)) : g.Scalar(1.0);
  GradVar xh = Mul(g, Sub(g, x, c.Shaped(g.input(2))), is);
  GradVar gdx = g.out_grad(0);
  GradVar gdw = g.has_out_grad(1) ? c.Shaped(g.out_grad(1)) : GradVar{};
  GradVar gdb = g.has_out_grad(2) ? c.Shaped(g.out_grad(2)) : GradVar{};
  GradVar wis = Mul(g, w, is), dy_xh = Mul(g, dy, xh);
  GradVar gdx_xh = c.Mean(Mul(g, gdx, xh)), dy_xh_mean = c.Mean(dy_xh);
  // dx / w: what multiplies w in dx.
  GradVar dx_per_w =
      Mul(g, is, training ? Sub(g, Sub(g, dy, c.Mean(dy)), Mul(g, xh, dy_xh_mean)) : dy);
  GradVar g_dy = training ? Mul(g, wis, Sub(g, Sub(g, gdx, c.Mean(gdx)), Mul(g, xh, gdx_xh)))
                          : Mul(g, wis, gdx);
  GradVar g_x =
      training
          ? Neg(g, Mul(g, Mul(g, wis, is), Add(g, Mul(g, gdx, dy_xh_mean), Mul(g, dy, gdx_xh))))
          : GradVar{};
  GradVar g_is = c.Sum(Mul(g, Mul(g, gdx, w), training ? Sub(g, dy, c.Mean(dy)) : dy));
  if (training) g_is = Sub(g, g_is, Mul(g, Mul(g, Mul(g, w, g.Scalar(3.0)), c.Sum(dy_xh)), gdx_xh));
  if (gdw.defined()) {
    g_dy = Add(g, g_dy, Mul(g, gdw, xh));
    GradVar from_w = Mul(g, Mul(g, gdw, dy), is);
    g_x = g_x.defined() ? Add(g, g_x, from_w) : from_w;
    g_is = Add(g, g_is, Div(g, Mul(g, gdw, c.Sum(dy_xh)), is));
  }
  if (gdb.defined()) g_dy = Add(g, g_dy, gdb);
  std::vector<GradVar> grads(5);
  if (g.wants_input_grad(0)) grads[0] = ToInput(g, g_dy, 0);
  if (g_x.defined() && g.wants_input_grad(1)) grads[1] = ToInput(g, g_x, 1);
  if (g_x.defined() && g.wants_input_grad(2)) grads[2] = ToInput(g, c.Flat(Neg(g, c.Sum(g_x))), 2);
  if (g.wants_input_grad(3)) grads[3] = ToInput(g, c.Flat(g_is), 3);
  if (has_w && g.wants_input_grad(4))
    grads[4] = ToInput(g, c.Flat(c.Sum(Mul(g, gdx, dx_per_w))), 4);
  return grads;
}

// ---- layer_norm_grad's own gradient: layer_norm's second derivatives
//
// Per row (the normalized axes; M() a mean and S() a sum over them), with xh = (x - mean) * rs
// (rs: rstd), w the weight (1 when absent), G = dy * w and L() a sum over the leading axes,
// layer_norm_grad computes dx = rs*(G - M(G) - xh*M(G*xh)), dweight = L(dy*xh), dbias = L(dy).
// From gdx, gdw, gdb (gdw and gdb of the normalized shape) and P = rs*(gdx - M(gdx) -
// xh*M(gdx*xh)), its input gradients are
//   g_dy = P*w + gdw*xh + gdb            g_w = L(P*dy)
//   g_x  = -rs^2*(gdx*M(G*xh) + G*M(gdx*xh)) + gdw*dy*rs
//   g_mean = -S(g_x)   (x and mean enter only as x - mean)
//   g_rs = S(gdx*(G - M(G))) - 3*S(G*xh)*M(gdx*xh) + S(gdw*dy*xh)/rs.

struct RowOps {
  GradBuilder& g;
  std::vector<int64_t> rows, leading;  // the normalized axes, the axes before them

  GradVar Sum(GradVar v) { return g.Emit1(OpKind::ReduceSum, {v}, {rows, true, std::monostate{}}); }
  GradVar Mean(GradVar v) { return g.Emit1(OpKind::ReduceMean, {v}, {rows, true}); }
  GradVar LeadingSum(GradVar v) {
    if (leading.empty()) return v;
    return g.Emit1(OpKind::ReduceSum, {v}, {leading, false, std::monostate{}});
  }
};

std::vector<GradVar> LayerNormGradGrad(GradBuilder& g) {
  const TensorMeta xm = g.meta(g.input(1));
  const int64_t rank = static_cast<int64_t>(xm.shape.size());
  const int64_t axis = NormAxis(xm.shape, g.attrs());
  RowOps r{g, {}, {}};
  for (int64_t d = 0; d < rank; ++d) (d < axis ? r.leading : r.rows).push_back(d);
  const bool has_w = g.meta(g.input(4)).present;
  GradVar dy = g.input(0), x = g.input(1), rs = g.input(3), gdx = g.out_grad(0);
  GradVar w = has_w ? g.input(4) : g.Scalar(1.0);
  GradVar xh = Mul(g, Sub(g, x, g.input(2)), rs), big_g = Mul(g, dy, w);
  GradVar gdx_xh = r.Mean(Mul(g, gdx, xh)), g_xh = Mul(g, big_g, xh);
  GradVar p = Mul(g, rs, Sub(g, Sub(g, gdx, r.Mean(gdx)), Mul(g, xh, gdx_xh)));
  GradVar g_dy = Mul(g, p, w);
  GradVar g_x =
      Neg(g, Mul(g, Mul(g, rs, rs), Add(g, Mul(g, gdx, r.Mean(g_xh)), Mul(g, big_g, gdx_xh))));
  GradVar g_rs = Sub(g, r.Sum(Mul(g, gdx, Sub(g, big_g, r.Mean(big_g)))),
                     Mul(g, Mul(g, g.Scalar(3.0), r.Sum(g_xh)), gdx_xh));
  if (g.has_out_grad(1)) {
    GradVar gdw = g.out_grad(1);
    g_dy = Add(g, g_dy, Mul(g, gdw, xh));
    g_x = Add(g, g_x, Mul(g, Mul(g, gdw, dy), rs));
    g_rs = Add(g, g_rs, Div(g, r.Sum(Mul(g, Mul(g, gdw, dy), xh)), rs));
  }
  if (g.has_out_grad(2)) g_dy = Add(g, g_dy, g.out_grad(2));
  std::vector<GradVar> grads(5);
  if (g.wants_input_grad(0)) grads[0] = ToInput(g, g_dy, 0);
  if (g.wants_input_grad(1)) grads[1] = ToInput(g, g_x, 1);
  if (g.wants_input_grad(2)) grads[2] = ToInput(g, Neg(g, r.Sum(g_x)), 2);
  if (g.wants_input_grad(3)) grads[3] = ToInput(g, g_rs, 3);
  if (has_w && g.wants_input_grad(4)) grads[4] = ToInput(g, r.LeadingSum(Mul(g, p, dy)), 4);
  return grads;
}

}  // namespace

void RegisterNormalizationGradOps(OpRegistry& r) {
  // Backward kernels of layer_norm and batch_norm. Inputs come from the rules with matching
  // dtypes, so nothing is promoted. Both have second derivatives (their gradient ops' own rules).
  OpDef layer_norm_grad = Norm(OpKind::LayerNormGrad, {"dy", "x", "mean", "rstd", "weight?"},
                               InferLayerNormGrad, LayerNormGradKernel, Promotion::None);
  layer_norm_grad.attrs = {{"begin_norm_axis", int64_t{-1}}, {"affine_grads", true}};
  layer_norm_grad.grad = LayerNormGradGrad;
  r.Add(std::move(layer_norm_grad));
  OpDef batch_norm_grad =
      Norm(OpKind::BatchNormGrad, {"dy", "x", "saved_mean", "saved_invstd", "weight?"},
           InferBatchNormGrad, BatchNormGradKernel, Promotion::None);
  batch_norm_grad.attrs = {{"training", true}, {"affine_grads", true}};
  batch_norm_grad.grad = BatchNormGradGrad;
  r.Add(std::move(batch_norm_grad));
}

}  // namespace kiln::norm
