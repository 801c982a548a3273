// pool.cc - max/avg pooling, templated over dtype, parallel over the N*C planes.
#include "kernels/cpu/pool.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/convert.h"

namespace kiln::cpu {
namespace {

int64_t NumPlanes(const Tensor& t) {
  int64_t planes = 1;
  for (int64_t d = 0; d + 2 < t.ndim(); ++d) planes *= t.dim(d);
  return planes;
}

// Planes per ParallelFor chunk: enough window work (~32k element visits) to pay for a thread.
int64_t PlaneGrain(const Pool2dParams& p) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(p.oh * p.ow * p.kh * p.kw, 1));
}

// True when every window lies inside the plane (no padding, no ceil_mode overhang): the loops
// then need no bounds checks.
bool WindowsInside(const Pool2dParams& p, int64_t H, int64_t W) {
  return p.ph == 0 && p.pw == 0 && (p.oh - 1) * p.sh + (p.kh - 1) * p.dh < H &&
         (p.ow - 1) * p.sw + (p.kw - 1) * p.dw < W;
}

// `take ? a : b` without a branch. With random data a compare-and-branch mispredicts about half
// the time, and GCC turns the ternary of a float into just that: LeNet's 2x2 pools took
// 7 ns per window (400 us for 64x16x10x10) until the select went through the bits.
template <typename C>
inline C Select(bool take, C a, C b) {
  if constexpr (std::is_same_v<C, float>) {
    const uint32_t mask = 0u - static_cast<uint32_t>(take);
    return BitsFloat((FloatBits(a) & mask) | (FloatBits(b) & ~mask));
  } else if constexpr (std::is_same_v<C, double>) {
    uint64_t ua, ub;
    std::memcpy(&ua, &a, sizeof(ua));
    std::memcpy(&ub, &b, sizeof(ub));
    const uint64_t mask = 0ull - static_cast<uint64_t>(take), bits = (ua & mask) | (ub & ~mask);
    double out;
    std::memcpy(&out, &bits, sizeof(out));
    return out;
  } else if constexpr (std::is_same_v<C, bool>) {
    return take ? a : b;
  } else {
    const C mask = static_cast<C>(0) - static_cast<C>(take);  // integers: all ones or zero
    return (a & mask) | (b & ~mask);
  }
}

// The 2x2, stride-2 window of most CNNs, over a block of whole planes in two passes whose loops
// are branch-free and long. Pass 1 takes each input row's pairs: the larger of (left, right) and
// which one won. Pass 2 takes each output as the larger of the pair maxima above and below it.
// With the taps' comparison (a later tap wins only when greater, or NaN) folding the pairs first
// gives the tap the four-tap loop keeps: the first of the largest, or the last NaN. When planes
// have even sizes (H = 2*OH, W = 2*OW) pass 1 is one loop over the whole block, so small planes
// (LeNet's 10x10) vectorize as well as large ones: per row they ran at 7-10 ns a window.
template <typename T>
void MaxPool2x2Stride2Block(const T* __restrict x, T* __restrict y, int64_t* __restrict yi,
                            int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW,
                            compute_t<T>* __restrict pair_max, uint8_t* __restrict pair_right) {
  using C = compute_t<T>;
  const int64_t rows = 2 * OH;  // input rows that windows cover, per plane
  auto pairs = [&](const T* __restrict in, C* __restrict out_max, uint8_t* __restrict out_right,
                   int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      const C a = static_cast<C>(in[2 * j]), b = static_cast<C>(in[2 * j + 1]);
      const bool right = (b > a) | (b != b);  // `|`: no branch; v != v: NaN wins
      out_max[j] = Select(right, b, a);
      out_right[j] = static_cast<uint8_t>(right);
    }
  };
  if (H == rows && W == 2 * OW) {
    pairs(x, pair_max, pair_right, planes * rows * OW);
  } else {
    for (int64_t plane = 0; plane < planes; ++plane)
      for (int64_t i = 0; i < rows; ++i)
        pairs(x + (plane * H + i) * W, pair_max + (plane * rows + i) * OW,
              pair_right + (plane * rows + i) * OW, OW);
  }
  for (int64_t r = 0; r < planes * OH; ++r) {
    const int64_t oh = r % OH;
    const C* __restrict top = pair_max + 2 * r * OW;
    const C* __restrict bottom = top + OW;
    const uint8_t* __restrict top_right = pair_right + 2 * r * OW;
    const uint8_t* __restrict bottom_right = top_right + OW;
    T* __restrict yrow = y + r * OW;
    int64_t* __restrict irow = yi + r * OW;
    for (int64_t ow = 0; ow < OW; ++ow) {
      const C t = top[ow], b = bottom[ow];
      const bool down = (b > t) | (b != b);
      yrow[ow] = Convert<T>(Select(down, b, t));
      const int64_t h = 2 * oh + static_cast<int64_t>(down);
      const int64_t w =
          2 * ow + static_cast<int64_t>(Select<uint8_t>(down, bottom_right[ow], top_right[ow]));
      irow[ow] = h * W + w;
    }
  }
}

