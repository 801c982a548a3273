// signature_text.cc - the `signature { ... }` block of the IR text form, written and read.
//
//   signature {
//     input %0 "x" : f32[?,3]
//     weight %1 "fc.weight" : f32[3,2]
//     outputs (result 0, [result 1, None], {"n": 3, opaque 0: 2.5})
//   }
// One line per entry parameter, in order; then the output tree: `result k`, `opaque k`,
// literals spelled as Python spells them, tuples `(a,)`, lists `[a]` and dicts `{k: v}`.
#include <limits>
#include <sstream>

#include "core/error.h"
#include "ir/ir.h"
#include "ir/text_form.h"

namespace kiln::ir {
namespace {

using text::Tok;
using text::TokenCursor;

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::string Joined(const std::vector<OutputTree>& items, int depth);

std::string TreeText(const OutputTree& t, int depth) {
  KILN_CHECK(depth <= kMaxOutputDepth, Value, "ir printer: the outputs nest deeper than ",
             kMaxOutputDepth);
  using Kind = OutputTree::Kind;
  switch (t.kind) {
    case Kind::Result:
      return "result " + std::to_string(t.index);
    case Kind::Opaque:
      return "opaque " + std::to_string(t.index);
    case Kind::Literal:
      return LiteralText(t.literal);
    case Kind::Tuple:
      return "(" + Joined(t.items, depth) + (t.items.size() == 1 ? ",)" : ")");
    case Kind::List:
      return "[" + Joined(t.items, depth) + "]";
    case Kind::Dict: {
      std::string out = "{";
      for (size_t i = 0; i < t.items.size(); ++i) {
        out += i ? ", " : "";
        out += (i < t.keys.size() ? TreeText(t.keys[i], depth + 1) : "?") + ": " +
               TreeText(t.items[i], depth + 1);
      }
      return out + "}";
    }
  }
  return "?";
}

std::string Joined(const std::vector<OutputTree>& items, int depth) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + TreeText(items[i], depth + 1);
  return out;
}

Literal ParseLiteral(TokenCursor& c) {
  if (c.Peek().kind == Tok::String) return c.Next().text;
  if (c.Peek().kind == Tok::Number) {
    const text::Token& t = c.Next();
    if (t.text.find_first_of(".eEin") != std::string::npos) return text::ToDouble(t, "a float");
    return text::ToInt(t, "an int", kInt64Min, kInt64Max);
  }
  if (c.Peek().kind == Tok::Ident) {
    const std::string& word = c.Peek().text;
    Literal value;
    if (word == "True" || word == "False") {
      value = word == "True";
    } else if (word == "inf" || word == "nan") {
      value = word == "inf" ? std::numeric_limits<double>::infinity()
                            : std::numeric_limits<double>::quiet_NaN();
    } else if (word != "None") {
      c.Fail("expected an output: result N, opaque N, a literal, (...), [...] or {...}");
    }
    c.Next();
    return value;
  }
  c.Fail("expected an output: result N, opaque N, a literal, (...), [...] or {...}");
}

OutputTree ParseTree(TokenCursor& c, int depth) {
  if (depth > kMaxOutputDepth)
    c.Fail("the outputs nest deeper than " + std::to_string(kMaxOutputDepth));
  for (const char* leaf : {"result", "opaque"}) {
    if (!c.IsIdent(leaf)) continue;
    c.Next();
    int64_t k = text::ToInt(c.Expect(Tok::Number, "an index"), "an index", 0, kInt64Max);
    return leaf[0] == 'r' ? OutputTree::ResultLeaf(k) : OutputTree::OpaqueLeaf(k);
  }
  const bool tuple = c.IsPunct("("), list = c.IsPunct("["), dict = c.IsPunct("{");
  if (!tuple && !list && !dict) return OutputTree::LiteralLeaf(ParseLiteral(c));
  const char* close = tuple ? ")" : list ? "]" : "}";
  c.Next();
  std::vector<OutputTree> keys, items;
  while (!c.IsPunct(close)) {
    if (dict) {
      keys.push_back(ParseTree(c, depth + 1));
      c.Expect(":");
    }
    items.push_back(ParseTree(c, depth + 1));
    if (!c.IsPunct(close)) c.Expect(",");
  }
  c.Next();
  if (dict) return OutputTree::Dict(std::move(keys), std::move(items));
  return OutputTree::Sequence(tuple ? OutputTree::Kind::Tuple : OutputTree::Kind::List,
                              std::move(items));
}

SignatureInput ParseInput(TokenCursor& c, size_t position) {
  SignatureInput in;
  in.role = c.IsIdent("weight") ? InputRole::Weight : InputRole::Input;
  if (!c.IsIdent("input") && !c.IsIdent("weight"))
    c.Fail("expected 'input', 'weight' or 'outputs'");
  c.Next();
  if (c.Peek().kind != Tok::Value || c.Peek().text != std::to_string(position))
    c.Fail("signature inputs are the entry's parameters in order: expected %" +
           std::to_string(position));
  c.Next();
  in.name = c.ExpectKind(Tok::String, "the input's name (a string)");
  c.Expect(":");
  const text::Token& type_at = c.Peek();
  TensorMeta meta = c.ParseType();
  if (meta.weak) text::FailAt(type_at, "a signature input is never weak");
  in.dtype = meta.dtype;
  in.shape = std::move(meta.shape);
  return in;
}

}  // namespace

std::string LiteralText(const Literal& value) {
  if (std::holds_alternative<std::monostate>(value)) return "None";
  if (auto* b = std::get_if<bool>(&value)) return *b ? "True" : "False";
  if (auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&value)) return text::FormatDouble(*d);
  return text::Quote(std::get<std::string>(value));
}

std::string PrintSignature(const Signature& signature) {
  std::ostringstream out;
  out << "signature {\n";
  for (size_t i = 0; i < signature.inputs.size(); ++i) {
    const SignatureInput& in = signature.inputs[i];
    out << "  " << InputRoleName(in.role) << " %" << i << " " << text::Quote(in.name) << " : "
        << in.TypeString() << "\n";
  }
  out << "  outputs " << TreeText(signature.outputs, 1) << "\n}\n";
  return out.str();
}

Signature ParseSignature(TokenCursor& c) {
  c.ExpectIdent("signature");
  c.Expect("{");
  Signature signature;
  while (!c.IsIdent("outputs")) signature.inputs.push_back(ParseInput(c, signature.inputs.size()));
  c.Next();
  signature.outputs = ParseTree(c, 1);
  c.Expect("}");
  return signature;
}

}  // namespace kiln::ir
