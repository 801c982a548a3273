// test_registry.cc - every op in op_list.def is registered with each of its facets.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ops/registry.h"

namespace kiln {
namespace {

TEST(Registry, EveryOpHasEveryFacet) {
  for (int i = 0; i < kNumOps; ++i) {
    auto kind = static_cast<OpKind>(i);
    SCOPED_TRACE(OpName(kind));
    ASSERT_TRUE(IsRegistered(kind)) << "op is listed in op_list.def but not registered";
    const OpDef& def = GetOpDef(kind);
    EXPECT_EQ(def.kind, kind);
    EXPECT_STREQ(def.name, OpName(kind));
    EXPECT_NE(def.infer, nullptr) << "missing shape/dtype inference";
    EXPECT_NE(def.kernel, nullptr) << "missing CPU kernel";
    EXPECT_NE(def.grad, nullptr) << "missing gradient rule (NotDifferentiable if none)";
    for (const auto& attr : def.attrs) EXPECT_NE(attr.name, nullptr);
    for (int m : def.mutated_inputs) EXPECT_LT(m, static_cast<int>(def.inputs.size()));
  }
}

TEST(Registry, NamesAreUniqueAndRoundTrip) {
  std::set<std::string> seen;
  for (int i = 0; i < kNumOps; ++i) {
    auto kind = static_cast<OpKind>(i);
    EXPECT_TRUE(seen.insert(OpName(kind)).second) << OpName(kind);
    EXPECT_EQ(OpKindFromName(OpName(kind)), kind);
  }
}

TEST(Registry, GradReadsDeclarations) {
  const OpDef& mul = GetOpDef(OpKind::Mul);  // both factors (crosswise), not its output
  EXPECT_TRUE(GradReadsInput(mul, 0) && GradReadsInput(mul, 1));
  EXPECT_TRUE(mul.grad_reads_factors_crosswise);
  EXPECT_FALSE(GradReadsOutput(mul, 0));
  const OpDef& relu = GetOpDef(OpKind::Relu);  // its output only
  EXPECT_FALSE(GradReadsInput(relu, 0));
  EXPECT_TRUE(GradReadsOutput(relu, 0));
  const OpDef& concat = GetOpDef(OpKind::Concat);  // shapes only, however many inputs
  EXPECT_FALSE(GradReadsInput(concat, 0));
  EXPECT_FALSE(GradReadsInput(concat, 200));
  const OpDef& undeclared = GetOpDef(OpKind::ReduceProd);  // everything by default
  EXPECT_TRUE(GradReadsInput(undeclared, 0) && GradReadsOutput(undeclared, 0));
  OpDef many = GradReads(GetOpDef(OpKind::Concat), {1, 70}, {});
  EXPECT_FALSE(GradReadsInput(many, 0));
  EXPECT_TRUE(GradReadsInput(many, 1));
  EXPECT_TRUE(GradReadsInput(many, 64));  // the top bit stands for every later input
}

TEST(Registry, UnknownNameThrows) { EXPECT_THROW(OpKindFromName("no_such_op"), std::exception); }

TEST(Registry, BroadcastShapes) {
  EXPECT_EQ(BroadcastShapes({2, 1, 3}, {4, 1}, "t"), (Shape{2, 4, 3}));
  EXPECT_EQ(BroadcastShapes({}, {5}, "t"), (Shape{5}));
  EXPECT_EQ(BroadcastShapes({-1, 3}, {4, 3}, "t"), (Shape{4, 3}));
  EXPECT_THROW(BroadcastShapes({2, 3}, {4}, "t"), std::exception);
}

TEST(Registry, PromotionWithWeakScalars) {
  std::vector<TensorMeta> int_tensor_float_scalar = {{DType::Int32, {2}, false},
                                                     {DType::Float64, {}, true}};
  EXPECT_EQ(PromotedType(int_tensor_float_scalar, {}), DType::Float32);
  std::vector<TensorMeta> half_tensor_float_scalar = {{DType::Float16, {2}, false},
                                                      {DType::Float64, {}, true}};
  EXPECT_EQ(PromotedType(half_tensor_float_scalar, {}), DType::Float16);
  std::vector<TensorMeta> two_tensors = {{DType::UInt8, {2}, false}, {DType::Int8, {2}, false}};
  EXPECT_EQ(PromotedType(two_tensors, {}), DType::Int16);
}

}  // namespace
}  // namespace kiln
