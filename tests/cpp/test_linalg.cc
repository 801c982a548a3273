// test_linalg.cc - MatMul/Conv2d/pooling through CallOp, and the oneDNN primitive cache.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kernels/cpu/onednn.h"
#include "runtime/eager.h"

namespace kiln {
namespace {

Tensor FromValues(const Shape& shape, const std::vector<float>& values) {
  Tensor t = Tensor::Empty(shape, DType::Float32);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

std::vector<float> Values(const Tensor& t) {
  Tensor c = t.To(DType::Float32).Contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

TEST(Linalg, MatMul2x3By3x2) {
  Tensor a = FromValues({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = FromValues({3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor c = CallOp1(OpKind::MatMul, {a, b}, {});
  EXPECT_EQ(c.shape(), (Shape{2, 2}));
  EXPECT_EQ(Values(c), (std::vector<float>{58, 64, 139, 154}));
}

TEST(Linalg, MatMulTransposeFlagsAndVector) {
  Tensor a = FromValues({3, 2}, {1, 4, 2, 5, 3, 6});  // the transpose of [[1,2,3],[4,5,6]]
  Tensor v = FromValues({3}, {1, 1, 1});
  Tensor c = CallOp1(OpKind::MatMul, {a, v}, {true, false});
  EXPECT_EQ(c.shape(), (Shape{2}));
  EXPECT_EQ(Values(c), (std::vector<float>{6, 15}));
}

TEST(Linalg, MatMulFallbackDtypes) {
  for (DType dtype : {DType::Float64, DType::Int32, DType::Float16}) {
    Tensor a = FromValues({2, 2}, {1, 2, 3, 4}).To(dtype);
    Tensor b = FromValues({2, 2}, {5, 6, 7, 8}).To(dtype);
    Tensor c = CallOp1(OpKind::MatMul, {a, b}, {});
    EXPECT_EQ(c.dtype(), dtype);
    EXPECT_EQ(Values(c), (std::vector<float>{19, 22, 43, 50}));
  }
}

TEST(Linalg, MatMulShapeErrorNamesBothShapes) {
  Tensor a = Tensor::Empty({2, 3}, DType::Float32), b = Tensor::Empty({4, 5}, DType::Float32);
  try {
    CallOp(OpKind::MatMul, {a, b}, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value);
    std::string msg = e.what();
    EXPECT_NE(msg.find("matmul"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(2, 3)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(4, 5)"), std::string::npos) << msg;
  }
}

TEST(Linalg, PrimitiveCacheHitsOnSecondCall) {
  // A shape no other test uses, so the first call must miss and the second must hit; 37 rows
  // are past the small-M cut-off, where products go to the matmul primitive, not dnnl_sgemm.
  Tensor a = Tensor::Empty({37, 13}, DType::Float32), b = Tensor::Empty({13, 5}, DType::Float32);
  cpu::OnednnCacheStats before = cpu::GetOnednnCacheStats();
  CallOp(OpKind::MatMul, {a, b}, {});
  cpu::OnednnCacheStats mid = cpu::GetOnednnCacheStats();
  EXPECT_EQ(mid.misses, before.misses + 1);
  CallOp(OpKind::MatMul, {a, b}, {});
  cpu::OnednnCacheStats after = cpu::GetOnednnCacheStats();
  EXPECT_EQ(after.misses, mid.misses);
  EXPECT_EQ(after.hits, mid.hits + 1);
}

// conv2d of an all-ones (1, 1, side, side) input with two all-ones 2x2 filters, biases 0.5 and
// -1, at `stride`: every output is 4 plus its bias.
void OnesConv(int64_t side, int64_t stride) {
  Tensor x = FromValues({1, 1, side, side}, std::vector<float>(side * side, 1.f));
  Tensor w = FromValues({2, 1, 2, 2}, std::vector<float>(8, 1.f));
  Tensor bias = FromValues({2}, {0.5f, -1.f});
  Attrs attrs{Shape{stride, stride}, Shape{0, 0, 0, 0}, Shape{1, 1}, int64_t{1}};
  Tensor y = CallOp1(OpKind::Conv2d, {x, w, bias}, attrs);
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 2}));
  EXPECT_EQ(Values(y), (std::vector<float>{4.5, 4.5, 4.5, 4.5, 3, 3, 3, 3}));
}

TEST(Conv, FewChannelsRunTheDirectLoops) {
  // Two output channels at unit stride: kiln's direct loops (conv_direct.h), not oneDNN.
  cpu::OnednnCacheStats before = cpu::GetOnednnCacheStats();
  OnesConv(3, 1);
  cpu::OnednnCacheStats after = cpu::GetOnednnCacheStats();
  EXPECT_EQ(after.hits + after.misses, before.hits + before.misses);
}

TEST(Conv, Conv2dOnesAndCacheHit) {
  // Stride 2 runs on oneDNN: the second call reuses the cached primitive.
  OnesConv(4, 2);
  cpu::OnednnCacheStats before = cpu::GetOnednnCacheStats();
  OnesConv(4, 2);
  EXPECT_EQ(cpu::GetOnednnCacheStats().hits, before.hits + 1);
}

TEST(Conv, BackwardOpsOnOnesAndCacheHit) {
  // y = conv(x, w) with x (1, 1, 3, 3), w (2, 1, 2, 2) of ones; dy of ones (1, 2, 2, 2).
  Tensor dy = FromValues({1, 2, 2, 2}, std::vector<float>(8, 1.f));
  Tensor x = FromValues({1, 1, 3, 3}, std::vector<float>(9, 1.f));
  Tensor w = FromValues({2, 1, 2, 2}, std::vector<float>(8, 1.f));
  Attrs dx_attrs{Shape{1, 1, 3, 3}, Shape{1, 1}, Shape{0, 0, 0, 0}, Shape{1, 1}, int64_t{1}};
  Attrs dw_attrs{Shape{2, 1, 2, 2}, Shape{1, 1}, Shape{0, 0, 0, 0}, Shape{1, 1}, int64_t{1}};
  cpu::OnednnCacheStats before = cpu::GetOnednnCacheStats();
  Tensor dx = CallOp1(OpKind::Conv2dBackwardInput, {dy, w}, dx_attrs);
  // Each input pixel is read by as many windows as cover it (corners 1, edges 2, centre 4),
  // once per output channel.
  EXPECT_EQ(Values(dx), (std::vector<float>{2, 4, 2, 4, 8, 4, 2, 4, 2}));
  Tensor dw = CallOp1(OpKind::Conv2dBackwardWeight, {dy, x}, dw_attrs);
  EXPECT_EQ(dw.shape(), (Shape{2, 1, 2, 2}));
  EXPECT_EQ(Values(dw), std::vector<float>(8, 4.f));  // each tap sees 4 outputs
  // The input gradient ran kiln's direct loops (unit stride, few channels); the weight gradient
  // made a oneDNN primitive, which the second call reuses.
  cpu::OnednnCacheStats mid = cpu::GetOnednnCacheStats();
  EXPECT_EQ(mid.misses, before.misses + 1);
  CallOp1(OpKind::Conv2dBackwardInput, {dy, w}, dx_attrs);
  CallOp1(OpKind::Conv2dBackwardWeight, {dy, x}, dw_attrs);
  EXPECT_EQ(cpu::GetOnednnCacheStats().hits, mid.hits + 1);
  EXPECT_EQ(cpu::GetOnednnCacheStats().misses, mid.misses);
}

TEST(Conv, PoolGradOps) {
  Tensor x = FromValues({1, 1, 2, 4}, {1, 5, 2, 0, 3, 4, 8, 7});
  Attrs max_attrs{Shape{2, 2}, Shape{2, 2}, Shape{0, 0}, Shape{1, 1}, false};
  auto outs = CallOp(OpKind::MaxPool2d, {x}, max_attrs);
  Tensor dy = FromValues({1, 1, 1, 2}, {10, 20});
  Tensor dx = CallOp1(OpKind::MaxPool2dGrad, {dy, x, outs[1]}, max_attrs);
  EXPECT_EQ(Values(dx), (std::vector<float>{0, 10, 0, 0, 0, 0, 20, 0}));
  Tensor davg = CallOp1(OpKind::AvgPool2dGrad, {dy, x}, {Shape{2, 2}, Shape{2, 2}, Shape{0, 0}});
  EXPECT_EQ(Values(davg), (std::vector<float>{2.5, 2.5, 5, 5, 2.5, 2.5, 5, 5}));
}

TEST(Conv, Conv2dRejectsIntegersAndBadGroups) {
  Tensor xi = Tensor::Empty({1, 4, 5, 5}, DType::Int32),
         wi = Tensor::Empty({2, 4, 3, 3}, DType::Int32);
  EXPECT_THROW(CallOp(OpKind::Conv2d, {xi, wi}, {}), Error);
  Tensor x = Tensor::Empty({1, 4, 5, 5}, DType::Float32),
         w = Tensor::Empty({3, 2, 3, 3}, DType::Float32);
  Attrs attrs{Shape{1, 1}, Shape{0, 0, 0, 0}, Shape{1, 1}, int64_t{2}};
  EXPECT_THROW(CallOp(OpKind::Conv2d, {x, w}, attrs), Error);  // 3 outputs not divisible by 2
  Tensor big = Tensor::Empty({1, 4, 5, 5}, DType::Float32),
         wbig = Tensor::Empty({1, 4, 7, 7}, DType::Float32);
  EXPECT_THROW(CallOp(OpKind::Conv2d, {big, wbig}, {}), Error);  // kernel larger than input
}

TEST(Conv, MaxPoolIndicesAndAvgPool) {
  Tensor x = FromValues({1, 1, 2, 4}, {1, 5, 2, 0, 3, 4, 8, 7});
  auto outs =
      CallOp(OpKind::MaxPool2d, {x}, {Shape{2, 2}, Shape{2, 2}, Shape{0, 0}, Shape{1, 1}, false});
  EXPECT_EQ(Values(outs[0]), (std::vector<float>{5, 8}));
  EXPECT_EQ(outs[1].dtype(), DType::Int64);
  EXPECT_EQ(outs[1].data<int64_t>()[0], 1);
  EXPECT_EQ(outs[1].data<int64_t>()[1], 6);
  Tensor avg = CallOp1(OpKind::AvgPool2d, {x}, {Shape{2, 2}, Shape{2, 2}, Shape{0, 0}});
  EXPECT_EQ(Values(avg), (std::vector<float>{3.25, 4.25}));
}

}  // namespace
}  // namespace kiln