// The planes of one ParallelFor chunk in blocks whose pair maxima stay in L1.
template <typename T>
void MaxPool2x2Stride2Planes(const T* x, T* y, int64_t* yi, int64_t begin, int64_t end, int64_t H,
                             int64_t W, const Pool2dParams& p) {
  using C = compute_t<T>;
  const int64_t per_plane = 2 * p.oh * p.ow;  // pairs per plane
  const int64_t block = std::max<int64_t>(1, 4096 / std::max<int64_t>(per_plane, 1));
  // Not std::vector: vector<bool> has no data() (bool tensors never get here, but compile).
  std::unique_ptr<C[]> pair_max(new C[static_cast<size_t>(block * per_plane)]);
  std::unique_ptr<uint8_t[]> pair_right(new uint8_t[static_cast<size_t>(block * per_plane)]);
  for (int64_t b0 = begin; b0 < end; b0 += block) {
    const int64_t n = std::min(block, end - b0);
    MaxPool2x2Stride2Block(x + b0 * H * W, y + b0 * p.oh * p.ow, yi + b0 * p.oh * p.ow, n, H, W,
                           p.oh, p.ow, pair_max.get(), pair_right.get());
  }
}

// Any window (size, stride, padding, dilation) as two passes over a plane: along each row, the
// fold of each window's taps in that row (value and column), then down the rows, the fold of
// those. The fold (a later tap wins when greater, or NaN) is a maximum under one total order
// (numbers by value, the earlier first; NaN above them, the later first), so grouping the taps
// by rows gives the tap the row-major loop keeps. Each pass loops over the outputs whose tap
// lies inside the plane, so the loops have no bounds checks and no branches: ResNet's padded
// 3x3 pool took 5.5 ns a tap in the branchy per-window loop.
template <typename T>
class SeparableMaxPool {
 public:
  using C = compute_t<T>;
  SeparableMaxPool(const Pool2dParams& p, int64_t H, int64_t W)
      : p_(p),
        H_(H),
        W_(W),
        row_max_(new C[H * p.ow]),
        row_col_(new int64_t[H * p.ow]),
        first_tap_(new int64_t[p.ow]),
        end_tap_(new int64_t[p.ow]),
        out_max_(new C[p.ow]) {
    // Each window's taps inside a row, the same for every row: j in [first, end).
    for (int64_t ow = 0; ow < p.ow; ++ow) {
      const int64_t start = ow * p.sw - p.pw;
      first_tap_[ow] = start >= 0 ? 0 : (-start + p.dw - 1) / p.dw;
      end_tap_[ow] = W - 1 - start < 0 ? 0 : std::min(p.kw, (W - 1 - start) / p.dw + 1);
    }
    // The windows with all three taps inside: start >= 0 and start + 2 <= W - 1.
    three_taps_ = p.kw == 3 && p.dw == 1 && (p.sw == 1 || p.sw == 2);
    if (three_taps_) {
      inner_begin_ = std::min(p.ow, (p.pw + p.sw - 1) / p.sw);
      const int64_t last_start = W - 3 + p.pw;  // the largest start whose taps fit
      inner_end_ = last_start < 0 ? inner_begin_
                                  : std::max(inner_begin_, std::min(p.ow, last_start / p.sw + 1));
    }
  }

