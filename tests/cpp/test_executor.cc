// test_executor.cc - the planned executor without Python: fused elementwise calls, in-place
// reuse, constants that are written or returned, and the derived cache behind packed weights.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/ir.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/derived_cache.h"
#include "passes/passes.h"
#include "runtime/executor.h"

namespace kiln {
namespace {

Tensor Iota(const Shape& shape, float scale) {
  Tensor t = Tensor::Empty(shape, DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * static_cast<float>(i % 97);
  return t;
}

// tanh(x * 0.5 + bias) * x over a [300, 257] input: 77,100 elements, so the chunked runner
// splits it into several row chunks (a row operand), and the last chunk is partial.
const char* kChain = R"(func @main(%0: f32[300,257], %1: f32[257]) -> (f32[300,257]) {
  %2 = const [0.5] : f32[]
  %3 = mul(%0, %2) : f32[300,257]
  %4 = add(%3, %1) : f32[300,257]
  %5 = tanh(%4) : f32[300,257]
  %6 = mul(%5, %0) : f32[300,257]
  return %6
}
)";

TEST(Executor, FusedElementwiseCallEqualsTheUnfusedOps) {
  const std::vector<Tensor> args = {Iota({300, 257}, 0.01f), Iota({257}, -0.02f)};
  ir::Module plain = ir::Parse(kChain);
  ir::Module fused = ir::Parse(kChain);
  passes::FuseElementwise(fused);
  ir::Verify(fused);
  ASSERT_EQ(fused.funcs().size(), 2u) << ir::Print(fused);
  EXPECT_EQ(fused.entry().nodes.back().kind, ir::NodeKind::Call);
  Tensor want = kiln::Run(plain, args).at(0), got = kiln::Run(fused, args).at(0);
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << "element " << i;
}

TEST(Executor, InPlaceReuseNeverWritesTheInputs) {
  const Tensor x = Iota({300, 257}, 0.01f), bias = Iota({257}, -0.02f);
  const Tensor x_copy = x.Clone();
  const ir::Module module = ir::Parse(kChain);
  Program program(module);  // unfused: each op may take its dying input's buffer
  Tensor out = program.Run({x, bias}).at(0);
  EXPECT_FALSE(out.same_storage(x));
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(x.data<float>()[i], x_copy.data<float>()[i]);
}

// zeros folded into a constant, then written in place (the gradient of a gather): each run
// starts from the compiled zeros, and the constant the function returns is the caller's own.
const char* kWrittenConstant = R"(func @main(%0: f32[3], %1: i32[]) -> (f32[4,3], f32[2]) {
  %2 = const [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0] : f32[4,3]
  %3 = index_put(%2, %0, %1) {axes=(0,), accumulate=True} : f32[4,3]
  %4 = const [5.0, 6.0] : f32[2]
  return %3, %4
}
)";

TEST(Executor, ConstantsStayAsCompiledWhenWrittenOrReturned) {
  const ir::Module module = ir::Parse(kWrittenConstant);
  Program program(module);
  const Tensor row = Iota({3}, 1.0f);
  auto index = [](int32_t i) {
    Tensor t = Tensor::Empty({}, DType::Int32);
    *t.data<int32_t>() = i;
    return t;
  };
  for (int call = 0; call < 3; ++call) {
    std::vector<Tensor> out = program.Run({row, index(call)});
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t c = 0; c < 3; ++c)
        ASSERT_EQ(out[0].data<float>()[r * 3 + c], r == call ? static_cast<float>(c) : 0.0f)
            << "call " << call << ", row " << r;
    EXPECT_EQ(out[1].data<float>()[0], 5.0f) << "call " << call;
    out[1].data<float>()[0] = -1.0f;  // the caller writes what it got back
  }
  EXPECT_EQ(module.entry().nodes[0].value.data<float>()[3], 0.0f);
  EXPECT_EQ(module.entry().nodes[2].value.data<float>()[0], 5.0f);
}

// A verified module may still nest calls arbitrarily deep (a chain of functions, each calling
// the next): past a fixed depth that is a RecursionError, never a stack overflow.
TEST(Executor, DeeplyChainedCallsAreARecursionErrorNotAStackOverflow) {
  std::string text;
  const int depth = 20000;
  for (int i = 0; i < depth; ++i) {
    text += "func @f" + std::to_string(i) + "(%0: f32[]) -> (f32[]) {\n";
    if (i + 1 < depth)
      text += "  %1 = call @f" + std::to_string(i + 1) + "(%0) : f32[]\n  return %1\n}\n";
    else
      text += "  return %0\n}\n";
  }
  const ir::Module module = ir::Parse(text);
  Program program(module);
  try {
    program.RunFunc("f0", {Iota({}, 1.0f)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Recursion) << e.what();
  }
}

TEST(DerivedCache, MadeOnTheSecondSightingAndDroppedOnAWrite) {
  Tensor w = Iota({8, 4}, 1.0f);
  int made = 0;
  auto make = [&] {
    ++made;
    return std::make_shared<int>(made);
  };
  EXPECT_EQ(cpu::DerivedLookup(w, {7}, make), nullptr);  // first sighting: nothing made
  auto first = cpu::DerivedLookup(w, {7}, make);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(cpu::DerivedLookup(w, {7}, make), first);  // reused
  EXPECT_EQ(made, 1);
  MarkWritten(w.Select(0, 2));  // a write through another view of the same bytes
  EXPECT_EQ(cpu::DerivedLookup(w, {7}, make), nullptr);  // stale: dropped, counted as a sighting
  EXPECT_NE(cpu::DerivedLookup(w, {7}, make), nullptr);
  EXPECT_EQ(made, 2);
  EXPECT_EQ(cpu::DerivedLookup(w.Select(0, 1), {7}, make), nullptr);  // another view, another key
}

TEST(DerivedCache, AWriteFreesStaleValuesAtOnceButKeepsOneMadeForTheNewBytes) {
  Tensor w = Iota({8, 4}, 1.0f);
  auto make = [] { return std::make_shared<int>(1); };
  cpu::DerivedLookup(w, {7}, make);
  std::weak_ptr<void> packed = cpu::DerivedLookup(w, {7}, make);
  ASSERT_FALSE(packed.expired());
  // An update kernel stores the value of the bytes it is writing, at the version its write
  // gives (RunKernel marks the input written after the kernel).
  const uint64_t next = w.storage()->write_version() + 1;
  cpu::DerivedStore(w, {9}, next, std::make_shared<int>(2));
  MarkWritten(w);
  EXPECT_TRUE(packed.expired());  // freed by the write, not at its next request
  auto kept = cpu::DerivedLookup(w, {9}, make);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(*static_cast<int*>(kept.get()), 2);
}

TEST(DerivedCache, NothingIsCachedWhileNumpyMayWriteTheBytes) {
  Tensor w = Iota({4}, 1.0f);
  w.storage()->AddNumpyView();
  auto make = [] { return std::make_shared<int>(1); };
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cpu::DerivedLookup(w, {1}, make), nullptr);
  w.storage()->ReleaseNumpyView();
  EXPECT_EQ(cpu::DerivedLookup(w, {1}, make), nullptr);
  EXPECT_NE(cpu::DerivedLookup(w, {1}, make), nullptr);
}

}  // namespace
}  // namespace kiln
