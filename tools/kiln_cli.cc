// kiln_cli.cc - the engine from the command line, without Python.
//
//   kiln-cli ops                      list every registered op with its inputs and attributes
//   kiln-cli run OP SHAPE [SHAPE...]  run OP eagerly on ones-filled float32 tensors, print result
//   kiln-cli ir FILE                  parse IR text, verify it, print it in canonical form
//   kiln-cli ir-run FILE              ...and run it on ones-filled inputs of its parameter types
//
// SHAPE is like 2x3 (or "scalar"). Exits non-zero with the error message on bad input.
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <new>
#include <sstream>
#include <string>

#include "core/error.h"
#include "ir/ir.h"
#include "kernels/cpu/copy.h"
#include "runtime/eager.h"
#include "runtime/executor.h"

namespace {

// A command-line shape such as 2x3: each dim a non-negative integer, and the float32 tensor's
// byte count must fit an int64 (the sizes the core computes from it).
kiln::Shape ParseShape(const std::string& text) {
  kiln::Shape shape;
  if (text == "scalar") return shape;
  const int64_t kMaxBytes = std::numeric_limits<int64_t>::max();
  int64_t bytes = static_cast<int64_t>(kiln::ItemSize(kiln::DType::Float32));
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, 'x')) {
    int64_t d = -1;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), d);
    KILN_CHECK(ec == std::errc() && end == part.data() + part.size() && d >= 0, Value, "shape '",
               text, "': '", part, "' is not a dimension (a non-negative integer)");
    KILN_CHECK(d == 0 || bytes <= kMaxBytes / d, Value, "shape '", text,
               "' is too large: its float32 tensor would need more than 2^63 bytes");
    bytes *= d;
    shape.push_back(d);
  }
  KILN_CHECK(!text.empty() && text.back() != 'x', Value, "shape '", text,
             "' is not like 2x3 or scalar");
  return shape;
}

int ListOps() {
  for (int i = 0; i < kiln::kNumOps; ++i) {
    auto kind = static_cast<kiln::OpKind>(i);
    if (!kiln::IsRegistered(kind)) {
      std::printf("%-16s (not registered)\n", kiln::OpName(kind));
      continue;
    }
    const kiln::OpDef& def = kiln::GetOpDef(kind);
    std::string inputs, attrs;
    for (const char* name : def.inputs) inputs += std::string(inputs.empty() ? "" : ", ") + name;
    for (const auto& a : def.attrs)
      attrs += std::string(attrs.empty() ? "" : ", ") + a.name + "=" +
               kiln::AttrToString(a.default_value);
    std::printf("%-16s (%s) {%s}\n", def.name, inputs.c_str(), attrs.c_str());
  }
  return 0;
}

void PrintTensor(const kiln::Tensor& t) {
  kiln::Tensor values = t.To(kiln::DType::Float64).Contiguous();
  std::printf("%s %s [", kiln::DTypeName(t.dtype()), kiln::ShapeStr(t.shape()).c_str());
  for (int64_t i = 0; i < values.numel() && i < 16; ++i)
    std::printf("%s%g", i ? ", " : "", values.data<double>()[i]);
  std::printf("%s]\n", values.numel() > 16 ? ", ..." : "");
}

int RunOp(int argc, char** argv) {
  std::vector<kiln::Tensor> inputs;
  for (int i = 3; i < argc; ++i) {
    kiln::Tensor t = kiln::Tensor::Empty(ParseShape(argv[i]), kiln::DType::Float32);
    kiln::cpu::Fill(t, 1.0);
    inputs.push_back(t);
  }
  for (const auto& out : kiln::CallOp(kiln::OpKindFromName(argv[2]), inputs, {})) PrintTensor(out);
  return 0;
}

kiln::ir::Module LoadIR(const char* path) {
  std::ifstream in(path);
  if (!in) kiln::Throw(kiln::ErrorKind::Value, "cannot read ", path);
  std::stringstream text;
  text << in.rdbuf();
  kiln::ir::Module module = kiln::ir::Parse(text.str());
  kiln::ir::Verify(module);
  return module;
}

int RunIR(const char* path, bool execute) {
  kiln::ir::Module module = LoadIR(path);
  std::fputs(kiln::ir::Print(module).c_str(), stdout);
  if (!execute) return 0;
  std::vector<kiln::Tensor> inputs;
  for (const auto& p : module.entry().params) {
    kiln::Shape shape = p.shape;
    for (auto& d : shape) d = d < 0 ? 1 : d;
    kiln::Tensor t = kiln::Tensor::Empty(shape, p.dtype);
    kiln::cpu::Fill(t, 1.0);
    inputs.push_back(t);
  }
  for (const auto& out : kiln::Run(module, inputs)) PrintTensor(out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "ops") return ListOps();
    if (command == "run" && argc > 2) return RunOp(argc, argv);
    if (command == "ir" && argc == 3) return RunIR(argv[2], false);
    if (command == "ir-run" && argc == 3) return RunIR(argv[2], true);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory (a tensor is larger than this machine can hold)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: kiln-cli ops | run OP SHAPE [SHAPE...] | ir FILE | ir-run FILE\n");
  return 2;
}
