// test_analysis.cc - the analysis layer from IR text: effects, alias classes and chunking facts.
#include <gtest/gtest.h>

#include <string>

#include "analysis/aliasing.h"
#include "analysis/chunking.h"
#include "analysis/effects.h"
#include "ir/ir.h"

namespace kiln {
namespace {

using analysis::AliasClasses;
using analysis::Effects;
using analysis::ModuleEffects;
using analysis::ParamAliasing;

ir::Module Parsed(const char* text) {
  ir::Module m = ir::Parse(text);
  ir::Verify(m);
  return m;
}

ir::ValueRef Out(int node, int index = 0) { return ir::ValueRef{node, index}; }
ir::ValueRef Param(int index) { return ir::ValueRef{-1, index}; }

// ---- effects

// Node 0 computes, node 1 draws, node 2 writes, node 3 prints; @maybe_write writes through the
// function it calls, @compute only computes, @check raises.
const char* kEffects = R"(func @main(%0: f32[3], %1: f32[3], %2: b[]) -> (f32[3]) {
  %3 = exp(%0) : f32[3]
  %4 = uniform_real() {shape=(3,), dtype=float32, low=0.0, high=1.0, seed=None} : f32[3]
  %5 = assign(%1, %3) : f32[3]
  print "{}"(%3)
  %6 = if %2(%0) then @maybe_write else @compute : f32[3]
  %7 = call @compute(%0) : f32[3]
  if %2() then @check else @nothing
  return %7
}

func @maybe_write(%0: f32[3]) -> (f32[3]) {
  %1 = call @writes(%0) : f32[3]
  return %1
}

func @writes(%0: f32[3]) -> (f32[3]) {
  %1 = const [0.0] : f32[]
  %2 = assign(%0, %1) : f32[3]
  return %2
}

func @compute(%0: f32[3]) -> (f32[3]) {
  %1 = tanh(%0) : f32[3]
  return %1
}

func @check() -> () {
  raise ValueError "negative"()
  return
}

func @nothing() -> () {
  return
}
)";

TEST(Effects, OpsTakeTheirEffectsFromTheRegistry) {
  EXPECT_TRUE(analysis::OpEffects(GetOpDef(OpKind::Add)).pure());
  EXPECT_TRUE(analysis::OpEffects(GetOpDef(OpKind::Assign)).writes);
  EXPECT_TRUE(analysis::OpEffects(GetOpDef(OpKind::BatchNorm)).writes);
  EXPECT_TRUE(analysis::OpEffects(GetOpDef(OpKind::UniformReal)).random);
  EXPECT_FALSE(analysis::OpEffects(GetOpDef(OpKind::UniformReal)).writes);
  EXPECT_TRUE(analysis::OpEffects(GetOpDef(OpKind::Dropout)).random);
  for (OpKind k : {OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter, OpKind::Broadcast,
                   OpKind::Barrier}) {
    EXPECT_TRUE(analysis::OpEffects(GetOpDef(k)).communicates) << OpName(k);
    EXPECT_FALSE(analysis::OpEffects(GetOpDef(k)).pure()) << OpName(k);
  }
}

TEST(Effects, EachNodeKindHasItsOwn) {
  ir::Module m = Parsed(kEffects);
  const ModuleEffects effects(m);
  const auto& nodes = m.entry().nodes;
  EXPECT_TRUE(effects.IsPure(nodes[0]));
  EXPECT_TRUE(analysis::IsPureOp(nodes[0]));
  EXPECT_TRUE(effects.Of(nodes[1]).random);
  EXPECT_FALSE(analysis::IsPureOp(nodes[1]));
  EXPECT_TRUE(effects.MayWrite(nodes[2]));
  EXPECT_FALSE(analysis::IsPureOp(nodes[2]));
  EXPECT_TRUE(effects.Of(nodes[3]).prints);
  EXPECT_FALSE(effects.Of(nodes[3]).writes);
}

TEST(Effects, RegionsHaveTheEffectsOfTheFunctionsTheyRun) {
  ir::Module m = Parsed(kEffects);
  const ModuleEffects effects(m);
  const auto& nodes = m.entry().nodes;
  // if: one branch calls a function that assigns, two levels down.
  EXPECT_TRUE(effects.MayWrite(nodes[4]));
  EXPECT_TRUE(effects.OfFunc("maybe_write").writes);
  EXPECT_TRUE(effects.OfFunc("writes").writes);
  // A call of a function that only computes is pure, and so is not an op (IsPureOp).
  EXPECT_TRUE(effects.IsPure(nodes[5]));
  EXPECT_FALSE(analysis::IsPureOp(nodes[5]));
  // An if that may raise.
  EXPECT_TRUE(effects.Of(nodes[6]).raises);
  EXPECT_FALSE(effects.Of(nodes[6]).writes);
  // The entry has every effect its nodes have.
  const Effects main = effects.OfFunc("main");
  EXPECT_TRUE(main.writes && main.random && main.prints && main.raises);
}