  void Plane(const T* x, T* y, int64_t* yi) {
    for (int64_t h = 0; h < H_; ++h) Row(x + h * W_, &row_max_[h * p_.ow], &row_col_[h * p_.ow]);
    for (int64_t oh = 0; oh < p_.oh; ++oh) Column(oh, y + oh * p_.ow, yi + oh * p_.ow);
  }

 private:
  bool HasTaps(int64_t ow) const { return first_tap_[ow] < end_tap_[ow]; }

  // Each window's fold along one row, in registers; a window with no tap in the row is skipped
  // (Column never reads it).
  void Row(const T* __restrict xr, C* __restrict best_out, int64_t* __restrict col_out) {
    if (three_taps_) {
      RowEdges(xr, best_out, col_out, 0, inner_begin_);
      if (p_.sw == 1) RowInner3<1>(xr, best_out, col_out);
      if (p_.sw == 2) RowInner3<2>(xr, best_out, col_out);
      RowEdges(xr, best_out, col_out, inner_end_, p_.ow);
      return;
    }
    RowEdges(xr, best_out, col_out, 0, p_.ow);
  }

  // The windows of three adjacent taps that lie wholly inside the row (ResNet's 3x3 pools, at
  // stride 1 or 2), as a loop of fixed shape that GCC vectorizes: the general loop's taps run
  // from a per-window first to end (ResNet-18's pool over 16 x 64 x 112 x 112: 24 -> 8 ms).
  template <int kStride>
  void RowInner3(const T* __restrict xr, C* __restrict best_out, int64_t* __restrict col_out) {
    for (int64_t ow = inner_begin_; ow < inner_end_; ++ow) {
      const int64_t w = ow * kStride - p_.pw;
      const C a = static_cast<C>(xr[w]), b = static_cast<C>(xr[w + 1]);
      const C c = static_cast<C>(xr[w + 2]);
      const bool take_b = (b > a) | (b != b);
      const C ab = Select(take_b, b, a);
      const bool take_c = (c > ab) | (c != c);
      best_out[ow] = Select(take_c, c, ab);
      col_out[ow] = Select<int64_t>(take_c, w + 2, Select<int64_t>(take_b, w + 1, w));
    }
  }

  void RowEdges(const T* __restrict xr, C* __restrict best_out, int64_t* __restrict col_out,
                int64_t begin, int64_t end) {
    for (int64_t ow = begin; ow < end; ++ow) {
      if (!HasTaps(ow)) continue;  // only where padding covers a whole window: predictable
      int64_t w = ow * p_.sw - p_.pw + first_tap_[ow] * p_.dw, col = w;
      C best = static_cast<C>(xr[w]);
      for (int64_t j = first_tap_[ow] + 1; j < end_tap_[ow]; ++j) {
        w += p_.dw;
        const C v = static_cast<C>(xr[w]);
        const bool take = (v > best) | (v != v);  // `|`: no branch; v != v: NaN wins
        best = Select(take, v, best);
        col = Select<int64_t>(take, w, col);
      }
      best_out[ow] = best;
      col_out[ow] = col;
    }
  }

  // The fold of the rows' results down each window's rows inside the plane.
  void Column(int64_t oh, T* __restrict y, int64_t* __restrict yi) {
    const int64_t start = oh * p_.sh - p_.ph;
    const int64_t first = start >= 0 ? 0 : (-start + p_.dh - 1) / p_.dh;
    const int64_t end = H_ - 1 - start < 0 ? 0 : std::min(p_.kh, (H_ - 1 - start) / p_.dh + 1);
    C* __restrict best = out_max_.get();
    for (int64_t i = first; i < end; ++i) {
      const int64_t h = start + i * p_.dh;
      const C* __restrict row = &row_max_[h * p_.ow];
      const int64_t* __restrict col = &row_col_[h * p_.ow];
      for (int64_t ow = 0; ow < p_.ow; ++ow) {
        const C v = row[ow];
        const bool take = (i == first) | (v > best[ow]) | (v != v);
        best[ow] = Select(take, v, best[ow]);
        yi[ow] = Select<int64_t>(take, h * W_ + col[ow], yi[ow]);
      }
    }
    for (int64_t ow = 0; ow < p_.ow; ++ow) {  // a window with no tap inside: 0, as PyTorch
      const bool taps = first < end && HasTaps(ow);
      y[ow] = Convert<T>(Select(taps, best[ow], C(0)));
      if (!taps) yi[ow] = 0;
    }
  }

