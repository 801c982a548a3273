// format.cc - how print and raise show tensors: NumPy's str() without its alignment.
#include <cstdio>
#include <sstream>

#include "runtime/executor.h"

namespace kiln {
namespace {

// Each element in the widest type of its kind, so integers print every digit (not through a
// double, which rounds above 2^53).
DType PrintType(DType d) {
  if (IsFloating(d)) return DType::Float64;
  return IsUnsigned(d) ? DType::UInt64 : DType::Int64;
}

std::string TensorText(const Tensor& t) {
  Tensor values = t.To(PrintType(t.dtype())).Contiguous();
  std::ostringstream out;
  auto element = [&](int64_t i) {
    if (t.dtype() == DType::Bool) {
      out << (values.data<int64_t>()[i] != 0 ? "True" : "False");
    } else if (IsFloating(t.dtype())) {
      // Like NumPy's str(): 8 significant digits, and a trailing "." on whole numbers.
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.8g", values.data<double>()[i]);
      std::string text = buf;
      if (text.find_first_of(".eni") == std::string::npos) text += ".";
      out << text;
    } else if (IsUnsigned(t.dtype())) {
      out << values.data<uint64_t>()[i];
    } else {
      out << values.data<int64_t>()[i];
    }
  };
  if (t.ndim() == 0) {
    element(0);
    return out.str();
  }
  // Nested brackets like NumPy's str(), without its alignment.
  std::vector<int64_t> index(t.ndim(), 0);
  for (int64_t i = 0; i < values.numel(); ++i) {
    int opened = 0;
    for (int64_t d = t.ndim() - 1; d >= 0 && index[d] == 0; --d) ++opened;
    out << std::string(opened, '[');
    element(i);
    int closed = 0;
    for (int64_t d = t.ndim() - 1; d >= 0; --d) {
      if (++index[d] < t.shape()[d]) break;
      index[d] = 0;
      ++closed;
    }
    out << std::string(closed, ']');
    if (i + 1 < values.numel()) out << (closed ? "\n" : " ");
  }
  if (values.numel() == 0) out << "[]";
  return out.str();
}

}  // namespace

std::string FormatWithTensors(const std::string& format, const std::vector<Tensor>& args) {
  // "{}" is the next value; "{{" and "}}" are literal braces (Python's str.format convention).
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    bool doubled = i + 1 < format.size() && format[i + 1] == c && (c == '{' || c == '}');
    if (doubled) {
      out += c;
      ++i;
      continue;
    }
    if (c == '{' && i + 1 < format.size() && format[i + 1] == '}' && next < args.size()) {
      out += TensorText(args[next++]);
      ++i;
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace kiln
