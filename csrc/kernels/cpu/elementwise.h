// elementwise.h - unary, binary and ternary kernels over the shared strided loop.
//
// Each takes a functor on compute types (float for float16/bfloat16) and writes R. Inner runs
// that are contiguous, or that broadcast a scalar, get plain indexed loops the compiler
// vectorizes; anything else steps by byte strides.
#pragma once

#include <algorithm>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/loop.h"

namespace kiln::cpu {

template <typename T>
inline compute_t<T> Load(const char* p) {
  return static_cast<compute_t<T>>(*reinterpret_cast<const T*>(p));
}
template <typename R, typename V>
inline void Store(char* p, V value) {
  *reinterpret_cast<R*>(p) = Convert<R>(value);
}

// bfloat16 runs (mixed precision's activations and their gradients) go through float32 in
// chunks: widening, the float function and the rounding back each vectorize on their own, where
// one loop with the rounding's NaN branch in it does not.
constexpr int64_t kBf16Chunk = 256;

inline void Bf16Widen(const BFloat16* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = BitsFloat(static_cast<uint32_t>(in[i].bits) << 16);
}

// BFloat16(float)'s rounding (to nearest even; a NaN stays a quiet NaN) with a select.
inline void Bf16Narrow(const float* in, BFloat16* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = FloatBits(in[i]);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    out[i].bits =
        static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);
  }
}

template <typename Fn>
void Bf16UnaryRun(const BFloat16* a, BFloat16* o, int64_t n, Fn& fn) {
  float buf[kBf16Chunk];
  for (int64_t i0 = 0; i0 < n; i0 += kBf16Chunk) {
    const int64_t m = std::min(kBf16Chunk, n - i0);
    Bf16Widen(a + i0, buf, m);
    for (int64_t i = 0; i < m; ++i) buf[i] = fn(buf[i]);
    Bf16Narrow(buf, o + i0, m);
  }
}

// y_step 0: y is one value broadcast along the run.
template <typename Fn>
void Bf16BinaryRun(const BFloat16* x, const BFloat16* y, int64_t y_step, BFloat16* o, int64_t n,
                   Fn& fn) {
  float bx[kBf16Chunk], by[kBf16Chunk];
  const float y0 = static_cast<float>(*y);
  for (int64_t i0 = 0; i0 < n; i0 += kBf16Chunk) {
    const int64_t m = std::min(kBf16Chunk, n - i0);
    Bf16Widen(x + i0, bx, m);
    if (y_step) {
      Bf16Widen(y + i0, by, m);
      for (int64_t i = 0; i < m; ++i) bx[i] = fn(bx[i], by[i]);
    } else {
      for (int64_t i = 0; i < m; ++i) bx[i] = fn(bx[i], y0);
    }
    Bf16Narrow(bx, o + i0, m);
  }
}

// out = fn(a) elementwise; In and R are element types.
template <typename In, typename R, typename Fn>
void UnaryKernel(const Tensor& in, const Tensor& out, Fn fn) {
  ForEachElement<2>(out, {in}, [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
    if (s[0] == sizeof(R) && s[1] == sizeof(In)) {
      auto* o = reinterpret_cast<lane_t<R>*>(p[0]);
      auto* a = reinterpret_cast<const lane_t<In>*>(p[1]);
      if constexpr (std::is_same_v<In, BFloat16> && std::is_same_v<R, BFloat16>) {
        Bf16UnaryRun(a, o, n, fn);
        return;
      }
      for (int64_t i = 0; i < n; ++i) o[i] = LaneOf<R>(fn(LaneValue<In>(a[i])));
      return;
    }
    for (int64_t i = 0; i < n; ++i) Store<R>(p[0] + i * s[0], fn(Load<In>(p[1] + i * s[1])));
  });
}

