// registry.cc - the registry table, attribute accessors and inference helpers shared by ops.
#include "ops/registry.h"

#include <sstream>

#include "core/error.h"

namespace kiln {
namespace {

const char* const kOpNames[] = {
#define OP(e, n, f) n,
#include "ops/op_list.def"
#undef OP
};

OpRegistry BuildRegistry() {
  OpRegistry registry;
  RegisterElementwiseOps(registry);
  RegisterUnaryOps(registry);
  RegisterReduceOps(registry);
  RegisterNormalizationOps(registry);
  RegisterShapeOps(registry);
  RegisterIndexingOps(registry);
  RegisterCreationOps(registry);
  RegisterLinalgOps(registry);
  RegisterConvOps(registry);
  RegisterOptimOps(registry);
  return registry;
}

const OpRegistry& Registry() {
  static const OpRegistry registry = BuildRegistry();
  return registry;
}

}  // namespace

void CheckKind(OpKind kind) {
  int index = static_cast<int>(kind);
  KILN_CHECK(index >= 0 && index < kNumOps, Value, "op kind ", index, " is out of range");
}

const char* OpName(OpKind kind) {
  CheckKind(kind);
  return kOpNames[static_cast<int>(kind)];
}

OpKind OpKindFromName(const std::string& name) {
  for (int i = 0; i < kNumOps; ++i)
    if (name == kOpNames[i]) return static_cast<OpKind>(i);
  Throw(ErrorKind::Value, "unknown op '", name, "'");
}

void OpRegistry::Add(OpDef def) {
  int index = static_cast<int>(def.kind);
  def.name = kOpNames[index];
  defs_[index] = std::move(def);
  present_[index] = true;
}

const OpDef* OpRegistry::Find(OpKind kind) const {
  int index = static_cast<int>(kind);
  return present_[index] ? &defs_[index] : nullptr;
}

const OpDef& GetOpDef(OpKind kind) {
  CheckKind(kind);
  const OpDef* def = Registry().Find(kind);
  KILN_CHECK(def != nullptr, NotImplemented, "op '", OpName(kind),
             "' has no registered definition");
  return *def;
}

bool IsRegistered(OpKind kind) {
  CheckKind(kind);
  return Registry().Find(kind) != nullptr;
}

// ---- Attributes ----

namespace {
[[noreturn]] void AttrTypeError(size_t i, const char* want, const AttrValue& got) {
  Throw(ErrorKind::Type, "attribute ", i, ": expected ", want, ", got ", AttrToString(got));
}
}  // namespace

int64_t AttrInt(const Attrs& a, size_t i) {
  if (auto* v = std::get_if<int64_t>(&a[i])) return *v;
  if (auto* b = std::get_if<bool>(&a[i])) return *b;
  AttrTypeError(i, "an int", a[i]);
}

double AttrFloat(const Attrs& a, size_t i) {
  if (auto* v = std::get_if<double>(&a[i])) return *v;
  if (auto* v = std::get_if<int64_t>(&a[i])) return static_cast<double>(*v);
  if (auto* b = std::get_if<bool>(&a[i])) return *b;
  AttrTypeError(i, "a float", a[i]);
}

bool AttrBool(const Attrs& a, size_t i) {
  if (auto* v = std::get_if<bool>(&a[i])) return *v;
  if (auto* v = std::get_if<int64_t>(&a[i])) return *v != 0;
  AttrTypeError(i, "a bool", a[i]);
}

const std::string& AttrString(const Attrs& a, size_t i) {
  if (auto* v = std::get_if<std::string>(&a[i])) return *v;
  AttrTypeError(i, "a string", a[i]);
}

const std::vector<int64_t>& AttrInts(const Attrs& a, size_t i) {
  if (auto* v = std::get_if<std::vector<int64_t>>(&a[i])) return *v;
  AttrTypeError(i, "a tuple of ints", a[i]);
}

DType AttrDType(const Attrs& a, size_t i) {
  if (auto* v = std::get_if<DType>(&a[i])) return *v;
  AttrTypeError(i, "a dtype", a[i]);
}

std::string AttrToString(const AttrValue& value) {
  std::ostringstream out;
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::monostate>) {
          out << "None";
        } else if constexpr (std::is_same_v<V, bool>) {
          out << (v ? "True" : "False");
        } else if constexpr (std::is_same_v<V, std::string>) {
          out << '"' << v << '"';
        } else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
          out << ShapeStr(v);
        } else if constexpr (std::is_same_v<V, DType>) {
          out << DTypeName(v);
        } else if constexpr (std::is_same_v<V, double>) {
          out.precision(17);
          out << v;
        } else {
          out << v;
        }
      },
      value);
  return out.str();
}

// ---- Inference helpers ----

Shape BroadcastShapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else if (da == -1 || db == -1) {
      out[i] = da == -1 ? db : da;  // the known size wins; the run-time check enforces it
    } else {
      Throw(ErrorKind::Value, op, ": shapes ", ShapeStr(a), " and ", ShapeStr(b),
            " cannot be broadcast together");
    }
  }
  return out;
}

DType PromotedType(const std::vector<TensorMeta>& metas, const std::vector<int>& which) {
  auto visit = [&](auto&& fn) {
    if (which.empty()) {
      for (const auto& m : metas)
        if (m.present) fn(m);
    } else {
      for (int i : which)
        if (metas[i].present) fn(metas[i]);
    }
  };
  bool have_strong = false;
  DType strong = DType::Bool, weak = DType::Bool;
  visit([&](const TensorMeta& m) {
    if (m.weak) {
      weak = PromoteTypes(weak, m.dtype);
    } else {
      strong = have_strong ? PromoteTypes(strong, m.dtype) : m.dtype;
      have_strong = true;
    }
  });
  if (!have_strong) return weak;
  return PromoteWithScalar(strong, weak);
}

void RequireFloating(const TensorMeta& meta, const char* op) {
  KILN_CHECK(IsFloating(meta.dtype), Type, op, ": expected a floating-point tensor, got ",
             DTypeName(meta.dtype));
}

}  // namespace kiln