  // Arrays, not vectors: vector<bool> has no data() (bool tensors never get here, but compile).
  const Pool2dParams& p_;
  int64_t H_, W_;
  std::unique_ptr<C[]> row_max_;
  std::unique_ptr<int64_t[]> row_col_;
  std::unique_ptr<int64_t[]> first_tap_, end_tap_;
  std::unique_ptr<C[]> out_max_;
  bool three_taps_ = false;  // RowInner3 takes windows [inner_begin_, inner_end_)
  int64_t inner_begin_ = 0, inner_end_ = 0;
};

template <typename T>
void MaxPoolTyped(const Tensor& in, const Tensor& out, const Tensor& indices,
                  const Pool2dParams& p) {
  const int64_t plane_h = in.dim(in.ndim() - 2), plane_w = in.dim(in.ndim() - 1);
  const bool two_by_two = WindowsInside(p, plane_h, plane_w) && p.kh == 2 && p.kw == 2 &&
                          p.sh == 2 && p.sw == 2 && p.dh == 1 && p.dw == 1;
  const T* src = in.data<T>();
  T* dst = out.data<T>();
  int64_t* idx = indices.data<int64_t>();
  ParallelFor(NumPlanes(in), PlaneGrain(p), [&](int64_t begin, int64_t end) {
    if (two_by_two) return MaxPool2x2Stride2Planes(src, dst, idx, begin, end, plane_h, plane_w, p);
    SeparableMaxPool<T> pool(p, plane_h, plane_w);
    for (int64_t plane = begin; plane < end; ++plane)
      pool.Plane(src + plane * plane_h * plane_w, dst + plane * p.oh * p.ow,
                 idx + plane * p.oh * p.ow);
  });
}

template <typename T>
void AvgPoolTyped(const Tensor& in, const Tensor& out, const Pool2dParams& p) {
  using C = compute_t<T>;
  const int64_t H = in.dim(in.ndim() - 2), W = in.dim(in.ndim() - 1);
  const T* src = in.data<T>();
  T* dst = out.data<T>();
  ParallelFor(NumPlanes(in), PlaneGrain(p), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const T* x = src + plane * H * W;
      T* y = dst + plane * p.oh * p.ow;
      for (int64_t oh = 0; oh < p.oh; ++oh) {
        int64_t h0 = oh * p.sh - p.ph, h1 = std::min(h0 + p.kh, H + p.ph);
        const int64_t padded_h = h1 - h0;
        h0 = std::max<int64_t>(h0, 0), h1 = std::min(h1, H);
        for (int64_t ow = 0; ow < p.ow; ++ow) {
          int64_t w0 = ow * p.sw - p.pw, w1 = std::min(w0 + p.kw, W + p.pw);
          const int64_t padded_w = w1 - w0;
          w0 = std::max<int64_t>(w0, 0), w1 = std::min(w1, W);
          C sum = C(0);
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) sum += static_cast<C>(x[h * W + w]);
          int64_t divisor = p.divisor_override;
          if (divisor == 0)
            divisor = p.count_include_pad ? padded_h * padded_w : (h1 - h0) * (w1 - w0);
          // A window wholly in padding (possible with ceil_mode) averages to zero.
          y[oh * p.ow + ow] = Convert<T>(divisor != 0 ? sum / static_cast<C>(divisor) : C(0));
        }
      }
    }
  });
}

// Backward kernels accumulate one plane of dx at a time in compute_t: in dx itself when T is
// its own compute type, else in a per-chunk scratch plane converted once at the end.
template <typename T, typename Fn>
void ForEachGradPlane(const Tensor& dx, int64_t grain, Fn&& plane_fn) {
  using C = compute_t<T>;
  const int64_t H = dx.dim(dx.ndim() - 2), W = dx.dim(dx.ndim() - 1);
  T* out = dx.data<T>();
  ParallelFor(NumPlanes(dx), grain, [&](int64_t begin, int64_t end) {
    std::vector<C> scratch;
    if constexpr (!std::is_same_v<T, C>) scratch.resize(H * W);
    for (int64_t plane = begin; plane < end; ++plane) {
      T* o = out + plane * H * W;
      C* acc;
      if constexpr (std::is_same_v<T, C>) {
        acc = o;
      } else {
        acc = scratch.data();
      }
      std::fill(acc, acc + H * W, C(0));
      plane_fn(plane, acc);
      if constexpr (!std::is_same_v<T, C>)
        for (int64_t i = 0; i < H * W; ++i) o[i] = Convert<T>(acc[i]);
    }
  });
}

