// dtype.h - the closed list of element types, generated from one X-macro, and type promotion.
#pragma once

#include <cstdint>
#include <string>

#include "core/half.h"

namespace kiln {

// KILN_FORALL_DTYPES(X): X(Enum, c_type, "name"), in promotion-rank order within each category.
#define KILN_FORALL_DTYPES(X)       \
  X(Bool, bool, "bool")             \
  X(UInt8, uint8_t, "uint8")        \
  X(Int8, int8_t, "int8")           \
  X(Int16, int16_t, "int16")        \
  X(Int32, int32_t, "int32")        \
  X(Int64, int64_t, "int64")        \
  X(Float16, Half, "float16")       \
  X(BFloat16, BFloat16, "bfloat16") \
  X(Float32, float, "float32")      \
  X(Float64, double, "float64")

enum class DType : uint8_t {
#define KILN_DTYPE_ENUM(e, t, n) e,
  KILN_FORALL_DTYPES(KILN_DTYPE_ENUM)
#undef KILN_DTYPE_ENUM
};
constexpr int kNumDTypes = 10;

template <typename T>
struct DTypeOf;
#define KILN_DTYPE_OF(e, t, n)               \
  template <>                                \
  struct DTypeOf<t> {                        \
    static constexpr DType value = DType::e; \
  };
KILN_FORALL_DTYPES(KILN_DTYPE_OF)
#undef KILN_DTYPE_OF

size_t ItemSize(DType dtype);
const char* DTypeName(DType dtype);
// Parses a dtype name ("float32", also "float"/"int"/"bool_" aliases); throws TypeError if unknown.
DType DTypeFromName(const std::string& name);

inline bool IsFloating(DType d) {
  return d == DType::Float16 || d == DType::BFloat16 || d == DType::Float32 || d == DType::Float64;
}
inline bool IsIntegral(DType d) { return !IsFloating(d) && d != DType::Bool; }
inline bool IsSigned(DType d) { return d != DType::Bool && d != DType::UInt8; }

// Whether the integer `value` is representable in the integer dtype `d` (NumPy 2's rule for
// Python ints joining an integer array: out of range is an OverflowError, never a wrap).
bool IntFitsDType(int64_t value, DType d);
// Throws OverflowError naming `op` when a weakly typed Python int scalar (a 0-d int64 tensor
// marked wrapped_number) is about to be cast to an integer dtype it does not fit.
void CheckWeakIntFits(const char* op, int64_t value, DType target);

// The type two tensors combine to (docs/type_promotion.md): bool < integers < floats; mixed
// signed/unsigned ints widen; float16 with bfloat16 gives float32.
DType PromoteTypes(DType a, DType b);

// How a weakly typed Python scalar joins a tensor of dtype `tensor`: it changes the result only
// when it belongs to a higher category (int tensor + float scalar -> float32).
DType PromoteWithScalar(DType tensor, DType scalar);

// Calls fn(T{}) with T the C type of `dtype`. One switch for every dtype-generic kernel.
template <typename Fn>
decltype(auto) DispatchDType(DType dtype, Fn&& fn) {
  switch (dtype) {
#define KILN_DTYPE_CASE(e, t, n) \
  case DType::e:                 \
    return fn(t{});
    KILN_FORALL_DTYPES(KILN_DTYPE_CASE)
#undef KILN_DTYPE_CASE
  }
  return fn(float{});
}

// The type arithmetic on T is done in: float for the 16-bit floats, T otherwise.
template <typename T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<Half> {
  using type = float;
};
template <>
struct ComputeType<BFloat16> {
  using type = float;
};
template <typename T>
using compute_t = typename ComputeType<T>::type;

}  // namespace kiln
