// text_form.h - the pieces of the IR's text form that the module and signature readers and
// writers share: tokens and a cursor over them (reading), quoting and float spelling (writing).
//
// The text may come from anywhere, so every literal is converted with a range check and every
// error names the line:column it was found at.
#pragma once

#include <string>
#include <vector>

#include "ops/registry.h"

namespace kiln::ir::text {

enum class Tok { Ident, Value, Global, Number, String, Punct, End };

struct Token {
  Tok kind;
  std::string text;
  int line;
  int column;
};

[[noreturn]] void FailAt(const Token& tok, const std::string& what);
// The whole token as an int64 in [lo, hi]; a parse error otherwise (never a bare std::stoll).
int64_t ToInt(const Token& tok, const char* what, int64_t lo, int64_t hi);
// The whole token as a uint64 (a uint64 constant's values go past int64).
uint64_t ToUInt64(const Token& tok, const char* what);
// The whole token as a double; inf and nan are spelled out, so overflow to inf is an error.
double ToDouble(const Token& tok, const char* what);
std::vector<Token> Tokenize(const std::string& src);

// "f32" for float32, as types print; and back (a parse error at `tok` for an unknown name).
const char* ShortDType(DType d);
DType DTypeFromShort(const std::string& s, const Token& tok);

// Whether `name` can follow '@' (letters, digits, '_', '.'; not empty), and whether `name` is
// an identifier (a letter or '_', then letters, digits and '_'): what the reader accepts.
bool IsGlobalName(const std::string& name);
bool IsIdentifier(const std::string& name);

// A double-quoted string with `"`, `\` and newlines escaped.
std::string Quote(const std::string& s);
// 17 significant digits (parses back to the same bits), always visibly a float ("2.0").
std::string FormatDouble(double v);

// Reads tokens one at a time; what the module parser and the signature parser build on.
class TokenCursor {
 public:
  explicit TokenCursor(const std::string& text) : toks_(Tokenize(text)) {}

  const Token& Peek() const { return toks_[pos_]; }
  const Token& Next() { return toks_[pos_++]; }
  [[noreturn]] void Fail(const std::string& what) const;
  bool IsPunct(const char* p) const { return Peek().kind == Tok::Punct && Peek().text == p; }
  bool IsIdent(const char* w) const { return Peek().kind == Tok::Ident && Peek().text == w; }
  void Expect(const char* p);
  void ExpectIdent(const char* w);
  const Token& Expect(Tok kind, const char* what);
  std::string ExpectKind(Tok kind, const char* what) { return Expect(kind, what).text; }
  void SkipComma() {
    if (IsPunct(",")) ++pos_;
  }
  // A tensor type: `weak f32[2,?]`.
  TensorMeta ParseType();

 protected:
  std::vector<Token> toks_;
  size_t pos_ = 0;
};

}  // namespace kiln::ir::text
