// test_grad_buckets.cc - the tape telling a listener each gradient as soon as it is finished,
// and GradBuckets (data-parallel overlap) starting a bucket's all-reduce then; on one rank,
// where the all-reduce is the identity.
#include <gtest/gtest.h>

#include <vector>

#include "core/comm.h"
#include "core/error.h"
#include "runtime/eager.h"
#include "runtime/grad_buckets.h"
#include "runtime/tape.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing_util::Full;

// Records which sources were ready, and how many ops the tape had swept by then.
struct Order : GradientListener {
  std::vector<const TensorImpl*> ready;
  std::vector<float> first_value;
  void Ready(const Tensor& source, const Tensor& grad) override {
    ready.push_back(source.impl());
    first_value.push_back(grad.To(DType::Float32).data<float>()[0]);
  }
};

// loss = sum(w2 * sum(w1 * 3)): w2's gradient is finished by the sweep's first record, w1's
// only at the end.
std::vector<Tensor> Loss(Tape& tape, const Tensor& w1, const Tensor& w2) {
  PushTape(&tape);
  Tensor s = CallOp(OpKind::ReduceSum,
                    {CallOp(OpKind::Mul, {w1, Full({}, DType::Float32, 3)}, {})[0]}, {})[0];
  Tensor loss = CallOp(OpKind::ReduceSum, {CallOp(OpKind::Mul, {w2, s}, {})[0]}, {})[0];
  PopTape(&tape);
  return {loss};
}

TEST(GradBuckets, TheTapeTellsEachGradientWhenItIsFinished) {
  Tensor w1 = Full({3}, DType::Float32, 1), w2 = Full({2}, DType::Float32, 2);
  Tape tape;
  tape.Watch(w1);
  tape.Watch(w2);
  std::vector<Tensor> loss = Loss(tape, w1, w2);
  Order order;
  GradientListener* previous = SetGradientListener(&order);
  std::vector<Tensor> grads = tape.Gradient(loss, {}, {w1, w2});
  SetGradientListener(previous);
  ASSERT_EQ(order.ready.size(), 2u);
  EXPECT_EQ(order.ready[0], w2.impl());  // the later parameter first
  EXPECT_EQ(order.ready[1], w1.impl());
  EXPECT_FLOAT_EQ(order.first_value[0], 9.0f);   // d/dw2 = sum(w1 * 3)
  EXPECT_FLOAT_EQ(order.first_value[1], 12.0f);  // d/dw1 = 3 * sum(w2)
  EXPECT_FLOAT_EQ(grads[1].data<float>()[0], 9.0f);
}

TEST(GradBuckets, BucketsStartDuringTheSweepAndFinishGivesTheSums) {
  Tensor w1 = Full({3}, DType::Float32, 1), w2 = Full({2}, DType::Float32, 2);
  GradBuckets buckets({w1, w2}, {{1}, {0}}, "hccl_world_group");
  for (int step = 0; step < 2; ++step) {  // the buckets reset for the next step
    Tape tape;
    tape.Watch(w1);
    tape.Watch(w2);
    std::vector<Tensor> loss = Loss(tape, w1, w2);
    GradientListener* previous = SetGradientListener(&buckets);
    std::vector<Tensor> grads = tape.Gradient(loss, {}, {w1, w2});
    SetGradientListener(previous);
    EXPECT_EQ(comm::PendingCount(), 2u);  // both started before Gradient returned
    std::vector<Tensor> out = buckets.Finish(grads);
    EXPECT_EQ(buckets.started_early(), 2);
    EXPECT_EQ(comm::PendingCount(), 0u);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].shape(), Shape{3});
    EXPECT_FLOAT_EQ(out[0].data<float>()[2], 12.0f);
    EXPECT_FLOAT_EQ(out[1].data<float>()[1], 9.0f);
  }
}

TEST(GradBuckets, FinishReducesTheGradientsItIsGiven) {
  Tensor w1 = Full({3}, DType::Float32, 1), w2 = Full({2}, DType::Float32, 2);
  GradBuckets buckets({w1, w2}, {{0, 1}}, "hccl_world_group");
  buckets.Ready(w2, Full({2}, DType::Float32, 5));
  buckets.Ready(w1, Full({3}, DType::Float32, 6));  // the bucket starts from these
  EXPECT_EQ(comm::PendingCount(), 1u);
  // the step changed its gradients afterwards: the bucket is sent again from the new ones
  std::vector<Tensor> out =
      buckets.Finish({Full({3}, DType::Float32, 7), Full({2}, DType::Float32, 8)});
  EXPECT_EQ(comm::PendingCount(), 0u);
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], 7.0f);
  EXPECT_FLOAT_EQ(out[1].data<float>()[1], 8.0f);
  EXPECT_THROW(buckets.Finish({w1}), Error);  // one gradient for two parameters
  EXPECT_THROW(GradBuckets({w1}, {{3}}, "hccl_world_group"), Error);
}

}  // namespace
}  // namespace kiln
