// vector_libm.h - transcendental functions that loops vectorize: glibc's vector math (libmvec).
//
// A call of std::sin, std::log or std::erf per element keeps a loop scalar: over 2^20 floats
// erf took 24 ms, sin 8 ms, log 3.2 ms. glibc (2.35 and later) ships SSE, AVX, AVX2 and AVX-512
// versions of these functions under the x86-64 vector function ABI's names (_ZGVdN8v_sinf, ...).
// Declared here with GCC's `simd` attribute, a loop over one of them compiles to calls of the
// vector version for the target's widest ISA, 8 floats per call on AVX2, and only the loop's tail
// calls the scalar one: 6-17x faster, within 4 ulp (glibc's documented bounds; checked against
// double libm in tests/cpp/test_vector_libm.cc). Elsewhere (Clang, other C libraries, older glibc)
// the functions below are std::'s. The linker takes libmvec through libm (CMakeLists.txt).
#pragma once

#include <cmath>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define KILN_HAVE_LIBMVEC 1
#endif

namespace kiln::cpu {

#ifdef KILN_HAVE_LIBMVEC
// One libm function under a kiln name whose declaration promises vector versions; the asm label
// makes it the library's own symbol, so the vector names derive from "sinf", "sin", ...
#define KILN_VECTOR_LIBM(kiln_name, c_name)                                             \
  extern "C" __attribute__((simd("notinbranch"), const, nothrow)) float kiln_name##_f(  \
      float) __asm__(#c_name "f");                                                      \
  extern "C" __attribute__((simd("notinbranch"), const, nothrow)) double kiln_name##_d( \
      double) __asm__(#c_name);                                                         \
  inline float kiln_name(float x) { return kiln_name##_f(x); }                          \
  inline double kiln_name(double x) { return kiln_name##_d(x); }
#define KILN_VECTOR_LIBM2(kiln_name, c_name)                                            \
  extern "C" __attribute__((simd("notinbranch"), const, nothrow)) float kiln_name##_f(  \
      float, float) __asm__(#c_name "f");                                               \
  extern "C" __attribute__((simd("notinbranch"), const, nothrow)) double kiln_name##_d( \
      double, double) __asm__(#c_name);                                                 \
  inline float kiln_name(float x, float y) { return kiln_name##_f(x, y); }              \
  inline double kiln_name(double x, double y) { return kiln_name##_d(x, y); }
#else
#define KILN_VECTOR_LIBM(kiln_name, c_name)                  \
  inline float kiln_name(float x) { return std::c_name(x); } \
  inline double kiln_name(double x) { return std::c_name(x); }
#define KILN_VECTOR_LIBM2(kiln_name, c_name)                             \
  inline float kiln_name(float x, float y) { return std::c_name(x, y); } \
  inline double kiln_name(double x, double y) { return std::c_name(x, y); }
#endif

KILN_VECTOR_LIBM(VecSin, sin)
KILN_VECTOR_LIBM(VecCos, cos)
KILN_VECTOR_LIBM(VecTan, tan)
KILN_VECTOR_LIBM(VecAsin, asin)
KILN_VECTOR_LIBM(VecAcos, acos)
KILN_VECTOR_LIBM(VecAtan, atan)
KILN_VECTOR_LIBM(VecSinh, sinh)
KILN_VECTOR_LIBM(VecCosh, cosh)
KILN_VECTOR_LIBM(VecAsinh, asinh)
KILN_VECTOR_LIBM(VecAcosh, acosh)
KILN_VECTOR_LIBM(VecAtanh, atanh)
KILN_VECTOR_LIBM(VecErf, erf)
KILN_VECTOR_LIBM(VecErfc, erfc)
KILN_VECTOR_LIBM(VecLog, log)
KILN_VECTOR_LIBM(VecLog1p, log1p)
KILN_VECTOR_LIBM(VecExp, exp)
KILN_VECTOR_LIBM(VecTanh, tanh)
KILN_VECTOR_LIBM(VecExpm1, expm1)
KILN_VECTOR_LIBM2(VecPow, pow)

#undef KILN_VECTOR_LIBM
#undef KILN_VECTOR_LIBM2

}  // namespace kiln::cpu
