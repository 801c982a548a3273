// run_model.cc - the C++ example: load a model kiln exported and run it, with no Python.
//
//   kiln-example model.mindir [N_THREADS]
//
// Feeds each input a deterministic ramp (element i = (i % 17) / 17, cast to the input's dtype,
// 1 for an unknown dimension), runs the model from N_THREADS threads at once (default 1; every
// thread must get the same outputs), and prints each output's shape and the sum of its
// elements, so a test can compare them with what Python computes on the same inputs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runtime.h"

namespace {

using kiln::runtime::DType;
using kiln::runtime::Tensor;

Tensor RampInput(const kiln::runtime::TensorInfo& info) {
  std::vector<int64_t> shape = info.shape;
  for (int64_t& d : shape)
    if (d < 0) d = 1;
  Tensor t(info.dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const double v = static_cast<double>(i % 17) / 17.0;
    switch (info.dtype) {
      case DType::Float32:
        t.data<float>()[i] = static_cast<float>(v);
        break;
      case DType::Float64:
        t.data<double>()[i] = v;
        break;
      case DType::Int32:
        t.data<int32_t>()[i] = static_cast<int32_t>(i % 17);
        break;
      case DType::Int64:
        t.data<int64_t>()[i] = i % 17;
        break;
      default:
        throw std::runtime_error(std::string("the example fills only float and int inputs, not ") +
                                 kiln::runtime::DTypeName(info.dtype));
    }
  }
  return t;
}

double Sum(const Tensor& t) {
  double total = 0;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (t.dtype() == DType::Float32) total += t.data<float>()[i];
    if (t.dtype() == DType::Float64) total += t.data<double>()[i];
    if (t.dtype() == DType::Int32) total += t.data<int32_t>()[i];
    if (t.dtype() == DType::Int64) total += static_cast<double>(t.data<int64_t>()[i]);
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.mindir [N_THREADS]\n", argv[0]);
    return 2;
  }
  try {
    const kiln::runtime::Model model = kiln::runtime::Model::Load(argv[1]);
    std::vector<Tensor> inputs;
    for (const auto& info : model.inputs()) inputs.push_back(RampInput(info));
    const int threads = argc > 2 ? std::max(1, std::atoi(argv[2])) : 1;
    std::vector<std::vector<Tensor>> results(threads);
    std::vector<std::thread> pool;
    for (int k = 0; k < threads; ++k) pool.emplace_back([&, k] { results[k] = model.Run(inputs); });
    for (auto& t : pool) t.join();
    // Threads running at once may be given fewer cores each (docs/architecture.md,
    // "Threading"), and a product split differently sums in another order: equal up to
    // rounding, never different values.
    for (int k = 1; k < threads; ++k)
      for (size_t o = 0; o < results[0].size(); ++o) {
        const double a = Sum(results[k][o]), b = Sum(results[0][o]);
        if (std::fabs(a - b) > 1e-5 * (1.0 + std::fabs(b))) {
          std::fprintf(stderr, "thread %d got a different output %zu: sum %.9g, not %.9g\n", k, o,
                       a, b);
          return 1;
        }
      }
    for (size_t o = 0; o < results[0].size(); ++o) {
      const Tensor& t = results[0][o];
      std::printf("output %zu %s [", o, kiln::runtime::DTypeName(t.dtype()));
      for (size_t d = 0; d < t.shape().size(); ++d)
        std::printf(d ? ",%lld" : "%lld", static_cast<long long>(t.shape()[d]));
      std::printf("] sum %.9g\n", Sum(t));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
