// test_bf16.cc - bfloat16 MatMul and Conv2d (forward, input and weight gradients) against float32
// on the same bf16-rounded operands: float32 accumulation leaves only the final rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/onednn.h"
#include "runtime/eager.h"

namespace kiln {
namespace {

// Random values already representable in bfloat16, as float32 (the reference's operands).
Tensor RandomBf16Exact(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::Empty(shape, DType::Float32);
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(gen);
  return t.To(DType::BFloat16).To(DType::Float32);
}

std::vector<float> Values(const Tensor& t) {
  Tensor c = t.To(DType::Float32).Contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

// got (bf16) is want (f32) rounded once: within half a bf16 unit in the last place (2^-9
// relative), plus a little for a different summation order near cancellation.
void ExpectRoundedOnce(const Tensor& got, const Tensor& want, float scale) {
  ASSERT_EQ(got.dtype(), DType::BFloat16);
  ASSERT_EQ(got.shape(), want.shape());
  std::vector<float> g = Values(got), w = Values(want);
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], w[i], std::fabs(w[i]) * 0x1p-8f + scale * 1e-5f) << "at " << i;
}

std::vector<Tensor> Bf16(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const auto& t : ts) out.push_back(t.To(DType::BFloat16));
  return out;
}

TEST(BFloat16, MatMulMatchesFloat32) {
  // Shapes of the seed network's layers and their gradients (transposed operands included).
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  for (const Case& c :
       {Case{{64, 784}, {512, 784}, false, true}, Case{{64, 512}, {512, 512}, false, false},
        Case{{64, 512}, {64, 784}, true, false},
        Case{{8, 4, 128, 64}, {8, 4, 64, 128}, false, false}}) {
    Tensor a = RandomBf16Exact(c.a, 1), b = RandomBf16Exact(c.b, 2);
    Tensor want = CallOp1(OpKind::MatMul, {a, b}, {c.ta, c.tb});
    auto args = Bf16({a, b});
    Tensor got = CallOp1(OpKind::MatMul, args, {c.ta, c.tb});
    ExpectRoundedOnce(got, want, 30.f);
  }
}

struct ConvCase {
  Shape x, w;
  Attrs attrs;  // stride, padding (top, bottom, left, right), dilation, groups
};

std::vector<ConvCase> ConvCases() {
  return {
      ConvCase{{8, 1, 32, 32},
               {6, 1, 5, 5},
               {Shape{1, 1}, Shape{0, 0, 0, 0}, Shape{1, 1}, int64_t{1}}},  // LeNet's first layer
      ConvCase{
          {8, 6, 14, 14}, {16, 6, 5, 5}, {Shape{1, 1}, Shape{0, 0, 0, 0}, Shape{1, 1}, int64_t{1}}},
      ConvCase{
          {2, 8, 9, 9},
          {8, 2, 3, 3},
          {Shape{2, 2}, Shape{1, 1, 1, 1}, Shape{2, 2}, int64_t{4}}}};  // strided, dilated, grouped
}

TEST(BFloat16, Conv2dForwardMatchesFloat32) {
  for (const ConvCase& c : ConvCases()) {
    Tensor x = RandomBf16Exact(c.x, 3), w = RandomBf16Exact(c.w, 4);
    Tensor bias = RandomBf16Exact({c.w[0]}, 5);
    Tensor want = CallOp1(OpKind::Conv2d, {x, w, bias}, c.attrs);
    Tensor got = CallOp1(OpKind::Conv2d, Bf16({x, w, bias}), c.attrs);
    ExpectRoundedOnce(got, want, 10.f);
  }
}

TEST(BFloat16, Conv2dGradientsMatchFloat32) {
  for (const ConvCase& c : ConvCases()) {
    Tensor x = RandomBf16Exact(c.x, 6), w = RandomBf16Exact(c.w, 7);
    Tensor y = CallOp1(OpKind::Conv2d, {x, w}, c.attrs);
    Tensor dy = RandomBf16Exact(y.shape(), 8);
    Attrs dx_attrs{c.x}, dw_attrs{c.w};
    dx_attrs.insert(dx_attrs.end(), c.attrs.begin(), c.attrs.end());
    dw_attrs.insert(dw_attrs.end(), c.attrs.begin(), c.attrs.end());
    Tensor dx = CallOp1(OpKind::Conv2dBackwardInput, {dy, w}, dx_attrs);
    Tensor dw = CallOp1(OpKind::Conv2dBackwardWeight, {dy, x}, dw_attrs);
    ExpectRoundedOnce(CallOp1(OpKind::Conv2dBackwardInput, Bf16({dy, w}), dx_attrs), dx, 10.f);
    ExpectRoundedOnce(CallOp1(OpKind::Conv2dBackwardWeight, Bf16({dy, x}), dw_attrs), dw, 40.f);
  }
}

TEST(BFloat16, Conv2dPrimitivesAreCachedPerElementType) {
  const ConvCase c = ConvCases()[2];  // strided: float32 runs it on oneDNN too (not conv_direct)
  Tensor x = RandomBf16Exact(c.x, 9), w = RandomBf16Exact(c.w, 10);
  CallOp1(OpKind::Conv2d, {x, w}, c.attrs);
  CallOp1(OpKind::Conv2d, Bf16({x, w}), c.attrs);
  cpu::OnednnCacheStats before = cpu::GetOnednnCacheStats();
  CallOp1(OpKind::Conv2d, {x, w}, c.attrs);
  CallOp1(OpKind::Conv2d, Bf16({x, w}), c.attrs);
  cpu::OnednnCacheStats after = cpu::GetOnednnCacheStats();
  EXPECT_EQ(after.hits, before.hits + 2);
  EXPECT_EQ(after.misses, before.misses);
}

}  // namespace
}  // namespace kiln
