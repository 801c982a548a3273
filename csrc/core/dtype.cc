// dtype.cc - dtype names, sizes and the promotion table documented in docs/type_promotion.md.
#include "core/dtype.h"

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

// An unsigned with a signed integer: the narrowest signed type holding both value ranges, as
// NumPy. No signed type holds uint64's, and NumPy then gives float64; so does kiln.
DType PromoteMixedSign(DType unsigned_type, DType signed_type) {
  const int ubits = IntBits(unsigned_type), sbits = IntBits(signed_type);
  if (sbits > ubits) return signed_type;
  if (ubits == 64) return DType::Float64;
  return SignedIntOfBits(2 * ubits);
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
  if (IsUnsigned(a) != IsUnsigned(b))
    return IsUnsigned(a) ? PromoteMixedSign(a, b) : PromoteMixedSign(b, a);
  return ItemSize(a) >= ItemSize(b) ? a : b;
}

DType PromoteWithScalar(DType tensor, DType scalar) {
  if (Category(scalar) <= Category(tensor)) return tensor;
  return Category(scalar) == 1 ? DType::Int64 : DType::Float32;
}

bool IntFitsDType(int64_t value, DType d) {
  if (!IsIntegral(d) || value >= 0) return UIntFitsDType(static_cast<uint64_t>(value), d);
  if (IsUnsigned(d)) return false;
  const int bits = IntBits(d);
  return bits == 64 || value >= -(int64_t{1} << (bits - 1));
}

// Value bits: the width, less the sign bit of a signed type.
bool UIntFitsDType(uint64_t value, DType d) {
  if (!IsIntegral(d)) return true;
  const int bits = IntBits(d) - (IsUnsigned(d) ? 0 : 1);
  return bits >= 64 || value < (uint64_t{1} << bits);
}

void CheckWeakIntFits(const char* op, int64_t value, DType target) {
  KILN_CHECK(!IsIntegral(target) || IntFitsDType(value, target), Overflow, op, ": Python integer ",
             value, " out of bounds for ", DTypeName(target));
}

void CheckWeakUIntFits(const char* op, uint64_t value, DType target) {
  KILN_CHECK(!IsIntegral(target) || UIntFitsDType(value, target), Overflow, op, ": Python integer ",
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
