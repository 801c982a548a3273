// kiln_run.cc - kiln-run: runs an exported model on .npy inputs without Python.
//
//   kiln-run model.mindir --input x.npy [--input y.npy ...] [--output out.npy ...] [--bench N]
//   kiln-run model.mindir --input inputs.npz --output outputs.npz
//
// .npy inputs are matched to the model's inputs in order; an .npz by input name (or in order).
// Each --output .npy names the file for the next result (results without one are summarized on
// stdout); one --output .npz takes every result, named output0, output1, ... --bench N runs N more
// times and prints the median and mean latency. Exit status 1 with a one-line error on any bad
// input.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kiln/runtime.h"
#include "npy_io.h"

namespace {

struct Args {
  std::string model;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  int bench = 0;
};

const char kUsage[] =
    "usage: kiln-run MODEL.mindir --input X.npy [--input ...] [--output Y.npy ...] [--bench N]\n"
    "       kiln-run MODEL.mindir --input INPUTS.npz [--output OUTPUTS.npz] [--bench N]\n";

Args ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if ((flag == "--input" || flag == "-i") && has_value) {
      args.inputs.push_back(argv[++i]);
    } else if ((flag == "--output" || flag == "-o") && has_value) {
      args.outputs.push_back(argv[++i]);
    } else if (flag == "--bench" && has_value) {
      const std::string n = argv[++i];
      if (n.empty() || n.size() > 7 || n.find_first_not_of("0123456789") != std::string::npos)
        throw std::runtime_error("--bench takes a count (0..9999999), got '" + n + "'");
      args.bench = std::stoi(n);
    } else if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (!flag.empty() && flag[0] != '-' && args.model.empty()) {
      args.model = flag;
    } else {
      throw std::runtime_error("unexpected argument '" + flag + "'\n" + kUsage);
    }
  }
  if (args.model.empty()) throw std::runtime_error(std::string("no model file given\n") + kUsage);
  return args;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return s + "]";
}

void Summarize(size_t index, const kiln::runtime::Tensor& t) {
  std::printf("output %zu: %s%s", index, kiln::runtime::DTypeName(t.dtype()),
              ShapeText(t.shape()).c_str());
  if (t.dtype() == kiln::runtime::DType::Float32) {
    std::printf(" [");
    for (int64_t i = 0; i < std::min<int64_t>(t.num_elements(), 6); ++i)
      std::printf("%s%g", i ? ", " : "", t.data<float>()[i]);
    std::printf(t.num_elements() > 6 ? ", ...]" : "]");
  }
  std::printf("\n");
}

void Bench(const kiln::runtime::Model& model, const std::vector<kiln::runtime::Tensor>& inputs,
           int runs) {
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    model.Run(inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  double total = 0;
  for (double m : ms) total += m;
  std::printf("bench: %d runs, median %.4f ms, mean %.4f ms, min %.4f ms\n", runs,
              ms[ms.size() / 2], total / runs, ms.front());
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

[[noreturn]] void WrongInputCount(const Args& args, const kiln::runtime::Model& model, size_t got) {
  std::string want;
  for (const auto& in : model.inputs())
    want += " " + in.name + ":" + kiln::runtime::DTypeName(in.dtype) + ShapeText(in.shape);
  throw std::runtime_error(args.model + " takes " + std::to_string(model.inputs().size()) +
                           " inputs (" + want + " ), got " + std::to_string(got));
}

// One .npy per input in order, or one .npz whose arrays are matched to the inputs by name
// (np.savez(f, x=...)) when every input is there, else taken in order (np.savez(f, a, b)).
std::vector<kiln::runtime::Tensor> ReadInputs(const Args& args, const kiln::runtime::Model& model) {
  std::vector<kiln::runtime::Tensor> inputs;
  if (args.inputs.size() == 1 && EndsWith(args.inputs[0], ".npz")) {
    const auto arrays = kiln::tools::ReadNpz(args.inputs[0]);
    for (const auto& info : model.inputs())
      for (const auto& [name, tensor] : arrays)
        if (name == info.name) inputs.push_back(tensor);
    if (inputs.size() != model.inputs().size()) {
      inputs.clear();
      for (const auto& named : arrays) inputs.push_back(named.second);
    }
  } else {
    for (const auto& path : args.inputs) inputs.push_back(kiln::tools::ReadNpy(path));
  }
  if (inputs.size() != model.inputs().size()) WrongInputCount(args, model, inputs.size());
  return inputs;
}

int Main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  const kiln::runtime::Model model = kiln::runtime::Model::Load(args.model);
  if (args.outputs.size() > model.outputs().size())
    throw std::runtime_error(args.model + " has " + std::to_string(model.outputs().size()) +
                             " outputs, got " + std::to_string(args.outputs.size()) +
                             " --output files");
  const std::vector<kiln::runtime::Tensor> inputs = ReadInputs(args, model);
  const std::vector<kiln::runtime::Tensor> outputs = model.Run(inputs);
  if (args.outputs.size() == 1 && EndsWith(args.outputs[0], ".npz")) {
    std::vector<std::pair<std::string, kiln::runtime::Tensor>> named;
    for (size_t k = 0; k < outputs.size(); ++k)
      named.emplace_back(model.outputs()[k].name, outputs[k]);
    kiln::tools::WriteNpz(args.outputs[0], named);
  } else {
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (k < args.outputs.size())
        kiln::tools::WriteNpy(args.outputs[k], outputs[k]);
      else
        Summarize(k, outputs[k]);
    }
  }
  if (args.bench > 0) Bench(model, inputs, args.bench);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln-run: error: %s\n", e.what());
    return 1;
  }
}
