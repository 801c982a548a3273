// test_attention.cc - fused_attention against the unfused chain it replaces: a graph compiled at
// O1 (unfused) and O2 (fuse_attention), eager values, and gradients (tape and finite differences).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "engine/engine.h"
#include "ir/ir.h"
#include "runtime/eager.h"
#include "runtime/tape.h"

namespace kiln {
namespace {

Tensor Random(const Shape& shape, uint32_t seed, DType dtype = DType::Float32) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  Tensor t = Tensor::Empty(shape, DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(gen);
  return t.To(dtype);
}

void ExpectClose(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const Tensor g = got.To(DType::Float64).Contiguous(), w = want.To(DType::Float64).Contiguous();
  for (int64_t i = 0; i < g.numel(); ++i)
    ASSERT_NEAR(g.data<double>()[i], w.data<double>()[i],
                tol * (1 + std::fabs(w.data<double>()[i])))
        << what << " element " << i;
}

// The unfused chain: softmax(q @ k^T * 0.125 + mask) @ v with k stored (b, sk, d).
Tensor Unfused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  Tensor s = CallOp1(OpKind::MatMul, {q, k}, {false, true});
  s = CallOp1(OpKind::Mul, {s, ScalarTensor(0.125, q.dtype())});
  s = CallOp1(OpKind::Add, {s, mask});
  return CallOp1(OpKind::MatMul, {CallOp1(OpKind::Softmax, {s}, {int64_t{-1}}), v});
}

Tensor Fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  return CallOp1(OpKind::FusedAttention, {q, k, v, mask}, {true, 0.125});
}

// The chain as IR: 600 keys cross the kernel's 256-key tiles, 130 queries its 128-row block.
const char* kChain =
    R"(func @main(%0: f32[2,130,16], %1: f32[2,600,16], %2: f32[2,600,8], %3: f32[600]) -> (f32[2,130,8]) {
  %4 = matmul(%0, %1) {transpose_a=False, transpose_b=True} : f32[2,130,600]
  %5 = const [0.125] : f32[]
  %6 = mul(%4, %5) : f32[2,130,600]
  %7 = add(%6, %3) : f32[2,130,600]
  %8 = softmax(%7) {axis=-1} : f32[2,130,600]
  %9 = matmul(%8, %2) {transpose_a=False, transpose_b=False} : f32[2,130,8]
  return %9
}
)";

TEST(FusedAttention, O2FusesTheChainAndKeepsO1Values) {
  const std::vector<Tensor> args = {Random({2, 130, 16}, 1), Random({2, 600, 16}, 2),
                                    Random({2, 600, 8}, 3), Random({600}, 4)};
  std::vector<Tensor> results;
  for (const char* level : {"O1", "O2"}) {
    engine::CompileOptions options;
    options.level = level;
    engine::CompiledGraph graph = engine::Compile(ir::Parse(kChain), options);
    const bool fused = graph.Text().find("fused_attention(") != std::string::npos;
    EXPECT_EQ(fused, std::string(level) == "O2") << graph.Text();
    results.push_back(graph.RunEntry(args)[0]);
  }
  ExpectClose(results[1], results[0], 2e-5, "O2 against O1");
  ExpectClose(Fused(args[0], args[1], args[2], args[3]),
              Unfused(args[0], args[1], args[2], args[3]), 2e-5, "eager");
}

// d(sum(out * w))/d(q, k, v, mask) through the tape.
std::vector<Tensor> Gradients(Tensor (*fn)(const Tensor&, const Tensor&, const Tensor&,
                                           const Tensor&),
                              const std::vector<Tensor>& in, const Tensor& w) {
  Tape tape;
  for (const Tensor& t : in) tape.Watch(t);
  PushTape(&tape);
  Tensor loss =
      CallOp1(OpKind::ReduceSum, {CallOp1(OpKind::Mul, {fn(in[0], in[1], in[2], in[3]), w})});
  PopTape(&tape);
  return tape.Gradient({loss}, {}, in);
}

TEST(FusedAttention, GradientsEqualTheUnfusedChainsAndFiniteDifferences) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const std::vector<Tensor> in = {Random({2, 3, 4}, 5, dtype), Random({2, 5, 4}, 6, dtype),
                                    Random({2, 5, 3}, 7, dtype), Random({3, 5}, 8, dtype)};
    const Tensor w = Random({2, 3, 3}, 9, dtype);
    const std::vector<Tensor> fused = Gradients(Fused, in, w), plain = Gradients(Unfused, in, w);
    for (size_t i = 0; i < in.size(); ++i)
      ExpectClose(fused[i], plain[i], dtype == DType::Float32 ? 1e-4 : 1e-10,
                  "gradient of input " + std::to_string(i));
    if (dtype != DType::Float64) continue;
    // Central differences of the fused op itself (float64 runs the chain's kernels).
    for (size_t i = 0; i < in.size(); ++i) {
      Tensor x = in[i];
      const Tensor analytic = fused[i].Contiguous();
      for (int64_t j = 0; j < x.numel(); ++j) {
        double& xj = x.data<double>()[j];
        const double saved = xj, eps = 1e-6;
        auto loss = [&] {
          Tensor out = Fused(in[0], in[1], in[2], in[3]);
          return CallOp1(OpKind::ReduceSum, {CallOp1(OpKind::Mul, {out, w})}).To(DType::Float64);
        };
        xj = saved + eps;
        const double hi = *loss().data<double>();
        xj = saved - eps;
        const double lo = *loss().data<double>();
        xj = saved;
        EXPECT_NEAR(analytic.data<double>()[j], (hi - lo) / (2 * eps), 1e-6)
            << "input " << i << " element " << j;
      }
    }
  }
}

}  // namespace
}  // namespace kiln
