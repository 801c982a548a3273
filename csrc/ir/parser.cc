// parser.cc - reads the text form printer.cc writes, so golden tests can start from IR text.
//
// A hand-written recursive-descent parser over a small tokenizer. Node output types come from
// the `: types` annotation; Verify() then re-derives them, so a wrong annotation is reported.
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "core/error.h"
#include "ir/ir.h"
#include "kernels/cpu/copy.h"

namespace kiln::ir {
namespace {

enum class Tok { Ident, Value, Global, Number, String, Punct, End };

struct Token {
  Tok kind;
  std::string text;
  int line;
};

std::vector<Token> Tokenize(const std::string& src) {
  std::vector<Token> out;
  int line = 1;
  size_t i = 0;
  auto error = [&](const std::string& what) {
    Throw(ErrorKind::Value, "ir parse error at line ", line, ": ", what);
  };
  while (i < src.size()) {
    char c = src[i];
    if (c == '\n') {
      ++line;
      ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (c == '/' && i + 1 < src.size() && src[i + 1] == '/') {  // comment to end of line
      while (i < src.size() && src[i] != '\n') ++i;
      continue;
    }
    size_t start = i;
    if (c == '%' || c == '@') {
      ++i;
      while (i < src.size() &&
             (std::isalnum(static_cast<unsigned char>(src[i])) || src[i] == '_' || src[i] == '.'))
        ++i;
      out.push_back(
          {c == '%' ? Tok::Value : Tok::Global, src.substr(start + 1, i - start - 1), line});
      continue;
    }
    if (c == '"') {
      std::string s;
      for (++i; i < src.size() && src[i] != '"'; ++i) {
        if (src[i] == '\\' && i + 1 < src.size()) {
          ++i;
          s += src[i] == 'n' ? '\n' : src[i];
        } else {
          s += src[i];
        }
      }
      if (i >= src.size()) error("unterminated string");
      ++i;
      out.push_back({Tok::String, s, line});
      continue;
    }
    bool sign = (c == '-' || c == '+') && i + 1 < src.size() &&
                (std::isdigit(static_cast<unsigned char>(src[i + 1])) || src[i + 1] == 'i' ||
                 src[i + 1] == 'n');
    if (std::isdigit(static_cast<unsigned char>(c)) || sign) {
      ++i;
      while (i < src.size() &&
             (std::isalnum(static_cast<unsigned char>(src[i])) || src[i] == '.' ||
              ((src[i] == '-' || src[i] == '+') && (src[i - 1] == 'e' || src[i - 1] == 'E'))))
        ++i;
      out.push_back({Tok::Number, src.substr(start, i - start), line});
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (i < src.size() && (std::isalnum(static_cast<unsigned char>(src[i])) || src[i] == '_'))
        ++i;
      out.push_back({Tok::Ident, src.substr(start, i - start), line});
      continue;
    }
    if (c == '-' && i + 1 < src.size() && src[i + 1] == '>') {
      out.push_back({Tok::Punct, "->", line});
      i += 2;
      continue;
    }
    if (std::string("()[]{},:=?").find(c) == std::string::npos)
      error(std::string("unexpected '") + c + "'");
    out.push_back({Tok::Punct, std::string(1, c), line});
    ++i;
  }
  out.push_back({Tok::End, "", line});
  return out;
}

DType DTypeFromShort(const std::string& s, int line) {
  static const std::unordered_map<std::string, DType> kTable = {
      {"b", DType::Bool},      {"u8", DType::UInt8},      {"i8", DType::Int8},
      {"i16", DType::Int16},   {"i32", DType::Int32},     {"i64", DType::Int64},
      {"f16", DType::Float16}, {"bf16", DType::BFloat16}, {"f32", DType::Float32},
      {"f64", DType::Float64}};
  auto it = kTable.find(s);
  if (it == kTable.end())
    Throw(ErrorKind::Value, "ir parse error at line ", line, ": unknown type '", s, "'");
  return it->second;
}

class Parser {
 public:
  explicit Parser(const std::string& text) : toks_(Tokenize(text)) {}

  Module Run() {
    Module module;
    while (Peek().kind != Tok::End) ParseFunc(module);
    KILN_CHECK(!module.empty(), Value, "ir parse error: no functions");
    return module;
  }

 private:
  const Token& Peek() const { return toks_[pos_]; }
  Token Next() { return toks_[pos_++]; }
  [[noreturn]] void Fail(const std::string& what) {
    Throw(ErrorKind::Value, "ir parse error at line ", Peek().line, ": ", what, ", found '",
          Peek().text, "'");
  }
  bool IsPunct(const char* p) const { return Peek().kind == Tok::Punct && Peek().text == p; }
  bool IsIdent(const char* w) const { return Peek().kind == Tok::Ident && Peek().text == w; }
  void Expect(const char* p) {
    if (!IsPunct(p)) Fail(std::string("expected '") + p + "'");
    ++pos_;
  }
  void ExpectIdent(const char* w) {
    if (!IsIdent(w)) Fail(std::string("expected '") + w + "'");
    ++pos_;
  }
  std::string ExpectKind(Tok kind, const char* what) {
    if (Peek().kind != kind) Fail(std::string("expected ") + what);
    return Next().text;
  }

  TensorMeta ParseType() {
    TensorMeta meta;
    if (IsIdent("weak")) {
      ++pos_;
      meta.weak = true;
    }
    int line = Peek().line;
    meta.dtype = DTypeFromShort(ExpectKind(Tok::Ident, "a type"), line);
    Expect("[");
    while (!IsPunct("]")) {
      if (IsPunct("?")) {
        ++pos_;
        meta.shape.push_back(-1);
      } else {
        meta.shape.push_back(std::stoll(ExpectKind(Tok::Number, "a dimension")));
      }
      if (IsPunct(",")) ++pos_;
    }
    Expect("]");
    return meta;
  }

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
        items.push_back(std::stoll(ExpectKind(Tok::Number, "an int")));
        if (IsPunct(",")) ++pos_;
      }
      Expect(")");
      return items;
    }
    if (Peek().kind == Tok::String) return Next().text;
    if (Peek().kind == Tok::Number) {
      std::string t = Next().text;
      bool is_float = t.find_first_of(".eEin") != std::string::npos;
      if (is_float) return std::strtod(t.c_str(), nullptr);
      return static_cast<int64_t>(std::stoll(t));
    }
    std::string word = ExpectKind(Tok::Ident, "an attribute value");
    if (word == "None") return std::monostate{};
    if (word == "True") return true;
    if (word == "False") return false;
    if (word == "inf") return HUGE_VAL;
    if (word == "nan") return std::nan("");
    return DTypeFromName(word);
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
      std::vector<double> values;
      while (!IsPunct("]")) {
        bool word = IsIdent("inf") || IsIdent("nan");
        std::string t = word ? Next().text : ExpectKind(Tok::Number, "a number");
        values.push_back(std::strtod(t.c_str(), nullptr));
        if (IsPunct(",")) ++pos_;
      }
      Expect("]");
      const_values_ = std::move(values);
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
      if (head == "raise") node.callees.push_back(ExpectKind(Tok::Ident, "an exception type"));
      node.text = ExpectKind(Tok::String, "a format string");
      node.inputs = ParseOperands();
    } else {
      node.kind = NodeKind::Op;
      node.op = OpKindFromName(head);
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
    if (node.kind == NodeKind::Const) node.value = MakeConst(node.outputs.at(0));
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
    loc.line = std::stoi(ExpectKind(Tok::Number, "a line"));
    Expect(":");
    loc.column = std::stoi(ExpectKind(Tok::Number, "a column"));
    Expect(")");
  }

  Tensor MakeConst(const TensorMeta& meta) {
    Shape shape = meta.shape;
    for (int64_t d : shape)
      if (d < 0) Fail("a constant needs a known shape");
    if (static_cast<int64_t>(const_values_.size()) != NumElements(shape))
      Fail("constant has the wrong number of values");
    Tensor src = Tensor::Empty(shape, DType::Float64);
    for (size_t i = 0; i < const_values_.size(); ++i) src.data<double>()[i] = const_values_[i];
    Tensor out = src.To(meta.dtype);
    if (out.same_storage(src)) out = out.Clone();
    out.impl()->wrapped_number = meta.weak;
    return out;
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  std::unordered_map<std::string, ValueRef> values_;
  int next_ = 0;
  std::vector<double> const_values_;
};

}  // namespace

Module Parse(const std::string& text) { return Parser(text).Run(); }

}  // namespace kiln::ir
