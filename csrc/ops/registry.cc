// registry.cc - the registry table, attribute accessors and inference helpers shared by ops.
#include "ops/registry.h"

#include <algorithm>
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
  RegisterMathOps(registry);
  RegisterSortingOps(registry);
  RegisterReduceOps(registry);
  RegisterNormalizationOps(registry);
  RegisterShapeOps(registry);
  RegisterIndexingOps(registry);
  RegisterCreationOps(registry);
  RegisterLinalgOps(registry);
  RegisterLinalgDecompOps(registry);
  RegisterSpecialOps(registry);
  RegisterConvOps(registry);
  RegisterOptimOps(registry);
  RegisterCollectiveOps(registry);
  RegisterDataOps(registry);
  RegisterCustomOps(registry);
  RegisterRecurrentOps(registry);
  RegisterResizeOps(registry);
  return registry;
}

const OpRegistry& Registry() {
  static const OpRegistry registry = BuildRegistry();
  return registry;
}

}  // namespace

OpDef MakeOpDef(OpKind kind, std::vector<const char*> inputs, std::vector<AttrSpec> attrs,
                InferFn infer, KernelFn kernel, GradRuleFn grad) {
  OpDef def;
  def.kind = kind;
  def.inputs = std::move(inputs);
  def.attrs = std::move(attrs);
  def.infer = infer;
  def.kernel = kernel;
  def.grad = grad;
  return def;
}

namespace {
uint64_t Mask(std::initializer_list<int> which) {
  uint64_t mask = 0;
  for (int k : which) mask |= uint64_t{1} << std::min(k, 63);
  return mask;
}
bool Bit(uint64_t mask, size_t k) { return ((mask >> std::min<size_t>(k, 63)) & 1) != 0; }
}  // namespace

OpDef GradReads(OpDef def, std::initializer_list<int> inputs, std::initializer_list<int> outputs) {
  def.grad_reads_inputs = Mask(inputs);
  def.grad_reads_outputs = Mask(outputs);
  return def;
}

bool GradReadsInput(const OpDef& def, size_t k) { return Bit(def.grad_reads_inputs, k); }
bool GradReadsOutput(const OpDef& def, size_t k) { return Bit(def.grad_reads_outputs, k); }

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

// ---- Schema checks ----

namespace {
bool EndsWith(const char* name, char c) {
  std::string s(name);
  return !s.empty() && s.back() == c;
}

// Which variant alternatives an attribute whose default is `def` may hold (the accessors'
// conversions: AttrInt takes a bool, AttrFloat an int or bool, AttrBool an int).
bool AttrFits(const AttrValue& def, const AttrValue& value) {
  if (std::holds_alternative<std::monostate>(def) || def.index() == value.index()) return true;
  const bool is_int = std::holds_alternative<int64_t>(value);
  const bool is_bool = std::holds_alternative<bool>(value);
  if (std::holds_alternative<int64_t>(def)) return is_bool;
  if (std::holds_alternative<double>(def)) return is_int || is_bool;
  if (std::holds_alternative<bool>(def)) return is_int;
  return false;
}

const char* AttrTypeName(const AttrValue& value) {
  static const char* const kNames[] = {"None",     "a bool",          "an int", "a float",
                                       "a string", "a tuple of ints", "a dtype"};
  return kNames[value.index()];
}
}  // namespace

void CheckInputArity(const OpDef& def, const std::vector<bool>& given) {
  const size_t declared = def.inputs.size();
  const bool variadic = declared > 0 && EndsWith(def.inputs.back(), '*');
  const size_t fixed = variadic ? declared - 1 : declared;
  KILN_CHECK(variadic || given.size() <= declared, Type, def.name, ": expected at most ", declared,
             " tensor inputs, got ", given.size());
  for (size_t i = 0; i < std::max(fixed, given.size()); ++i) {
    const bool present = i < given.size() && given[i];
    const char* name = def.inputs[std::min(i, declared - 1)];
    KILN_CHECK(present || (i < fixed && EndsWith(name, '?')), Type, def.name, ": input ", i, " ('",
               name, "') is required, got ", given.size(), " of ", declared,
               variadic ? " or more" : "", " tensor inputs");
  }
}

void CheckAttrTypes(const OpDef& def, const Attrs& attrs) {
  KILN_CHECK(attrs.size() == def.attrs.size(), Type, def.name, ": expected ", def.attrs.size(),
             " attributes, got ", attrs.size());
  for (size_t i = 0; i < attrs.size(); ++i) {
    const AttrValue& want = def.attrs[i].default_value;
    KILN_CHECK(AttrFits(want, attrs[i]), Type, def.name, ": attribute '", def.attrs[i].name,
               "' must be ", AttrTypeName(want), ", got ", AttrToString(attrs[i]));
  }
}

Attrs CompleteAttrs(const OpDef& def, Attrs attrs) {
  KILN_CHECK(attrs.size() <= def.attrs.size(), Type, def.name, ": expected at most ",
             def.attrs.size(), " attributes, got ", attrs.size());
  for (size_t i = attrs.size(); i < def.attrs.size(); ++i)
    attrs.push_back(def.attrs[i].default_value);
  return attrs;
}

// ---- Inference helpers ----

bool IsStaticShape(const Shape& shape) {
  for (int64_t d : shape)
    if (d < 0) return false;
  return true;
}

TensorMeta MetaOf(const Tensor& t) {
  if (!t.defined()) return TensorMeta{DType::Float32, {}, false, false};
  return TensorMeta{t.dtype(), t.shape(), t.impl()->wrapped_number, true};
}

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

DType PromotionTarget(const OpDef& def, const std::vector<TensorMeta>& metas) {
  DType target = PromotedType(metas, def.promoted_inputs);
  if (def.promotion == Promotion::CommonFloat && !IsFloating(target)) target = DType::Float32;
  return target;
}

void RequireFloating(const TensorMeta& meta, const char* op) {
  KILN_CHECK(IsFloating(meta.dtype), Type, op, ": expected a floating-point tensor, got ",
             DTypeName(meta.dtype));
}

}  // namespace kiln
