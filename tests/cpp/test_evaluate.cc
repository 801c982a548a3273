// test_evaluate.cc - ops/evaluate.h: one op call without autodiff, as constant folding uses it,
// and eager dispatch's recording built on it.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kiln