template <typename T>
bool MaxPoolBackwardTyped(const Tensor& dy, const Tensor& indices, const Tensor& dx) {
  using C = compute_t<T>;
  const int64_t HW = dx.dim(dx.ndim() - 2) * dx.dim(dx.ndim() - 1);
  const int64_t OHW = dy.dim(dy.ndim() - 2) * dy.dim(dy.ndim() - 1);
  const T* g = dy.data<T>();
  const int64_t* idx = indices.data<int64_t>();
  std::atomic<bool> ok{true};
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(OHW + HW, 1));
  ForEachGradPlane<T>(dx, grain, [&](int64_t plane, C* acc) {
    const T* gp = g + plane * OHW;
    const int64_t* ip = idx + plane * OHW;
    for (int64_t i = 0; i < OHW; ++i) {
      const int64_t at = ip[i];
      if (at < 0 || at >= HW) {
        ok.store(false, std::memory_order_relaxed);
        continue;
      }
      acc[at] += static_cast<C>(gp[i]);
    }
  });
  return ok.load();
}

template <typename T>
void AvgPoolBackwardTyped(const Tensor& dy, const Tensor& dx, const Pool2dParams& p) {
  using C = compute_t<T>;
  const int64_t H = dx.dim(dx.ndim() - 2), W = dx.dim(dx.ndim() - 1);
  const T* g = dy.data<T>();
  ForEachGradPlane<T>(dx, PlaneGrain(p), [&](int64_t plane, C* acc) {
    const T* gp = g + plane * p.oh * p.ow;
    for (int64_t oh = 0; oh < p.oh; ++oh) {
      // The same window and divisor as AvgPoolTyped.
      int64_t h0 = oh * p.sh - p.ph, h1 = std::min(h0 + p.kh, H + p.ph);
      const int64_t padded_h = h1 - h0;
      h0 = std::max<int64_t>(h0, 0), h1 = std::min(h1, H);
      for (int64_t ow = 0; ow < p.ow; ++ow) {
        int64_t w0 = ow * p.sw - p.pw, w1 = std::min(w0 + p.kw, W + p.pw);
        const int64_t padded_w = w1 - w0;
        w0 = std::max<int64_t>(w0, 0), w1 = std::min(w1, W);
        int64_t divisor = p.divisor_override;
        if (divisor == 0)
          divisor = p.count_include_pad ? padded_h * padded_w : (h1 - h0) * (w1 - w0);
        if (divisor == 0) continue;  // a window wholly in padding: its output was constant 0
        const C share = static_cast<C>(gp[oh * p.ow + ow]) / static_cast<C>(divisor);
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) acc[h * W + w] += share;
      }
    }
  });
}

}  // namespace

int64_t PoolOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                       bool ceil_mode) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

void MaxPool2d(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p) {
  if (out.numel() == 0) return;
  DispatchDType(in.dtype(), [&](auto tag) { MaxPoolTyped<decltype(tag)>(in, out, indices, p); });
}

void AvgPool2d(const Tensor& in, const Tensor& out, const Pool2dParams& p) {
  if (out.numel() == 0) return;
  DispatchDType(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) AvgPoolTyped<T>(in, out, p);
  });
}

bool MaxPool2dBackward(const Tensor& dy, const Tensor& indices, const Tensor& dx) {
  if (dx.numel() == 0) return true;
  bool ok = true;
  DispatchDType(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>)
      ok = MaxPoolBackwardTyped<T>(dy, indices, dx);
  });
  return ok;
}

void AvgPool2dBackward(const Tensor& dy, const Tensor& dx, const Pool2dParams& p) {
  if (dx.numel() == 0) return;
  DispatchDType(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) AvgPoolBackwardTyped<T>(dy, dx, p);
  });
}

}  // namespace kiln::cpu
