// dtype.h - the closed list of element types, generated from one X-macro, and type promotion.
#pragma once

#include <cstdint>
#include <string>

#include "core/half.h"

namespace kiln {

// KILN_FORALL_DTYPES(X): X(Enum, c_type, "name"): bool, unsigned and signed integers by width,
// then floats. The enum's values are never stored (checkpoints and IR text use the names).
#define KILN_FORALL_DTYPES(X)       \
  X(Bool, bool, "bool")             \
  X(UInt8, uint8_t, "uint8")        \
  X(UInt16, uint16_t, "uint16")     \
  X(UInt32, uint32_t, "uint32")     \
  X(UInt64, uint64_t, "uint64")     \
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
constexpr int kNumDTypes = 13;

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
inline bool IsUnsigned(DType d) {
  return d == DType::UInt8 || d == DType::UInt16 || d == DType::UInt32 || d == DType::UInt64;
}
inline bool IsIntegral(DType d) { return !IsFloating(d) && d != DType::Bool; }
inline bool IsSigned(DType d) { return d != DType::Bool && !IsUnsigned(d); }

// Whether the integer `value` is representable in the integer dtype `d` (NumPy 2's rule for
// Python ints joining an integer array: out of range is an OverflowError, never a wrap).
bool IntFitsDType(int64_t value, DType d);
bool UIntFitsDType(uint64_t value, DType d);
// Throws OverflowError naming `op` when a weakly typed Python int scalar is about to be cast to
// an integer dtype it does not fit. Python ints arrive as 0-d int64 tensors marked
// wrapped_number, or as uint64 ones when they lie in [2**63, 2**64) (the bindings' ToOperand).
// (CheckWeakScalarFits in tensor.h takes the tensor.)
void CheckWeakIntFits(const char* op, int64_t value, DType target);
void CheckWeakUIntFits(const char* op, uint64_t value, DType target);

// The type two tensors combine to (docs/type_promotion.md): bool < integers < floats; an
// unsigned with a signed integer widens to a signed type holding both (NumPy's rule, float64
// for uint64 with a signed type); float16 with bfloat16 gives float32.
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

// The type arithmetic on T is done in: float for the 16-bit floats; uint32_t for uint16_t,
// whose products C++ would otherwise promote to int (signed overflow is undefined; unsigned
// arithmetic wraps, and narrowing the result back gives NumPy's wrapped uint16); T otherwise.
template <typename T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<uint16_t> {
  using type = uint32_t;
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
