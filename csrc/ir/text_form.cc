// text_form.cc - tokens, the cursor over them, and quoting/float spelling for the IR text form.
#include "ir/text_form.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <unordered_map>

#include "core/error.h"

namespace kiln::ir::text {

[[noreturn]] void FailAt(const Token& tok, const std::string& what) {
  Throw(ErrorKind::Value, "ir parse error at line ", tok.line, ":", tok.column, ": ", what);
}

// The whole token as an int64 in [lo, hi]; a parse error otherwise (never a bare std::stoll).
int64_t ToInt(const Token& tok, const char* what, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const char* begin = tok.text.data();
  const char* end = begin + tok.text.size();
  if (begin != end && *begin == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, v);
  if (ec == std::errc::result_out_of_range ||
      (ec == std::errc() && ptr == end && (v < lo || v > hi)))
    FailAt(tok, std::string(what) + " '" + tok.text + "' is out of range [" + std::to_string(lo) +
                    ", " + std::to_string(hi) + "]");
  if (ec != std::errc() || ptr != end)
    FailAt(tok, "expected " + std::string(what) + ", found '" + tok.text + "'");
  return v;
}

// The whole token as a double; inf and nan are spelled out, so overflow to inf is an error.
// The whole token as a uint64 (a uint64 constant's values go past int64).
uint64_t ToUInt64(const Token& tok, const char* what) {
  uint64_t v = 0;
  const char* begin = tok.text.data();
  const char* end = begin + tok.text.size();
  if (begin != end && *begin == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, v);
  if (ec == std::errc::result_out_of_range || (!tok.text.empty() && tok.text[0] == '-'))
    FailAt(tok, std::string(what) + " '" + tok.text + "' is out of range [0, 2^64 - 1]");
  if (ec != std::errc() || ptr != end)
    FailAt(tok, "expected " + std::string(what) + ", found '" + tok.text + "'");
  return v;
}

double ToDouble(const Token& tok, const char* what) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(tok.text.c_str(), &end);
  if (tok.text.empty() || end != tok.text.c_str() + tok.text.size())
    FailAt(tok, "expected " + std::string(what) + ", found '" + tok.text + "'");
  if (errno == ERANGE && std::isinf(v))
    FailAt(tok, std::string(what) + " '" + tok.text + "' is out of range for a float64");
  return v;
}

bool IsGlobalName(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return false;
  return true;
}

bool IsIdentifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

std::vector<Token> Tokenize(const std::string& src) {
  std::vector<Token> out;
  int line = 1;
  size_t i = 0, line_start = 0;
  auto column = [&](size_t at) { return static_cast<int>(at - line_start) + 1; };
  auto error = [&](const std::string& what) { FailAt({Tok::End, "", line, column(i)}, what); };
  while (i < src.size()) {
    char c = src[i];
    if (c == '\n') {
      ++line;
      line_start = ++i;
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
      out.push_back({c == '%' ? Tok::Value : Tok::Global, src.substr(start + 1, i - start - 1),
                     line, column(start)});
      continue;
    }
    if (c == '"') {
      Token tok{Tok::String, "", line, column(start)};
      std::string& s = tok.text;
      for (++i; i < src.size() && src[i] != '"'; ++i) {
        if (src[i] == '\n') line_start = i + 1, ++line;  // keep later columns right
        if (src[i] == '\\' && i + 1 < src.size()) {
          ++i;
          s += src[i] == 'n' ? '\n' : src[i];
        } else {
          s += src[i];
        }
      }
      if (i >= src.size()) error("unterminated string");
      ++i;
      out.push_back(std::move(tok));
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
      out.push_back({Tok::Number, src.substr(start, i - start), line, column(start)});
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (i < src.size() && (std::isalnum(static_cast<unsigned char>(src[i])) || src[i] == '_'))
        ++i;
      out.push_back({Tok::Ident, src.substr(start, i - start), line, column(start)});
      continue;
    }
    if (c == '-' && i + 1 < src.size() && src[i + 1] == '>') {
      out.push_back({Tok::Punct, "->", line, column(start)});
      i += 2;
      continue;
    }
    if (std::string("()[]{},:=?").find(c) == std::string::npos)
      error(std::string("unexpected '") + c + "'");
    out.push_back({Tok::Punct, std::string(1, c), line, column(start)});
    ++i;
  }
  out.push_back({Tok::End, "", line, column(i)});
  return out;
}

DType DTypeFromShort(const std::string& s, const Token& tok) {
  static const std::unordered_map<std::string, DType> kTable = {
      {"b", DType::Bool},      {"u8", DType::UInt8},      {"u16", DType::UInt16},
      {"u32", DType::UInt32},  {"u64", DType::UInt64},    {"i8", DType::Int8},
      {"i16", DType::Int16},   {"i32", DType::Int32},     {"i64", DType::Int64},
      {"f16", DType::Float16}, {"bf16", DType::BFloat16}, {"f32", DType::Float32},
      {"f64", DType::Float64}};
  auto it = kTable.find(s);
  if (it == kTable.end()) FailAt(tok, "unknown type '" + s + "'");
  return it->second;
}

const char* ShortDType(DType d) {
  switch (d) {
    case DType::Bool:
      return "b";
    case DType::UInt8:
      return "u8";
    case DType::UInt16:
      return "u16";
    case DType::UInt32:
      return "u32";
    case DType::UInt64:
      return "u64";
    case DType::Int8:
      return "i8";
    case DType::Int16:
      return "i16";
    case DType::Int32:
      return "i32";
    case DType::Int64:
      return "i64";
    case DType::Float16:
      return "f16";
    case DType::BFloat16:
      return "bf16";
    case DType::Float32:
      return "f32";
    case DType::Float64:
      return "f64";
  }
  return "?";
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string FormatDouble(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";  // keep floats visibly floats
  return s;
}

void TokenCursor::Fail(const std::string& what) const {
  FailAt(Peek(), what + ", found '" + Peek().text + "'");
}

void TokenCursor::Expect(const char* p) {
  if (!IsPunct(p)) Fail(std::string("expected '") + p + "'");
  ++pos_;
}

void TokenCursor::ExpectIdent(const char* w) {
  if (!IsIdent(w)) Fail(std::string("expected '") + w + "'");
  ++pos_;
}

const Token& TokenCursor::Expect(Tok kind, const char* what) {
  if (Peek().kind != kind) Fail(std::string("expected ") + what);
  return toks_[pos_++];
}

TensorMeta TokenCursor::ParseType() {
  TensorMeta meta;
  if (IsIdent("weak")) {
    ++pos_;
    meta.weak = true;
  }
  const Token type_tok = Peek();
  meta.dtype = DTypeFromShort(ExpectKind(Tok::Ident, "a type"), type_tok);
  Expect("[");
  // Every size computed from a shape (elements, bytes, strides) must fit an int64.
  const int64_t max_bytes = std::numeric_limits<int64_t>::max();
  int64_t bytes = static_cast<int64_t>(ItemSize(meta.dtype));
  while (!IsPunct("]")) {
    if (IsPunct("?")) {
      ++pos_;
      meta.shape.push_back(-1);
    } else {
      int64_t d = ToInt(Expect(Tok::Number, "a dimension"), "a dimension", 0, max_bytes);
      if (d > 0 && bytes > max_bytes / d)
        FailAt(type_tok, "type has more than 2^63 bytes (dimension " + std::to_string(d) + ")");
      bytes = d == 0 ? 0 : bytes * d;
      meta.shape.push_back(d);
    }
    if (IsPunct(",")) ++pos_;
  }
  Expect("]");
  return meta;
}

}  // namespace kiln::ir::text
