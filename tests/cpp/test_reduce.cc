// test_reduce.cc - direct C++ tests of the reduce and normalization kernels through CallOp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "runtime/eager.h"

namespace kiln {
namespace {

Tensor FromValues(const Shape& shape, const std::vector<double>& values,
                  DType dtype = DType::Float64) {
  Tensor t = Tensor::Empty(shape, DType::Float64);
  std::copy(values.begin(), values.end(), t.data<double>());
  return t.To(dtype);
}

std::vector<double> Values(const Tensor& t) {
  Tensor c = t.To(DType::Float64).Contiguous();
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

std::vector<double> Iota(int64_t n) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 0.0);
  return v;
}

// The op's error kind, with the message checked for the op name and the input shape.
ErrorKind ErrorOf(OpKind kind, std::vector<Tensor> inputs, Attrs attrs, const std::string& shape) {
  try {
    CallOp(kind, std::move(inputs), std::move(attrs));
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(OpName(kind)), std::string::npos) << msg;
    EXPECT_NE(msg.find(shape), std::string::npos) << msg;
    return e.kind();
  }
  ADD_FAILURE() << "expected an error from " << OpName(kind);
  return ErrorKind::Runtime;
}

TEST(ReduceOps, SumOfInt32PromotesToInt64OverMiddleAxis) {
  Tensor x = FromValues({2, 3, 4}, Iota(24), DType::Int32);
  Tensor y = CallOp1(OpKind::ReduceSum, {x}, {std::vector<int64_t>{1}, false, std::monostate{}});
  EXPECT_EQ(y.dtype(), DType::Int64);
  EXPECT_EQ(y.shape(), (Shape{2, 4}));
  EXPECT_EQ(Values(y), (std::vector<double>{12, 15, 18, 21, 48, 51, 54, 57}));
}