TEST(Effects, ConstantsArePureAndUnknownFunctionsAreNot) {
  ir::Module m = Parsed(kEffects);
  const ModuleEffects effects(m);
  EXPECT_TRUE(effects.IsPure(m.Find("writes")->nodes[0]));  // the const
  EXPECT_FALSE(analysis::IsPureOp(m.Find("writes")->nodes[0]));
  ir::Node call = m.entry().nodes[5];
  call.callees = {"added_later"};
  const Effects e = effects.Of(call);
  EXPECT_TRUE(e.writes && e.random && e.prints && e.raises);
}

TEST(Effects, RecursionThroughWhileLoopsSettles) {
  ir::Module m = Parsed(R"(func @main(%0: i64[]) -> (i64[]) {
  %1 = while(%0) cond @cond body @body : i64[]
  return %1
}

func @cond(%0: i64[]) -> (b[]) {
  %1 = const [0] : i64[]
  %2 = greater(%0, %1) : b[]
  return %2
}

func @body(%0: i64[]) -> (i64[]) {
  %1 = const [1] : i64[]
  %2 = sub(%0, %1) : i64[]
  print "{}"(%2)
  return %2
}
)");
  const ModuleEffects effects(m);
  EXPECT_TRUE(effects.IsPure(m.Find("cond")->nodes[1]));
  EXPECT_TRUE(effects.OfFunc("cond").pure());
  EXPECT_TRUE(effects.OfFunc("body").prints);
  EXPECT_TRUE(effects.Of(m.entry().nodes[0]).prints);
  EXPECT_FALSE(effects.MayWrite(m.entry().nodes[0]));
}

TEST(Effects, ADeepChainOfCallsSettlesWithoutRecursion) {
  // @f0 calls @f1 ... calls @f4999, which assigns: every function of the chain writes.
  const int depth = 5000;
  std::string text;
  for (int i = 0; i + 1 < depth; ++i)
    text += "func @f" + std::to_string(i) + "(%0: f32[2]) -> (f32[2]) {\n  %1 = call @f" +
            std::to_string(i + 1) + "(%0) : f32[2]\n  return %1\n}\n\n";
  text += "func @f" + std::to_string(depth - 1) +
          "(%0: f32[2]) -> (f32[2]) {\n  %1 = assign(%0, %0) : f32[2]\n  return %1\n}\n";
  ir::Module m = ir::Parse(text);
  const ModuleEffects effects(m);
  EXPECT_TRUE(effects.OfFunc("f0").writes);
  EXPECT_TRUE(effects.MayWrite(m.entry().nodes[0]));
  EXPECT_FALSE(effects.OfFunc("f0").prints);
}

// ---- aliasing

const char* kAliasing =
    R"(func @main(%0: f32[2,3], %1: f32[2,3], %2: f32[3], %3: f32[3]) -> (f32[3,2], f32[3]) {
  %4 = transpose(%0) {perm=(1, 0)} : f32[3,2]
  %5 = exp(%4) : f32[3,2]
  %6 = reshape(%1) {shape=(6,)} : f32[6]
  %7 = const [0.0] : f32[]
  %8 = assign(%6, %7) : f32[6]
  %9 = call @same(%2) : f32[3]
  %10 = call @zero(%3) : f32[3]
  return %5, %9
}

func @same(%0: f32[3]) -> (f32[3]) {
  return %0
}

func @zero(%0: f32[3]) -> (f32[3]) {
  %1 = const [0.0] : f32[]
  %2 = assign(%0, %1) : f32[3]
  return %2
}
)";

TEST(Aliasing, ViewsAndRegionsJoinTheirInputs) {
  ir::Module m = Parsed(kAliasing);
  const ModuleEffects effects(m);
  const AliasClasses alias(m.entry(), effects, ParamAliasing::Distinct);
  EXPECT_TRUE(alias.MayAlias(Out(0), Param(0)));   // transpose: a view
  EXPECT_FALSE(alias.MayAlias(Out(1), Param(0)));  // exp: a fresh buffer
  EXPECT_TRUE(alias.MayAlias(Out(2), Param(1)));   // reshape may be a view
  EXPECT_TRUE(alias.MayAlias(Out(4), Param(1)));   // assign returns its variable
  EXPECT_TRUE(alias.MayAlias(Out(5), Param(2)));   // a call may return its input
  EXPECT_FALSE(alias.MayAlias(Param(0), Param(1)));
  EXPECT_FALSE(alias.SharesParam(Out(1)));
  EXPECT_FALSE(alias.SharesParam(Out(3)));
  EXPECT_TRUE(alias.SharesParam(Out(0)));
}

