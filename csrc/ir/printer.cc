// printer.cc - the IR's stable text form.
//
//   func @main(%0: f32[2,3], %1: f32[3]) -> (f32[2,3]) {
//     %2 = add(%0, %1) : f32[2,3] loc("model.py":3:8)
//     %3, %4 = if %c(%2) then @then_0 else @else_0 : f32[2,3], f32[]
//     return %3
//   }
// Values are numbered in definition order (params first), attributes follow the op schema,
// floats print so they parse back to the same bits.
#include <cstdio>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "ir/ir.h"
#include "ir/text_form.h"

namespace kiln::ir {
namespace {

using text::FormatDouble;
using text::Quote;

std::string AttrText(const AttrValue& value) {
  if (auto* d = std::get_if<double>(&value)) return FormatDouble(*d);
  if (auto* s = std::get_if<std::string>(&value)) return Quote(*s);
  if (auto* v = std::get_if<std::vector<int64_t>>(&value)) {
    std::string out = "(";
    for (size_t i = 0; i < v->size(); ++i) out += (i ? ", " : "") + std::to_string((*v)[i]);
    return out + (v->size() == 1 ? ",)" : ")");
  }
  return AttrToString(value);
}

// Integer constants print through int64 (uint64 through itself), not double, so values above
// 2^53 keep every digit.
std::string ConstText(const Tensor& value) {
  const DType dtype = value.dtype();
  const DType wide = IsFloating(dtype)        ? DType::Float64
                     : dtype == DType::UInt64 ? DType::UInt64
                                              : DType::Int64;
  Tensor values = value.To(wide).Contiguous();
  std::string out = "[";
  for (int64_t i = 0; i < values.numel(); ++i) {
    out += i ? ", " : "";
    if (wide == DType::Float64) out += FormatDouble(values.data<double>()[i]);
    if (wide == DType::UInt64) out += std::to_string(values.data<uint64_t>()[i]);
    if (wide == DType::Int64) out += std::to_string(values.data<int64_t>()[i]);
  }
  return out + "]";
}

class FuncPrinter {
 public:
  FuncPrinter(const Func& f, std::ostringstream& out) : f_(f), out_(out) {}

  void Run() {
    out_ << "func @" << f_.name << "(";
    for (size_t i = 0; i < f_.params.size(); ++i) {
      out_ << (i ? ", " : "") << Name({-1, static_cast<int>(i)}) << ": "
           << TypeString(f_.params[i]);
    }
    out_ << ") -> (";
    auto results = f_.result_metas();
    for (size_t i = 0; i < results.size(); ++i) out_ << (i ? ", " : "") << TypeString(results[i]);
    out_ << ") {\n";
    for (size_t n = 0; n < f_.nodes.size(); ++n) PrintNode(static_cast<int>(n));
    out_ << "  return";
    for (size_t i = 0; i < f_.results.size(); ++i) out_ << (i ? ", " : " ") << Name(f_.results[i]);
    out_ << "\n}\n";
  }

 private:
  std::string Name(ValueRef v) {
    if (v.is_none()) return "none";
    if (v.is_param()) return "%" + std::to_string(v.index);
    auto it = numbers_.find(Key(v));
    KILN_CHECK(it != numbers_.end(), Value, "ir printer: @", f_.name,
               " uses a value before it is defined");
    return "%" + std::to_string(it->second);
  }
  static int64_t Key(ValueRef v) { return (static_cast<int64_t>(v.node) << 20) + v.index; }

  // A builtin exception by its name; another class's name ("module.Class@0", which the front
  // end makes unique) quoted, so that the text reads back.
  static std::string RaiseType(const Node& node) {
    const std::string name = node.callees.empty() ? "RuntimeError" : node.callees[0];
    return text::IsIdentifier(name) ? name : Quote(name);
  }

  std::string Operands(const std::vector<ValueRef>& inputs, size_t from = 0) {
    std::string s = "(";
    for (size_t i = from; i < inputs.size(); ++i) s += (i > from ? ", " : "") + Name(inputs[i]);
    return s + ")";
  }

  void PrintNode(int n) {
    const Node& node = f_.nodes[n];
    out_ << "  ";
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      numbers_[Key({n, static_cast<int>(k)})] = next_++;
      out_ << (k ? ", " : "") << Name({n, static_cast<int>(k)});
    }
    if (!node.outputs.empty()) out_ << " = ";
    switch (node.kind) {
      case NodeKind::Op:
        PrintOp(node);
        break;
      case NodeKind::Const:
        out_ << "const " << ConstText(node.value);
        break;
      case NodeKind::If:
        out_ << "if " << Name(node.inputs[0]) << Operands(node.inputs, 1) << " then @"
             << node.callees[0] << " else @" << node.callees[1];
        break;
      case NodeKind::While:
        out_ << "while" << Operands(node.inputs) << " cond @" << node.callees[0] << " body @"
             << node.callees[1];
        break;
      case NodeKind::Call:
        out_ << "call @" << node.callees[0] << Operands(node.inputs);
        break;
      case NodeKind::Print:
        out_ << "print " << Quote(node.text) << Operands(node.inputs);
        break;
      case NodeKind::Raise:
        out_ << "raise " << RaiseType(node) << " " << Quote(node.text) << Operands(node.inputs);
        break;
      case NodeKind::Interpret:
        out_ << "interpret " << Quote(node.callees[0]) << " " << Quote(node.text)
             << Operands(node.inputs);
        break;
    }
    if (!node.outputs.empty()) {
      out_ << " : ";
      for (size_t k = 0; k < node.outputs.size(); ++k)
        out_ << (k ? ", " : "") << TypeString(node.outputs[k]);
    }
    if (node.loc.known())
      out_ << " loc(" << Quote(node.loc.file) << ":" << node.loc.line << ":" << node.loc.column
           << ")";
    out_ << "\n";
  }

  void PrintOp(const Node& node) {
    const OpDef& def = GetOpDef(node.op);
    out_ << def.name << Operands(node.inputs);
    if (node.attrs.empty()) return;
    out_ << " {";
    for (size_t i = 0; i < node.attrs.size(); ++i)
      out_ << (i ? ", " : "") << def.attrs[i].name << "=" << AttrText(node.attrs[i]);
    out_ << "}";
  }

  const Func& f_;
  std::ostringstream& out_;
  std::unordered_map<int64_t, int> numbers_;
  int next_ = static_cast<int>(f_.params.size());
};

}  // namespace

std::string TypeString(const TensorMeta& meta) {
  std::string s = meta.weak ? "weak " : "";
  s += text::ShortDType(meta.dtype);
  s += "[";
  for (size_t i = 0; i < meta.shape.size(); ++i)
    s += (i ? "," : "") + (meta.shape[i] < 0 ? std::string("?") : std::to_string(meta.shape[i]));
  return s + "]";
}

std::string Print(const Module& module) {
  std::ostringstream out;
  if (module.signature()) out << PrintSignature(*module.signature()) << "\n";
  for (size_t i = 0; i < module.funcs().size(); ++i) {
    if (i) out << "\n";
    FuncPrinter(*module.funcs()[i], out).Run();
  }
  return out.str();
}

}  // namespace kiln::ir
