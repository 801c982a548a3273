// elementwise.h - unary, binary and ternary kernels over the shared strided loop.
//
// Each takes a functor on compute types (float for float16/bfloat16) and writes R. Inner runs
// that are contiguous, or that broadcast a scalar, get plain indexed loops the compiler
// vectorizes; anything else steps by byte strides.
#pragma once

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

// out = fn(a) elementwise; In and R are element types.
template <typename In, typename R, typename Fn>
void UnaryKernel(const Tensor& in, const Tensor& out, Fn fn) {
  ForEachElement<2>(out, {in}, [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
    if (s[0] == sizeof(R) && s[1] == sizeof(In)) {
      auto* o = reinterpret_cast<R*>(p[0]);
      auto* a = reinterpret_cast<const In*>(p[1]);
      for (int64_t i = 0; i < n; ++i) o[i] = Convert<R>(fn(static_cast<compute_t<In>>(a[i])));
      return;
    }
    for (int64_t i = 0; i < n; ++i) Store<R>(p[0] + i * s[0], fn(Load<In>(p[1] + i * s[1])));
  });
}

// out = fn(a, b) with NumPy broadcasting; a and b share element type In.
template <typename In, typename R, typename Fn>
void BinaryKernel(const Tensor& a, const Tensor& b, const Tensor& out, Fn fn) {
  ForEachElement<3>(out, {a, b}, [&](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
    auto* o = reinterpret_cast<R*>(p[0]);
    auto* x = reinterpret_cast<const In*>(p[1]);
    auto* y = reinterpret_cast<const In*>(p[2]);
    using C = compute_t<In>;
    if (s[0] == sizeof(R)) {
      if (s[1] == sizeof(In) && s[2] == sizeof(In)) {
        for (int64_t i = 0; i < n; ++i)
          o[i] = Convert<R>(fn(static_cast<C>(x[i]), static_cast<C>(y[i])));
        return;
      }
      if (s[1] == sizeof(In) && s[2] == 0) {
        const C yv = static_cast<C>(*y);
        for (int64_t i = 0; i < n; ++i) o[i] = Convert<R>(fn(static_cast<C>(x[i]), yv));
        return;
      }
      if (s[1] == 0 && s[2] == sizeof(In)) {
        const C xv = static_cast<C>(*x);
        for (int64_t i = 0; i < n; ++i) o[i] = Convert<R>(fn(xv, static_cast<C>(y[i])));
        return;
      }
    }
    for (int64_t i = 0; i < n; ++i)
      Store<R>(p[0] + i * s[0], fn(Load<In>(p[1] + i * s[1]), Load<In>(p[2] + i * s[2])));
  });
}

// out = fn(a, b, c) with broadcasting; element types A, B, C may differ (where's bool mask).
template <typename A, typename B, typename C, typename R, typename Fn>
void TernaryKernel(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& out, Fn fn) {
  ForEachElement<4>(
      out, {a, b, c}, [&](std::array<char*, 4> p, std::array<int64_t, 4> s, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          Store<R>(p[0] + i * s[0], fn(Load<A>(p[1] + i * s[1]), Load<B>(p[2] + i * s[2]),
                                       Load<C>(p[3] + i * s[3])));
      });
}

}  // namespace kiln::cpu
