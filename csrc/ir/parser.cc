// parser.cc - reads the text form printer.cc writes, so golden tests can start from IR text.
//
// A hand-written recursive-descent parser over the tokens of text_form.h; an optional
// `signature { ... }` block before the functions is read by signature_text.cc. Node output types
// come from the `: types` annotation; Verify() then re-derives them, so a wrong annotation is
// reported. Every literal is converted with a range check (the text may come from anywhere), and
// every error names the line:column it was found at.
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/error.h"
#include "ir/ir.h"
#include "ir/text_form.h"

namespace kiln::ir {
namespace {

using text::FailAt;
using text::ToDouble;
using text::ToInt;
using text::Tok;
using text::Token;
using text::ToUInt64;
class Parser : public text::TokenCursor {
 public:
  explicit Parser(const std::string& text) : TokenCursor(text) {}

  Module Run() {
    Module module;
    if (IsIdent("signature")) module.set_signature(ParseSignature(*this));
    while (Peek().kind != Tok::End) ParseFunc(module);
    KILN_CHECK(!module.empty(), Value, "ir parse error: no functions");
    return module;
  }

 private:
  static constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

  ValueRef ParseOperand() {
    if (IsIdent("none")) {
      ++pos_;
      return ValueRef::None();
    }
    std::string name = ExpectKind(Tok::Value, "a value (%N)");
    auto it = values_.find(name);
    if (it == values_.end()) Fail("use of undefined value %" + name);
    return it->second;
  }

  std::vector<ValueRef> ParseOperands() {
    std::vector<ValueRef> out;
    Expect("(");
    while (!IsPunct(")")) {
      out.push_back(ParseOperand());
      if (IsPunct(",")) ++pos_;
    }
    Expect(")");
    return out;
  }

  AttrValue ParseAttr() {
    if (IsPunct("(")) {
      ++pos_;
      std::vector<int64_t> items;
      while (!IsPunct(")")) {
        items.push_back(ToInt(Expect(Tok::Number, "an int"), "an int", kInt64Min, kInt64Max));
        if (IsPunct(",")) ++pos_;
      }
      Expect(")");
      return items;
    }
    if (Peek().kind == Tok::String) return Next().text;
    if (Peek().kind == Tok::Number) {
      const Token& t = Next();
      bool is_float = t.text.find_first_of(".eEin") != std::string::npos;
      if (is_float) return ToDouble(t, "a float");
      return ToInt(t, "an int", kInt64Min, kInt64Max);
    }
    const Token& word_tok = Expect(Tok::Ident, "an attribute value");
    const std::string& word = word_tok.text;
    if (word == "None") return std::monostate{};
    if (word == "True") return true;
    if (word == "False") return false;
    if (word == "inf") return HUGE_VAL;
    if (word == "nan") return std::nan("");
    try {
      return DTypeFromName(word);
    } catch (const Error& e) {
      FailAt(word_tok, e.what());
    }
  }

  void ParseFunc(Module& module) {
    ExpectIdent("func");
    Func& f = module.AddFunc(ExpectKind(Tok::Global, "a function name (@name)"));
    values_.clear();
    next_ = 0;
    Expect("(");
    while (!IsPunct(")")) {
      std::string name = ExpectKind(Tok::Value, "a parameter");
      Expect(":");
      f.params.push_back(ParseType());
      f.param_names.push_back("");
      Define(name, {-1, static_cast<int>(f.params.size()) - 1});
      if (IsPunct(",")) ++pos_;
    }
    Expect(")");
    Expect("->");
    Expect("(");
    while (!IsPunct(")")) {
      ParseType();  // declared result types; Verify checks them against the return values
      if (IsPunct(",")) ++pos_;
    }
    Expect(")");
    Expect("{");
    while (!IsIdent("return")) ParseNode(f);
    ++pos_;
    while (Peek().kind == Tok::Value || IsIdent("none")) {
      f.results.push_back(ParseOperand());
      if (IsPunct(",")) ++pos_;
    }
    Expect("}");
  }

  void Define(const std::string& name, ValueRef v) {
    if (name != std::to_string(next_))
      Fail("values must be numbered in order: expected %" + std::to_string(next_));
    values_[name] = v;
    ++next_;
  }