TEST(Aliasing, WritesReachEveryValueThatMayShareTheStorage) {
  ir::Module m = Parsed(kAliasing);
  const ModuleEffects effects(m);
  const AliasClasses alias(m.entry(), effects, ParamAliasing::Distinct);
  EXPECT_FALSE(alias.Written(Param(0)));
  EXPECT_FALSE(alias.Written(Out(0)));
  EXPECT_TRUE(alias.Written(Param(1)));  // through the reshape that assign writes
  EXPECT_TRUE(alias.Written(Out(2)));
  EXPECT_FALSE(alias.Written(Param(2)));  // @same only returns it
  EXPECT_TRUE(alias.Written(Param(3)));   // @zero writes its parameter
  EXPECT_FALSE(alias.Written(Out(3)));    // the constant assigned from is only read
}

TEST(Aliasing, ParamsMayAliasEachOtherUnlessAskedOneByOne) {
  ir::Module m = Parsed(kAliasing);
  const ModuleEffects effects(m);
  const AliasClasses alias(m.entry(), effects);  // MayAlias: the caller may pass one tensor twice
  EXPECT_TRUE(alias.MayAlias(Param(0), Param(1)));
  EXPECT_TRUE(alias.Written(Param(0)));
  EXPECT_TRUE(alias.Written(Out(0)));
  EXPECT_FALSE(alias.Written(Out(1)));
}

TEST(Aliasing, ResultsMarkTheirClasses) {
  ir::Module m = Parsed(kAliasing);
  const ModuleEffects effects(m);
  const AliasClasses alias(m.entry(), effects, ParamAliasing::Distinct);
  EXPECT_TRUE(alias.Returned(Out(1)));
  EXPECT_TRUE(alias.Returned(Param(2)));  // through the call that may return it
  EXPECT_FALSE(alias.Returned(Param(0)));
  EXPECT_FALSE(alias.Returned(Out(3)));
}

TEST(Aliasing, NodeFacts) {
  ir::Module m = Parsed(kAliasing);
  const ModuleEffects effects(m);
  const auto& nodes = m.entry().nodes;
  EXPECT_EQ(analysis::MayAliasInputs(nodes[0]), std::vector<int>{0});
  EXPECT_TRUE(analysis::MayAliasInputs(nodes[1]).empty());
  EXPECT_EQ(analysis::MayAliasInputs(nodes[5]), std::vector<int>{0});
  EXPECT_EQ(analysis::WrittenInputs(nodes[4], effects), std::vector<int>{0});
  EXPECT_TRUE(analysis::WrittenInputs(nodes[5], effects).empty());
  EXPECT_EQ(analysis::WrittenInputs(nodes[6], effects), std::vector<int>{0});
  EXPECT_TRUE(analysis::MakesFreshOutputs(nodes[1]));
  EXPECT_FALSE(analysis::MakesFreshOutputs(nodes[0]));  // a view
  EXPECT_FALSE(analysis::MakesFreshOutputs(nodes[3]));  // a constant: the same every call
  EXPECT_FALSE(analysis::MakesFreshOutputs(nodes[5]));  // a call
}

// Python code may return its input or write it: an interpret node joins and writes its inputs.
TEST(Aliasing, InterpretNodesMayReturnAndWriteTheirInputs) {
  ir::Module m = Parsed(R"ir(func @main(%0: f32[3]) -> (f32[3]) {
  %1 = const [0.0, 0.0, 0.0] : f32[3]
  %2 = interpret "site1" "bump(t)" (%1) : f32[3]
  %3 = add(%2, %0) : f32[3]
  return %3
}
)ir");
  const ModuleEffects effects(m);
  const AliasClasses alias(m.entry(), effects, ParamAliasing::Distinct);
  EXPECT_TRUE(alias.MayAlias(Out(1), Out(0)));
  EXPECT_TRUE(alias.Written(Out(0)));
  EXPECT_FALSE(alias.Written(Param(0)));
  EXPECT_EQ(analysis::MayAliasInputs(m.entry().nodes[1]), std::vector<int>{0});
  EXPECT_EQ(analysis::WrittenInputs(m.entry().nodes[1], effects), std::vector<int>{0});
}

// ---- chunking

TEST(Chunking, OperandsFitAsFullScalarOrRow) {
  using analysis::FitsElementwiseChunks;
  EXPECT_TRUE(FitsElementwiseChunks({4, 8}, {4, 8}));
  EXPECT_TRUE(FitsElementwiseChunks({}, {4, 8}));
  EXPECT_TRUE(FitsElementwiseChunks({1, 1}, {4, 8}));
  EXPECT_TRUE(FitsElementwiseChunks({8}, {4, 8}));
  EXPECT_TRUE(FitsElementwiseChunks({1, 8}, {4, 8}));
  EXPECT_FALSE(FitsElementwiseChunks({4, 1}, {4, 8}));  // a column
  EXPECT_FALSE(FitsElementwiseChunks({4}, {4, 8}));
  EXPECT_FALSE(FitsElementwiseChunks({2, 4, 8}, {4, 8}));
  EXPECT_FALSE(FitsElementwiseChunks({-1, 8}, {-1, 8}));  // not static
  EXPECT_FALSE(FitsElementwiseChunks({8}, {}));
}

