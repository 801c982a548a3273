// error.h - the exception types the core throws; bindings map each to the Python exception.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln {

// Memory: an allocation larger than the machine can give (MemoryError). Overflow: a number that
// does not fit its dtype (OverflowError). Interrupted: Ctrl-C seen while a graph ran
// (KeyboardInterrupt). Recursion: calls nested past a fixed depth (RecursionError), never a
// stack overflow. Axis: an axis argument out of range, NumPy's AxisError (a ValueError, as
// MindSpore raises, and an IndexError, as kiln raised before).
enum class ErrorKind {
  Value,
  Type,
  Index,
  Runtime,
  NotImplemented,
  Memory,
  Overflow,
  Interrupted,
  Recursion,
  Axis
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// An exception the user's compiled code raises at run time (`raise ValueError(...)`); the
// bindings turn it back into the Python exception type it names.
class RaisedError : public Error {
 public:
  RaisedError(std::string type_name, const std::string& message)
      : Error(ErrorKind::Runtime, message), type_name_(std::move(type_name)) {}
  const std::string& type_name() const { return type_name_; }

 private:
  std::string type_name_;
};

namespace detail {
inline void AppendAll(std::ostringstream&) {}
template <typename T, typename... Rest>
void AppendAll(std::ostringstream& out, const T& first, const Rest&... rest) {
  out << first;
  AppendAll(out, rest...);
}
}  // namespace detail

template <typename... Args>
[[noreturn]] void Throw(ErrorKind kind, const Args&... args) {
  std::ostringstream out;
  detail::AppendAll(out, args...);
  throw Error(kind, out.str());
}

// Formats a shape as (2, 3) the way NumPy prints it.
std::string ShapeStr(const std::vector<int64_t>& shape);

}  // namespace kiln

#define KILN_CHECK(cond, kind, ...)                                   \
  do {                                                                \
    if (!(cond)) ::kiln::Throw(::kiln::ErrorKind::kind, __VA_ARGS__); \
  } while (0)
