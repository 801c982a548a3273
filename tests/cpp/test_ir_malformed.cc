// test_ir_malformed.cc - malformed IR (the fuzzer's mutant kinds) is an error, never a crash.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "ir/ir.h"
#include "kernels/cpu/copy.h"
#include "runtime/executor.h"

namespace kiln {
namespace {

// The message of the kiln::Error that parsing and verifying `text` raises ("" if none).
std::string ErrorOf(const std::string& text) {
  try {
    ir::Verify(ir::Parse(text));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A one-node entry function over one f32[2,2] parameter.
std::string OneNode(const std::string& node, const std::string& param = "f32[2,2]") {
  return "func @main(%0: " + param + ") -> () {\n  " + node + "\n  return\n}\n";
}

#define EXPECT_ERROR_HAS(text, ...)                                \
  do {                                                             \
    std::string message = ErrorOf(text);                           \
    ASSERT_FALSE(message.empty()) << "accepted:\n" << (text);      \
    for (const char* word : {__VA_ARGS__})                         \
      EXPECT_NE(message.find(word), std::string::npos) << message; \
  } while (0)

TEST(IRMalformed, MissingOperandsNameOpFunctionAndNode) {
  EXPECT_ERROR_HAS(OneNode("%1 = matmul(%0) : f32[2,2]"), "matmul", "@main", "node 0",
                   "input 1 ('other') is required");
  EXPECT_ERROR_HAS(OneNode("%1 = max_pool2d() : f32[2,2]"), "max_pool2d", "required");
  EXPECT_ERROR_HAS(OneNode("%1 = add(%0, none) : f32[2,2]"), "add", "required");
}

TEST(IRMalformed, EveryOpWithRequiredInputsRejectsNoOperands) {
  for (int i = 0; i < kNumOps; ++i) {
    const OpDef& def = GetOpDef(static_cast<OpKind>(i));
    if (def.inputs.empty() || std::string(def.inputs[0]).back() == '?') continue;
    // Whatever result type is written, the missing operand must be found first (a variadic
    // first input may be empty by arity; its inference rejects it).
    const bool variadic = std::string(def.inputs[0]).back() == '*';
    EXPECT_ERROR_HAS(OneNode(std::string("%1 = ") + def.name + "() : f32[2,2]"), def.name,
                     variadic ? "" : "required");
  }
}

TEST(IRMalformed, SurplusOperandsAreRejected) {
  EXPECT_ERROR_HAS(OneNode("%1 = add(%0, %0, %0) : f32[2,2]"), "add", "at most 2");
  EXPECT_ERROR_HAS(OneNode("%1 = neg(%0, %0) : f32[2,2]"), "neg", "at most 1");
}

TEST(IRMalformed, VariadicInputsMustBePresent) {
  EXPECT_ERROR_HAS(OneNode("%1 = concat(%0, none) : f32[4,2]"), "concat", "required");
  EXPECT_EQ(ErrorOf(OneNode("%1 = concat(%0, %0, %0) : f32[6,2]")), "");
}

TEST(IRMalformed, AttributeTypesAreCheckedBeforeInference) {
  EXPECT_ERROR_HAS(OneNode("%1 = reduce_sum(%0) {keepdims=\"yes\"} : f32[]"), "reduce_sum",
                   "attribute 'keepdims' must be a bool");
  EXPECT_ERROR_HAS(OneNode("%1 = transpose(%0) {perm=1.5} : f32[2,2]"), "transpose",
                   "attribute 'perm' must be a tuple of ints");
  EXPECT_ERROR_HAS(OneNode("%1 = cast(%0) {dtype=7} : f32[2,2]"), "cast", "'dtype'");
}

TEST(IRMalformed, OutOfRangeLiteralsAreParseErrorsWithLineAndColumn) {
  EXPECT_ERROR_HAS(OneNode("%1 = neg(%0) : f32[2,2]", "f32[99999999999999999999]"), "line 1:20",
                   "out of range");
  EXPECT_ERROR_HAS(OneNode("%1 = reduce_sum(%0) {axes=(99999999999999999999,)} : f32[2]"),
                   "line 2:", "out of range");
  EXPECT_ERROR_HAS(OneNode("%1 = const [300] : u8[]"), "line 2:15", "out of range");
  EXPECT_ERROR_HAS(OneNode("%1 = const [1e999] : f64[]"), "out of range");
  EXPECT_ERROR_HAS(OneNode("%1 = const [1e39] : f32[]"), "out of range for float32");
  EXPECT_ERROR_HAS(OneNode("%1 = const [1.5] : i32[]"), "expected int32");
  EXPECT_ERROR_HAS(OneNode("%1 = neg(%0) : f32[2,2] loc(\"f.py\":99999999999:1)"), "a line",
                   "out of range");
  EXPECT_ERROR_HAS(OneNode("%1 = neg(%0) : f32[2,2]", "f32[2x]"), "expected a dimension");
  EXPECT_ERROR_HAS(OneNode("%1 = neg(%0) : f32[2,2]", "f32[-3]"), "out of range");
  EXPECT_ERROR_HAS(OneNode("const [1]"), "exactly one result");
}

TEST(IRMalformed, HugeDimensionsAreRejectedWhenTheirSizeOverflows) {
  EXPECT_ERROR_HAS(OneNode("%1 = neg(%0) : f32[2,2]", "f32[4611686018427387904,4]"),
                   "more than 2^63 bytes");
  EXPECT_ERROR_HAS(OneNode("%1 = neg(%0) : f32[2,2]", "f64[1099511627776,1099511627776]"),
                   "more than 2^63 bytes");
}

TEST(IRMalformed, Int64ConstantsKeepEveryDigit) {
  std::string text = OneNode("%1 = const [9007199254740993, -9223372036854775808] : i64[2]");
  ir::Module m = ir::Parse(text);
  EXPECT_EQ(m.entry().nodes[0].value.data<int64_t>()[0], 9007199254740993);
  EXPECT_NE(ir::Print(m).find("[9007199254740993, -9223372036854775808]"), std::string::npos);
}

TEST(IRMalformed, RegionsAndCallsTakeNoNoneOperands) {
  std::string text =
      "func @main(%0: f32[2]) -> (f32[2]) {\n  %1 = call @id(none) : f32[]\n  return %0\n}\n"
      "func @id(%0: f32[]) -> (f32[]) {\n  return %0\n}\n";
  EXPECT_ERROR_HAS(text, "call", "none");
}

TEST(IRMalformed, WhileBodyMustReturnEveryCarriedValue) {
  std::string text =
      "func @main(%0: b[], %1: f32[2]) -> (b[], f32[2]) {\n"
      "  %2, %3 = while(%0, %1) cond @c body @b : b[], f32[2]\n  return %2, %3\n}\n"
      "func @c(%0: b[], %1: f32[2]) -> (b[]) {\n  return %0\n}\n"
      "func @b(%0: b[], %1: f32[2]) -> (b[]) {\n  return %0\n}\n";
  EXPECT_ERROR_HAS(text, "@b");
}

TEST(IRMalformed, RecursionIsRejected) {
  std::string text =
      "func @main(%0: f32[2]) -> (f32[2]) {\n  %1 = call @f(%0) : f32[2]\n  return %1\n}\n"
      "func @f(%0: f32[2]) -> (f32[2]) {\n  %1 = call @main(%0) : f32[2]\n  return %1\n}\n";
  EXPECT_ERROR_HAS(text, "calls itself");
}

TEST(IRMalformed, TheExecutorNeverRunsAnUnverifiedModule) {
  ir::Module m;
  ir::Func& f = m.AddFunc("main");
  f.params.push_back({DType::Float32, {2, 2}});
  ir::Node node;
  node.op = OpKind::MatMul;
  node.attrs = CompleteAttrs(GetOpDef(OpKind::MatMul), {});
  node.inputs = {ir::ValueRef{-1, 0}};  // `other` is missing
  node.outputs = {{DType::Float32, {2, 2}}};
  f.nodes.push_back(node);
  f.results = {ir::ValueRef{0, 0}};
  Tensor x = Tensor::Empty({2, 2}, DType::Float32);
  cpu::Fill(x, 1.0);
  EXPECT_THROW(kiln::Run(m, {x}), Error);
}

// Found by fuzz_ir: a promoted op whose operands differ in dtype reached the kernel, which read
// the float32 buffer as doubles. IR text must carry the casts the builder inserts.
TEST(IRMalformed, PromotedOpsNeedOperandsOfOneDType) {
  const std::string mixed =
      "func @main(%0: f64[4,8], %1: f32[16,8]) -> (f64[4,16]) {\n"
      "  %2 = matmul(%0, %1) {transpose_a=False, transpose_b=True} : f64[4,16]\n"
      "  return %2\n}\n";
  EXPECT_ERROR_HAS(mixed, "matmul", "input 1 is float32", "computes in float64", "cast it first");
  const std::string cast =
      "func @main(%0: f64[4,8], %1: f32[16,8]) -> (f64[4,16]) {\n"
      "  %2 = cast(%1) {dtype=float64} : f64[16,8]\n"
      "  %3 = matmul(%0, %2) {transpose_a=False, transpose_b=True} : f64[4,16]\n"
      "  return %3\n}\n";
  EXPECT_EQ(ErrorOf(cast), "");
}

}  // namespace
}  // namespace kiln
