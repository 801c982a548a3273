// conv_f64.cc - float64 convolution by direct loops over every (output, tap) pair.
#include "kernels/cpu/conv_f64.h"

#include <algorithm>

namespace kiln::cpu {
namespace {

// Calls fn(out_index, x_index, w_index) for every output element and every kernel tap that
// lands inside the (unpadded) input. One walk serves all three ops: they differ only in which
// operand accumulates into which.
template <typename Fn>
void ForEachTap(const ConvShape& s, Fn&& fn) {
  const int64_t in_per_group = s.c / s.groups, out_per_group = s.o / s.groups;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.o; ++o) {
      const int64_t first_channel = (o / out_per_group) * in_per_group;
      for (int64_t oy = 0; oy < s.oh; ++oy)
        for (int64_t ox = 0; ox < s.ow; ++ox) {
          const int64_t out_index = ((n * s.o + o) * s.oh + oy) * s.ow + ox;
          for (int64_t ci = 0; ci < in_per_group; ++ci)
            for (int64_t ky = 0; ky < s.kh; ++ky) {
              const int64_t iy = oy * s.stride[0] - s.pad[0] + ky * s.dilation[0];
              if (iy < 0 || iy >= s.h) continue;
              for (int64_t kx = 0; kx < s.kw; ++kx) {
                const int64_t ix = ox * s.stride[1] - s.pad[2] + kx * s.dilation[1];
                if (ix < 0 || ix >= s.w) continue;
                const int64_t x_index = ((n * s.c + first_channel + ci) * s.h + iy) * s.w + ix;
                const int64_t w_index = ((o * in_per_group + ci) * s.kh + ky) * s.kw + kx;
                fn(out_index, x_index, w_index);
              }
            }
        }
    }
}

}  // namespace

void ConvF64(const ConvShape& s, const Tensor& x, const Tensor& w, const Tensor& bias,
             const Tensor& out) {
  const double* xp = x.data<double>();
  const double* wp = w.data<double>();
  double* op = out.data<double>();
  const int64_t plane = s.oh * s.ow;
  for (int64_t i = 0; i < out.numel(); ++i)
    op[i] = bias.defined() ? bias.data<double>()[(i / plane) % s.o] : 0.0;
  ForEachTap(s, [&](int64_t o, int64_t xi, int64_t wi) { op[o] += xp[xi] * wp[wi]; });
}

void ConvF64BackwardData(const ConvShape& s, const Tensor& dy, const Tensor& w, const Tensor& dx) {
  const double* dyp = dy.data<double>();
  const double* wp = w.data<double>();
  double* dxp = dx.data<double>();
  std::fill(dxp, dxp + dx.numel(), 0.0);
  ForEachTap(s, [&](int64_t o, int64_t xi, int64_t wi) { dxp[xi] += dyp[o] * wp[wi]; });
}

void ConvF64BackwardWeights(const ConvShape& s, const Tensor& dy, const Tensor& x,
                            const Tensor& dw) {
  const double* dyp = dy.data<double>();
  const double* xp = x.data<double>();
  double* dwp = dw.data<double>();
  std::fill(dwp, dwp + dw.numel(), 0.0);
  ForEachTap(s, [&](int64_t o, int64_t xi, int64_t wi) { dwp[wi] += dyp[o] * xp[xi]; });
}

}  // namespace kiln::cpu