// out = fn(a, b) with NumPy broadcasting; a and b share element type In.
template <typename In, typename R, typename Fn>
void BinaryKernel(const Tensor& a, const Tensor& b, const Tensor& out, Fn fn) {
  ForEachElement<3>(out, {a, b}, [&](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
    auto* o = reinterpret_cast<lane_t<R>*>(p[0]);
    auto* x = reinterpret_cast<const lane_t<In>*>(p[1]);
    auto* y = reinterpret_cast<const lane_t<In>*>(p[2]);
    using C = compute_t<In>;
    if constexpr (std::is_same_v<In, BFloat16> && std::is_same_v<R, BFloat16>) {
      if (s[0] == sizeof(R) && s[1] == sizeof(In) && (s[2] == sizeof(In) || s[2] == 0)) {
        Bf16BinaryRun(x, y, s[2], o, n, fn);
        return;
      }
    }
    if (s[0] == sizeof(R)) {
      if (s[1] == sizeof(In) && s[2] == sizeof(In)) {
        for (int64_t i = 0; i < n; ++i)
          o[i] = LaneOf<R>(fn(LaneValue<In>(x[i]), LaneValue<In>(y[i])));
        return;
      }
      if (s[1] == sizeof(In) && s[2] == 0) {
        const C yv = LaneValue<In>(*y);
        for (int64_t i = 0; i < n; ++i) o[i] = LaneOf<R>(fn(LaneValue<In>(x[i]), yv));
        return;
      }
      if (s[1] == 0 && s[2] == sizeof(In)) {
        const C xv = LaneValue<In>(*x);
        for (int64_t i = 0; i < n; ++i) o[i] = LaneOf<R>(fn(xv, LaneValue<In>(y[i])));
        return;
      }
    }
    for (int64_t i = 0; i < n; ++i)
      Store<R>(p[0] + i * s[0], fn(Load<In>(p[1] + i * s[1]), Load<In>(p[2] + i * s[2])));
  });
}

// One run of TernaryKernel with a contiguous output, each input contiguous (its flag true) or
// one value repeated along the run: an indexed loop the compiler vectorizes (the byte-strided
// loop below ran where() 18x slower than a multiply over the same elements).
template <bool kA, bool kB, bool kC, typename A, typename B, typename C, typename R, typename Fn>
void TernaryRun(const lane_t<A>* a, const lane_t<B>* b, const lane_t<C>* c, lane_t<R>* out,
                int64_t n, Fn fn) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = LaneOf<R>(
        fn(LaneValue<A>(a[kA ? i : 0]), LaneValue<B>(b[kB ? i : 0]), LaneValue<C>(c[kC ? i : 0])));
}

// out = fn(a, b, c) with broadcasting; element types A, B, C may differ (where's bool mask).
template <typename A, typename B, typename C, typename R, typename Fn>
void TernaryKernel(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& out, Fn fn) {
  ForEachElement<4>(
      out, {a, b, c}, [&](std::array<char*, 4> p, std::array<int64_t, 4> s, int64_t n) {
        const auto* x = reinterpret_cast<const lane_t<A>*>(p[1]);
        const auto* y = reinterpret_cast<const lane_t<B>*>(p[2]);
        const auto* z = reinterpret_cast<const lane_t<C>*>(p[3]);
        auto* o = reinterpret_cast<lane_t<R>*>(p[0]);
        const bool ax = s[1] == sizeof(A), by = s[2] == sizeof(B), cz = s[3] == sizeof(C);
        if (s[0] == sizeof(R) && (ax || s[1] == 0) && (by || s[2] == 0) && (cz || s[3] == 0)) {
          if (ax && by && cz) return TernaryRun<true, true, true, A, B, C, R>(x, y, z, o, n, fn);
          if (ax && by) return TernaryRun<true, true, false, A, B, C, R>(x, y, z, o, n, fn);
          if (ax && cz) return TernaryRun<true, false, true, A, B, C, R>(x, y, z, o, n, fn);
          if (by && cz) return TernaryRun<false, true, true, A, B, C, R>(x, y, z, o, n, fn);
          if (ax) return TernaryRun<true, false, false, A, B, C, R>(x, y, z, o, n, fn);
          if (by) return TernaryRun<false, true, false, A, B, C, R>(x, y, z, o, n, fn);
          if (cz) return TernaryRun<false, false, true, A, B, C, R>(x, y, z, o, n, fn);
        }
        for (int64_t i = 0; i < n; ++i)
          Store<R>(p[0] + i * s[0], fn(Load<A>(p[1] + i * s[1]), Load<B>(p[2] + i * s[2]),
                                       Load<C>(p[3] + i * s[3])));
      });
}

}  // namespace kiln::cpu
