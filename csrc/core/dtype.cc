// dtype.cc - dtype names, sizes and the promotion table documented in docs/type_promotion.md.
#include "core/dtype.h"

#include <limits>
#include <type_traits>

#include "core/error.h"

namespace kiln {

size_t ItemSize(DType dtype) {
  switch (dtype) {
#define KILN_DTYPE_SIZE(e, t, n) \
  case DType::e:                 \
    return sizeof(t);
    KILN_FORALL_DTYPES(KILN_DTYPE_SIZE)
#undef KILN_DTYPE_SIZE
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
#define KILN_DTYPE_NAME(e, t, n) \
  case DType::e:                 \
    return n;
    KILN_FORALL_DTYPES(KILN_DTYPE_NAME)
#undef KILN_DTYPE_NAME
  }
  return "?";
}

DType DTypeFromName(const std::string& name) {
#define KILN_DTYPE_PARSE(e, t, n) \
  if (name == n) return DType::e;
  KILN_FORALL_DTYPES(KILN_DTYPE_PARSE)
#undef KILN_DTYPE_PARSE
  if (name == "bool_") return DType::Bool;
  if (name == "float" || name == "float_") return DType::Float32;
  if (name == "half") return DType::Float16;
  if (name == "double") return DType::Float64;
  if (name == "int" || name == "int_") return DType::Int64;
  Throw(ErrorKind::Type, "unknown dtype '", name, "'");
}

namespace {

int Category(DType d) { return d == DType::Bool ? 0 : IsIntegral(d) ? 1 : 2; }

int IntBits(DType d) { return static_cast<int>(ItemSize(d)) * 8; }

DType SignedIntOfBits(int bits) {
  switch (bits) {
    case 8:
      return DType::Int8;
    case 16:
      return DType::Int16;
    case 32:
      return DType::Int32;
    default:
      return DType::Int64;
  }
}

}  // namespace

DType PromoteTypes(DType a, DType b) {
  if (a == b) return a;
  int ca = Category(a), cb = Category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    bool half_pair = (a == DType::Float16 && b == DType::BFloat16) ||
                     (a == DType::BFloat16 && b == DType::Float16);
    if (half_pair) return DType::Float32;
    return ItemSize(a) >= ItemSize(b) ? a : b;
  }
  // Integers: uint8 is the only unsigned type; with a signed type it needs one more bit.
  if (a == DType::UInt8 || b == DType::UInt8) {
    DType other = a == DType::UInt8 ? b : a;
    return SignedIntOfBits(std::max(16, IntBits(other)));
  }
  return ItemSize(a) >= ItemSize(b) ? a : b;
}

DType PromoteWithScalar(DType tensor, DType scalar) {
  if (Category(scalar) <= Category(tensor)) return tensor;
  return Category(scalar) == 1 ? DType::Int64 : DType::Float32;
}

bool IntFitsDType(int64_t value, DType d) {
  return DispatchDType(d, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      return value >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
             (value < 0 ||
              static_cast<uint64_t>(value) <= static_cast<uint64_t>(std::numeric_limits<T>::max()));
    }
    return true;
  });
}

void CheckWeakIntFits(const char* op, int64_t value, DType target) {
  KILN_CHECK(!IsIntegral(target) || IntFitsDType(value, target), Overflow, op, ": Python integer ",
             value, " out of bounds for ", DTypeName(target));
}

std::string ShapeStr(const std::vector<int64_t>& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += shape[i] < 0 ? std::string("?") : std::to_string(shape[i]);
  }
  if (shape.size() == 1) out += ",";
  return out + ")";
}

}  // namespace kiln