  void ParseNode(Func& f) {
    std::vector<std::string> names;
    while (Peek().kind == Tok::Value) {
      names.push_back(Next().text);
      if (IsPunct(",")) ++pos_;
    }
    if (!names.empty()) Expect("=");
    Node node;
    std::string head = ExpectKind(Tok::Ident, "an op or keyword");
    if (head == "const") {
      node.kind = NodeKind::Const;
      Expect("[");
      const_values_.clear();
      while (!IsPunct("]")) {
        bool word = IsIdent("inf") || IsIdent("nan");
        const_values_.push_back(word ? Next() : Expect(Tok::Number, "a number"));
        if (IsPunct(",")) ++pos_;
      }
      Expect("]");
    } else if (head == "if") {
      node.kind = NodeKind::If;
      node.inputs = {ParseOperand()};
      for (ValueRef v : ParseOperands()) node.inputs.push_back(v);
      ExpectIdent("then");
      node.callees.push_back(ExpectKind(Tok::Global, "@then"));
      ExpectIdent("else");
      node.callees.push_back(ExpectKind(Tok::Global, "@else"));
    } else if (head == "while") {
      node.kind = NodeKind::While;
      node.inputs = ParseOperands();
      ExpectIdent("cond");
      node.callees.push_back(ExpectKind(Tok::Global, "@cond"));
      ExpectIdent("body");
      node.callees.push_back(ExpectKind(Tok::Global, "@body"));
    } else if (head == "call") {
      node.kind = NodeKind::Call;
      node.callees.push_back(ExpectKind(Tok::Global, "@callee"));
      node.inputs = ParseOperands();
    } else if (head == "print" || head == "raise") {
      node.kind = head == "print" ? NodeKind::Print : NodeKind::Raise;
      if (head == "raise")
        node.callees.push_back(
            Peek().kind == Tok::String ? Next().text : ExpectKind(Tok::Ident, "an exception type"));
      node.text = ExpectKind(Tok::String, "a format string");
      node.inputs = ParseOperands();
    } else if (head == "interpret") {
      node.kind = NodeKind::Interpret;
      node.callees.push_back(ExpectKind(Tok::String, "a site key"));
      node.text = ExpectKind(Tok::String, "what the site runs");
      node.inputs = ParseOperands();
    } else {
      node.kind = NodeKind::Op;
      try {
        node.op = OpKindFromName(head);
      } catch (const Error& e) {
        FailAt(toks_[pos_ - 1], e.what());
      }
      node.inputs = ParseOperands();
      ParseOpAttrs(node);
    }
    if (IsPunct(":")) {
      ++pos_;
      do {
        if (IsPunct(",")) ++pos_;
        node.outputs.push_back(ParseType());
      } while (IsPunct(","));
    }
    if (IsIdent("loc")) ParseLoc(node.loc);
    if (node.outputs.size() != names.size()) Fail("the number of results does not match the types");
    if (node.kind == NodeKind::Const) {
      if (node.outputs.size() != 1) Fail("a constant has exactly one result");
      node.value = MakeConst(node.outputs[0]);
    }
    f.nodes.push_back(std::move(node));
    int id = static_cast<int>(f.nodes.size()) - 1;
    for (size_t k = 0; k < names.size(); ++k) Define(names[k], {id, static_cast<int>(k)});
  }

  void ParseOpAttrs(Node& node) {
    const OpDef& def = GetOpDef(node.op);
    node.attrs.clear();
    for (const auto& spec : def.attrs) node.attrs.push_back(spec.default_value);
    if (!IsPunct("{")) return;
    ++pos_;
    while (!IsPunct("}")) {
      std::string name = ExpectKind(Tok::Ident, "an attribute name");
      Expect("=");
      size_t i = 0;
      while (i < def.attrs.size() && name != def.attrs[i].name) ++i;
      if (i == def.attrs.size()) Fail(std::string(def.name) + " has no attribute '" + name + "'");
      node.attrs[i] = ParseAttr();
      if (IsPunct(",")) ++pos_;
    }
    Expect("}");
  }

  void ParseLoc(SourceLoc& loc) {
    ++pos_;
    Expect("(");
    loc.file = ExpectKind(Tok::String, "a file name");
    Expect(":");
    const int64_t kIntMax = std::numeric_limits<int>::max();
    loc.line = static_cast<int>(ToInt(Expect(Tok::Number, "a line"), "a line", 0, kIntMax));
    Expect(":");
    loc.column = static_cast<int>(ToInt(Expect(Tok::Number, "a column"), "a column", 0, kIntMax));
    Expect(")");
  }

  // A constant's values, each checked to fit its dtype: integers are read as integers (not
  // through a double, which would round above 2^53), floats must not overflow the type.
  Tensor MakeConst(const TensorMeta& meta) {
    const Shape& shape = meta.shape;
    for (int64_t d : shape)
      if (d < 0) Fail("a constant needs a known shape");
    if (static_cast<int64_t>(const_values_.size()) != NumElements(shape))
      Fail("constant has the wrong number of values");
    const bool floating = IsFloating(meta.dtype), u64 = meta.dtype == DType::UInt64;
    Tensor src = Tensor::Empty(shape, floating ? DType::Float64
                                      : u64    ? DType::UInt64
                                               : DType::Int64);
    for (size_t i = 0; i < const_values_.size(); ++i) {
      if (floating) {
        src.data<double>()[i] = ConstFloat(const_values_[i], meta.dtype);
      } else if (u64) {
        src.data<uint64_t>()[i] = ToUInt64(const_values_[i], DTypeName(meta.dtype));
      } else {
        auto [lo, hi] = IntRange(meta.dtype);
        src.data<int64_t>()[i] = ToInt(const_values_[i], DTypeName(meta.dtype), lo, hi);
      }
    }
    Tensor out = src.To(meta.dtype);
    if (out.same_storage(src)) out = out.Clone();
    out.impl()->wrapped_number = meta.weak;
    return out;
  }

  static std::pair<int64_t, int64_t> IntRange(DType dtype) {
    switch (dtype) {
      case DType::Bool:
        return {0, 1};
      case DType::UInt8:
        return {0, 255};
      case DType::UInt16:
        return {0, 65535};
      case DType::UInt32:
        return {0, std::numeric_limits<uint32_t>::max()};
      case DType::Int8:
        return {-128, 127};
      case DType::Int16:
        return {-32768, 32767};
      case DType::Int32:
        return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
      default:
        return {kInt64Min, kInt64Max};
    }
  }

  static double ConstFloat(const Token& tok, DType dtype) {
    double v = ToDouble(tok, DTypeName(dtype));
    double max = dtype == DType::Float16    ? 65504.0
                 : dtype == DType::BFloat16 ? 3.3895313892515355e38
                 : dtype == DType::Float32  ? std::numeric_limits<float>::max()
                                            : std::numeric_limits<double>::max();
    if (std::isfinite(v) && std::fabs(v) > max)
      FailAt(tok, "'" + tok.text + "' is out of range for " + DTypeName(dtype));
    return v;
  }

  std::unordered_map<std::string, ValueRef> values_;
  int next_ = 0;
  std::vector<Token> const_values_;
};

}  // namespace

Module Parse(const std::string& text) { return Parser(text).Run(); }

}  // namespace kiln::ir
