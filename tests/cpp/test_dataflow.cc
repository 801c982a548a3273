// test_dataflow.cc - the order a team keeps (runtime/dataflow.h), and team runs of the executor
// against runs in order.
#include <gtest/gtest.h>

#include <algorithm>

#include "analysis/effects.h"
#include "core/contended_pool.h"
#include "core/contention.h"
#include "core/parallel.h"
#include "ir/ir.h"
#include "runtime/dataflow.h"
#include "runtime/executor.h"

namespace kiln {
namespace {

DataflowPlan PlanOf(const ir::Module& module) {
  const analysis::ModuleEffects effects(module);
  return PlanDataflow(module.entry(), effects, [](int) { return false; });
}

std::vector<int> Sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// Node 0 reads parameter %0, node 1 is independent, node 2 writes %0 in place, node 3 reads it
// after the write, node 4 views it and node 5 writes it again.
const char* kWrites = R"(func @main(%0: f32[4], %1: f32[4]) -> (f32[4], f32[4]) {
  %2 = mul(%0, %1) : f32[4]
  %3 = exp(%1) : f32[4]
  %4 = assign(%0, %3) : f32[4]
  %5 = add(%0, %2) : f32[4]
  %6 = reshape(%0) {shape=(2, 2)} : f32[2,2]
  %7 = assign(%0, %1) : f32[4]
  return %5, %3
}
)";

TEST(Dataflow, WritesWaitForEarlierAccessesAndLaterAccessesWaitForWrites) {
  const ir::Module module = ir::Parse(kWrites);
  const DataflowPlan plan = PlanOf(module);
  ASSERT_TRUE(plan.eligible);
  EXPECT_EQ(plan.num_preds, (std::vector<int>{0, 0, 2, 2, 1, 3}));
  EXPECT_EQ(Sorted(plan.succs[0]), (std::vector<int>{2, 3}));  // the write, and a data use
  EXPECT_EQ(Sorted(plan.succs[1]), (std::vector<int>{2}));     // its data use only
  EXPECT_EQ(Sorted(plan.succs[2]), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(Sorted(plan.succs[3]), (std::vector<int>{5}));  // read before the second write
  EXPECT_EQ(Sorted(plan.succs[4]), (std::vector<int>{5}));  // the view too
  // Readers per slot: parameters and results are kept (-1), the others count their readers.
  EXPECT_EQ(plan.readers[0], -1);
  EXPECT_EQ(plan.readers[2], 1);   // %2, read by node 3
  EXPECT_EQ(plan.readers[3], -1);  // %3 is returned
  EXPECT_EQ(plan.readers[6], 0);   // %6: nothing reads it
}

// Two branches from one value, each long enough that a team runs them at once, then a join.
const char* kBranches = R"(func @main(%0: f32[256,300]) -> (f32[256,300], f32[]) {
  %1 = const [0.5] : f32[]
  %2 = mul(%0, %1) : f32[256,300]
  %3 = exp(%2) : f32[256,300]
  %4 = tanh(%2) : f32[256,300]
  %5 = sub(%2, %1) : f32[256,300]
  %6 = add(%3, %4) : f32[256,300]
  %7 = mul(%6, %5) : f32[256,300]
  %8 = reduce_sum(%7) {axes=None, keepdims=False, dtype=None} : f32[]
  return %7, %8
}
)";

TEST(Dataflow, ATeamRunEqualsTheRunInOrder) {
  const ir::Module module = ir::Parse(kBranches);
  Tensor x = Tensor::Empty({256, 300}, DType::Float32);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = 0.001f * static_cast<float>(i % 1013);
  Program program(module);
  const int threads = GetNumThreads();
  SetNumThreads(2);
  SetContentionOverride(1);
  SetTeamRuns(false);
  const std::vector<Tensor> want = program.Run({x});
  SetTeamRuns(true);
  const int64_t teams = GetContendedPoolStats().teams;
  for (int round = 0; round < 20; ++round) {
    const std::vector<Tensor> got = program.Run({x});
    for (size_t r = 0; r < want.size(); ++r)
      for (int64_t i = 0; i < want[r].numel(); ++i)
        ASSERT_EQ(got[r].data<float>()[i], want[r].data<float>()[i]) << "result " << r;
  }
  EXPECT_EQ(GetContendedPoolStats().teams - teams, 20);
  SetContentionOverride(-1);
  SetNumThreads(threads);
}

TEST(Dataflow, FunctionsWithRegionsOrCallsRunInOrder) {
  const ir::Module module = ir::Parse(R"(func @main(%0: f32[4]) -> (f32[4]) {
  %1 = call @twice(%0) : f32[4]
  return %1
}

func @twice(%0: f32[4]) -> (f32[4]) {
  %1 = add(%0, %0) : f32[4]
  return %1
}
)");
  EXPECT_FALSE(PlanOf(module).eligible);
}

}  // namespace
}  // namespace kiln