TEST(ReduceOps, NonAdjacentAxesAndKeepdimsOnStridedInput) {
  // The transpose of a (4, 3, 2) iota: strided, and axes (0, 2) are not adjacent.
  Tensor x = FromValues({4, 3, 2}, Iota(24)).Permute({2, 1, 0});
  Tensor y = CallOp1(OpKind::ReduceMax, {x}, {std::vector<int64_t>{0, -1}, true});
  EXPECT_EQ(y.shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(Values(y), (std::vector<double>{19, 21, 23}));
}

TEST(ReduceOps, LongSumUsesChunksAndStaysExact) {
  const int64_t n = 200001;
  Tensor x = FromValues({n}, std::vector<double>(n, 0.5), DType::Float32);
  Tensor y = CallOp1(OpKind::ReduceSum, {x}, {});
  EXPECT_EQ(Values(y)[0], 0.5 * n);
  Tensor m = CallOp1(OpKind::ReduceMean, {x}, {});
  EXPECT_DOUBLE_EQ(Values(m)[0], 0.5);
}

TEST(ReduceOps, MaxPropagatesNanAndArgmaxPicksFirstNan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = FromValues({5}, {1, nan, 7, nan, 7}, DType::Float32);
  EXPECT_TRUE(std::isnan(Values(CallOp1(OpKind::ReduceMax, {x}, {}))[0]));
  EXPECT_TRUE(std::isnan(Values(CallOp1(OpKind::ReduceMin, {x}, {}))[0]));
  EXPECT_EQ(Values(CallOp1(OpKind::Argmax, {x}, {}))[0], 1);
  Tensor ties = FromValues({2, 4}, {3, 9, 9, 1, 4, 4, 0, 0}, DType::Int16);
  Tensor am = CallOp1(OpKind::Argmax, {ties}, {int64_t{1}, false});
  EXPECT_EQ(am.dtype(), DType::Int64);
  EXPECT_EQ(Values(am), (std::vector<double>{1, 0}));
  EXPECT_EQ(Values(CallOp1(OpKind::Argmin, {ties}, {int64_t{1}, false})),
            (std::vector<double>{3, 2}));
}

TEST(ReduceOps, ErrorsNameOpAndShape) {
  Tensor x = Tensor::Empty({2, 3}, DType::Float32);
  EXPECT_EQ(ErrorOf(OpKind::ReduceSum, {x}, {std::vector<int64_t>{2}}, "(2, 3)"), ErrorKind::Axis);
  EXPECT_EQ(ErrorOf(OpKind::ReduceMean, {x}, {std::vector<int64_t>{1, -1}}, "(2, 3)"),
            ErrorKind::Value);
  Tensor empty = Tensor::Empty({0, 3}, DType::Float32);
  EXPECT_EQ(ErrorOf(OpKind::ReduceMax, {empty}, {std::vector<int64_t>{0}}, "(0, 3)"),
            ErrorKind::Value);
  EXPECT_EQ(ErrorOf(OpKind::Argmin, {empty}, {}, "(0, 3)"), ErrorKind::Value);
  // An empty sum is 0 and an empty product 1, as in NumPy.
  EXPECT_EQ(Values(CallOp1(OpKind::ReduceSum, {empty}, {std::vector<int64_t>{0}})),
            (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(Values(CallOp1(OpKind::ReduceProd, {empty}, {std::vector<int64_t>{0}})),
            (std::vector<double>{1, 1, 1}));
}

TEST(ReduceNormalization, SoftmaxIsStableAndSumsToOne) {
  Tensor x = FromValues({2, 3}, {1000, 1001, 1002, -5, 0, 5}, DType::Float32);
  std::vector<double> y = Values(CallOp1(OpKind::Softmax, {x}, {int64_t{-1}}));
  for (int row = 0; row < 2; ++row) {
    EXPECT_NEAR(y[row * 3] + y[row * 3 + 1] + y[row * 3 + 2], 1.0, 1e-6);
    const double step = row ? 5 : 1;  // the gap between neighbouring logits
    EXPECT_NEAR(y[row * 3 + 2], 1.0 / (1 + std::exp(-step) + std::exp(-2 * step)), 1e-6);
  }
  std::vector<double> ly = Values(CallOp1(OpKind::LogSoftmax, {x}, {int64_t{0}}));
  EXPECT_NEAR(ly[0], 0.0, 1e-6);  // 1000 vs -5 along axis 0
  EXPECT_NEAR(ly[3], -1005.0, 1e-3);
}

TEST(ReduceNormalization, LayerNormStatistics) {
  Tensor x = FromValues({2, 4}, {1, 2, 3, 4, 10, 10, 10, 10}, DType::Float32);
  std::vector<Tensor> out = CallOp(OpKind::LayerNorm, {x, Tensor(), Tensor()}, {int64_t{1}, 0.0});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].shape(), (Shape{2, 1}));
  EXPECT_EQ(Values(out[1]), (std::vector<double>{2.5, 10}));
  EXPECT_NEAR(Values(out[2])[0], 1 / std::sqrt(1.25), 1e-6);
  std::vector<double> y = Values(out[0]);
  EXPECT_NEAR(y[0], -1.5 / std::sqrt(1.25), 1e-6);
}

TEST(ReduceNormalization, BatchNormUpdatesRunningStatsOnlyInTraining) {
  Tensor x = FromValues({4, 2}, {1, 10, 2, 20, 3, 30, 4, 40}, DType::Float32);
  Tensor rm = FromValues({2}, {0, 0}, DType::Float32), rv = FromValues({2}, {1, 1}, DType::Float32);
  std::vector<Tensor> out =
      CallOp(OpKind::BatchNorm, {x, rm, rv, Tensor(), Tensor()}, {true, 0.5, 0.0});
  EXPECT_EQ(Values(out[1]), (std::vector<double>{2.5, 25}));
  std::vector<double> m = Values(rm), v = Values(rv);
  EXPECT_NEAR(m[0], 1.25, 1e-6);
  EXPECT_NEAR(v[0], 0.5 + 0.5 * (5.0 / 3.0), 1e-6);  // unbiased batch variance of 1..4
  EXPECT_NEAR(v[1], 0.5 + 0.5 * (500.0 / 3.0), 1e-4);
  CallOp(OpKind::BatchNorm, {x, rm, rv, Tensor(), Tensor()}, {false, 0.5, 0.0});
  EXPECT_EQ(Values(rm), m);
  EXPECT_EQ(ErrorOf(OpKind::BatchNorm, {x}, {false}, "training"), ErrorKind::Value);
}

TEST(ReduceNormalization, DropoutSeedAttrIsReproducible) {
  Tensor x = FromValues({1000}, std::vector<double>(1000, 2.0), DType::Float32);
  std::vector<Tensor> a = CallOp(OpKind::Dropout, {x}, {0.25, int64_t{7}});
  std::vector<Tensor> b = CallOp(OpKind::Dropout, {x}, {0.25, int64_t{7}});
  EXPECT_EQ(Values(a[1]), Values(b[1]));
  int kept = 0;
  for (double m : Values(a[1])) {
    EXPECT_TRUE(m == 0 || std::abs(m - 4.0 / 3.0) < 1e-6) << m;
    kept += m != 0;
  }
  EXPECT_GT(kept, 650);
  EXPECT_LT(kept, 850);
  SetGlobalSeed(3);
  std::vector<double> c = Values(CallOp(OpKind::Dropout, {x}, {0.5})[0]);
  SetGlobalSeed(3);
  EXPECT_EQ(Values(CallOp(OpKind::Dropout, {x}, {0.5})[0]), c);
}

}  // namespace
}  // namespace kiln