const char* kChunkable = R"(func @main(%0: f32[4,8], %1: f32[8], %2: f32[?,8]) -> (f32[4,8]) {
  %3 = const [0.5] : f32[]
  %4 = mul(%0, %3) : f32[4,8]
  %5 = add(%4, %1) : f32[4,8]
  %6 = tanh(%5) : f32[4,8]
  %7 = exp(%2) : f32[?,8]
  %8 = transpose(%0) {perm=(1, 0)} : f32[8,4]
  %9 = matmul(%0, %8) {transpose_a=False, transpose_b=False} : f32[4,4]
  %10, %11 = dropout(%0) {p=0.5, seed=None} : f32[4,8], f32[4,8]
  %12 = const [1.0, 2.0] : f32[2]
  return %6
}
)";

TEST(Chunking, WhichNodesAChunkCanRun) {
  ir::Module m = Parsed(kChunkable);
  const auto& nodes = m.entry().nodes;
  EXPECT_TRUE(analysis::IsChunkableConst(nodes[0]));
  EXPECT_FALSE(analysis::IsChunkableOp(nodes[0]));
  EXPECT_TRUE(analysis::IsChunkableOp(nodes[1]));
  EXPECT_TRUE(analysis::IsChunkableOp(nodes[3]));
  EXPECT_FALSE(analysis::IsChunkableOp(nodes[4]));  // a dimension known only at run time
  EXPECT_FALSE(analysis::IsChunkableOp(nodes[5]));  // a view
  EXPECT_FALSE(analysis::IsChunkableOp(nodes[6]));  // not elementwise
  EXPECT_FALSE(analysis::IsChunkableOp(nodes[7]));  // random, two outputs
  EXPECT_FALSE(analysis::IsChunkableConst(nodes[8]));
}

TEST(Chunking, TheExecutorMayWriteOverADyingInputOfElementwiseOps) {
  ir::Module m = Parsed(kChunkable);
  const auto& nodes = m.entry().nodes;
  EXPECT_TRUE(analysis::MayWriteOutputOverInput(nodes[1]));
  EXPECT_FALSE(analysis::MayWriteOutputOverInput(nodes[4]));  // output size unknown
  EXPECT_FALSE(analysis::MayWriteOutputOverInput(nodes[5]));
  EXPECT_FALSE(analysis::MayWriteOutputOverInput(nodes[6]));
}

bool BodyQualifies(const std::string& body) {
  ir::Module m = Parsed(body.c_str());
  return analysis::IsChunkableBody(m.entry());
}

TEST(Chunking, WhichBodiesRunChunked) {
  EXPECT_TRUE(BodyQualifies(R"(func @body(%0: f32[4,8], %1: f32[8]) -> (f32[4,8]) {
  %2 = const [0.5] : f32[]
  %3 = mul(%0, %2) : f32[4,8]
  %4 = add(%3, %1) : f32[4,8]
  return %4
}
)"));
  // A column operand does not fit a row-chunked run.
  EXPECT_FALSE(BodyQualifies(R"(func @body(%0: f32[4,8], %1: f32[4,1]) -> (f32[4,8]) {
  %2 = add(%0, %1) : f32[4,8]
  return %2
}
)"));
  // The result must be the last op's value.
  EXPECT_FALSE(BodyQualifies(R"(func @body(%0: f32[4,8]) -> (f32[4,8]) {
  %1 = exp(%0) : f32[4,8]
  %2 = tanh(%0) : f32[4,8]
  return %1
}
)"));
  // Every op has the result's shape.
  EXPECT_FALSE(BodyQualifies(R"(func @body(%0: f32[4,8], %1: f32[8]) -> (f32[4,8]) {
  %2 = exp(%1) : f32[8]
  %3 = add(%0, %2) : f32[4,8]
  return %3
}
)"));
  // A constant of more than one element.
  EXPECT_FALSE(BodyQualifies(R"(func @body(%0: f32[2]) -> (f32[2]) {
  %1 = const [1.0, 2.0] : f32[2]
  %2 = add(%0, %1) : f32[2]
  return %2
}
)"));
  // Nothing to run, or a parameter returned as it is.
  EXPECT_FALSE(BodyQualifies(R"(func @body(%0: f32[2]) -> (f32[2]) {
  return %0
}
)"));
}

}  // namespace
}  // namespace kiln
