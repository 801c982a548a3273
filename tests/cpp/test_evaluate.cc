// test_evaluate.cc - ops/evaluate.h: one op call without autodiff, as constant folding uses it,
// and eager dispatch's recording built on it (with the copies kept before in-place writes).
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "ir/ir.h"
#include "kernels/cpu/copy.h"
#include "ops/evaluate.h"
#include "passes/passes.h"
#include "runtime/eager.h"
#include "runtime/tape.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing_util::Full;

// Pushes a tape watching `watched` for the scope.
class Recording {
 public:
  explicit Recording(const Tensor& watched) {
    tape_.Watch(watched);
    PushTape(&tape_);
  }
  ~Recording() { PopTape(&tape_); }
  size_t records() const { return tape_.num_records(); }

 private:
  Tape tape_;
};

TEST(Evaluate, RunsAnOpLikeEagerDispatch) {
  // int32 tensor * weak int: promotion keeps int32; the default attribute of reduce_sum applies.
  Tensor x = Full({3}, DType::Int32, 4);
  Tensor two = ScalarTensor(2, DType::Int64);
  Tensor y = EvaluateOp(OpKind::Mul, {x, two})[0];
  EXPECT_EQ(y.dtype(), DType::Int32);
  EXPECT_EQ(y.data<int32_t>()[2], 8);
  Tensor s = EvaluateOp(OpKind::ReduceSum, {Full({2, 3}, DType::Float32, 1.5)})[0];
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_FLOAT_EQ(*s.data<float>(), 9.0f);
  // Int32 and float32 promote to float32 with a plain cast.
  Tensor f = EvaluateOp(OpKind::Add, {x, Full({3}, DType::Float32, 0.5)})[0];
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_FLOAT_EQ(f.data<float>()[0], 4.5f);
}

TEST(Evaluate, BadInputIsTheSameErrorAsInEagerDispatch) {
  Tensor x = Full({2, 3}, DType::Float32, 1);
  EXPECT_THROW(EvaluateOp(OpKind::Add, {x, Full({4}, DType::Float32, 1)}), Error);
  EXPECT_THROW(EvaluateOp(OpKind::Add, {x}), Error);                      // a missing input
  EXPECT_THROW(EvaluateOp(OpKind::Exp, {x}, {int64_t{1}, true}), Error);  // surplus attributes
  // A Python int joining an int8 tensor must fit int8.
  Tensor big = ScalarTensor(1000, DType::Int64);
  EXPECT_THROW(EvaluateOp(OpKind::Add, {Full({2}, DType::Int8, 1), big}), Error);
}

TEST(Evaluate, RecordsOnNoTapeWhileEagerDispatchDoes) {
  Tensor x = Full({3}, DType::Float32, 2);
  Recording tape(x);
  Tensor weak = ScalarTensor(3, DType::Int64);
  EvaluateOp(OpKind::Mul, {x, weak});
  EXPECT_EQ(tape.records(), 0u);
  CallOp(OpKind::Mul, {x, weak}, {});
  EXPECT_GE(tape.records(), 1u);  // the mul (the weak scalar's cast is recorded too)
}

TEST(Evaluate, ConstantFoldingLeavesNothingOnAnActiveTape) {
  // The constant is the very tensor the tape watches, as when a function compiled inside a
  // user's gradient region reads a tensor as a constant.
  Tensor c = Full({3}, DType::Float32, 2);
  Recording tape(c);
  ir::Module m;
  ir::Func& f = m.AddFunc("main");
  ir::Builder b(m, f);
  ir::ValueRef x = b.Param({DType::Float32, {3}});
  ir::ValueRef k = b.Const(c);
  ir::ValueRef doubled = b.Op1(OpKind::Mul, {k, b.Const(ScalarTensor(2, DType::Int64))});
  b.Return({b.Op1(OpKind::Add, {x, b.Op1(OpKind::Exp, {doubled})})});
  passes::RunPipeline(m, "O1", /*verify_each=*/true);
  EXPECT_EQ(tape.records(), 0u);
  bool folded = false;
  for (const auto& node : m.entry().nodes)
    folded = folded || (node.kind == ir::NodeKind::Const && node.value.numel() == 3);
  EXPECT_TRUE(folded) << ir::Print(m);
}

TEST(Evaluate, AnInPlaceWriteUnderATapeKeepsTheValuesItRecorded) {
  // t = y * y with y = exp(x); then y is overwritten in place. mul's rule needs the old y.
  Tensor x = Full({2}, DType::Float32, 1);
  Tape tape;
  tape.Watch(x);
  PushTape(&tape);
  Tensor y = CallOp1(OpKind::Exp, {x});
  Tensor t = CallOp1(OpKind::Mul, {y, y});
  CallOp(OpKind::Assign, {y, ScalarTensor(5, DType::Float32)}, {});
  Tensor loss = CallOp1(OpKind::ReduceSum, {t});
  PopTape(&tape);
  EXPECT_FLOAT_EQ(y.data<float>()[0], 5.0f);  // the write itself happened
  Tensor dx = tape.Gradient({loss}, {}, {x})[0];
  const float expected = 2.0f * std::exp(2.0f);  // d(e^2x)/dx at x = 1
  EXPECT_NEAR(dx.data<float>()[0], expected, 1e-4f);
  EXPECT_NEAR(dx.data<float>()[1], expected, 1e-4f);
}

TEST(Evaluate, AWriteThroughAViewUnderATapeReachesTheBasesGradient) {
  // base = x * 2; base[1:, :] = 0 through a strided_slice view; loss = sum(base).
  Tensor x = Full({2, 3}, DType::Float32, 1);
  Tape tape;
  tape.Watch(x);
  PushTape(&tape);
  Tensor base = CallOp1(OpKind::Mul, {x, ScalarTensor(2, DType::Float32)});
  Tensor row =
      CallOp1(OpKind::StridedSlice, {base},
              {std::vector<int64_t>{1, 0}, std::vector<int64_t>{2, 3}, std::vector<int64_t>{1, 1}});
  CallOp(OpKind::Assign, {row, ScalarTensor(0, DType::Float32)}, {});
  Tensor loss = CallOp1(OpKind::ReduceSum, {base});
  PopTape(&tape);
  EXPECT_FLOAT_EQ(base.data<float>()[4], 0.0f);  // written through the view
  Tensor dx = tape.Gradient({loss}, {}, {x})[0];
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(dx.data<float>()[i], i < 3 ? 2.0f : 0.0f) << i;
}

}  // namespace
}  // namespace kiln
