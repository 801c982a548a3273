// test_ir.cc - IR builder, printer/parser round trip, verifier and interpreter.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/ir.h"
#include "kernels/cpu/copy.h"
#include "runtime/executor.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing_util::Full;

// f(x: f32[2], n: i32[]) = x * n, with the promotion cast made explicit by the builder.
ir::Module MulByInt() {
  ir::Module m;
  ir::Func& f = m.AddFunc("main");
  ir::Builder b(m, f);
  ir::ValueRef x = b.Param({DType::Float32, {2}});
  ir::ValueRef n = b.Param({DType::Int32, {}});
  b.Return({b.Op1(OpKind::Mul, {x, n})});
  return m;
}

TEST(IR, BuilderInsertsPromotionCasts) {
  ir::Module m = MulByInt();
  ASSERT_EQ(m.entry().nodes.size(), 2u);
  EXPECT_EQ(m.entry().nodes[0].op, OpKind::Cast);
  EXPECT_EQ(m.entry().nodes[1].outputs[0].dtype, DType::Float32);
  ir::Verify(m);
}

TEST(IR, PrintParsePrintIsStable) {
  std::string text = ir::Print(MulByInt());
  EXPECT_EQ(ir::Print(ir::Parse(text)), text);
  EXPECT_NE(text.find("cast(%1) {dtype=float32} : f32[]"), std::string::npos) << text;
}

TEST(IR, InterpreterMatchesEager) {
  auto out = kiln::Run(MulByInt(), {Full({2}, DType::Float32, 1.5), Full({}, DType::Int32, 4)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], 6.0f);
  EXPECT_FLOAT_EQ(out[0].data<float>()[1], 6.0f);
}

TEST(IR, WhileLoopCountsDown) {
  ir::Module m;
  ir::Func& main = m.AddFunc("main");
  ir::Func& cond = m.AddFunc("cond");
  ir::Func& body = m.AddFunc("body");
  {
    ir::Builder b(m, cond);
    ir::ValueRef i = b.Param({DType::Int64, {}});
    ir::ValueRef zero = b.Const(Full({}, DType::Int64, 0));
    b.Return({b.Op1(OpKind::Greater, {i, zero})});
  }
  {
    ir::Builder b(m, body);
    ir::ValueRef i = b.Param({DType::Int64, {}});
    b.Return({b.Op1(OpKind::Sub, {i, b.Const(Full({}, DType::Int64, 1))})});
  }
  ir::Builder b(m, main);
  ir::ValueRef start = b.Param({DType::Int64, {}});
  b.Return(b.While({start}, "cond", "body"));
  ir::Verify(m);
  auto out = kiln::Run(m, {Full({}, DType::Int64, 7)});
  EXPECT_EQ(*out[0].data<int64_t>(), 0);
}

TEST(IR, VerifierRejectsUseBeforeDefinition) {
  ir::Module m = MulByInt();
  std::swap(m.entry().nodes[0], m.entry().nodes[1]);
  EXPECT_THROW(ir::Verify(m), Error);
}

TEST(IR, ParserReportsLineNumbers) {
  try {
    ir::Parse(
        "func @main(%0: f32[2]) -> (f32[2]) {\n  %1 = add(%0, %7) : f32[2]\n  return %1\n}\n");
    FAIL() << "expected a parse error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

// A raise of the user's own exception class names it "module.Class@0" (the front end keeps the
// class); the text form quotes such a name so that printed IR reads back.
TEST(IrText, ARaiseOfAUserExceptionClassPrintsAndParsesBack) {
  ir::Module m;
  ir::Func& f = m.AddFunc("main");
  ir::Builder b(m, f);
  ir::ValueRef x = b.Param({DType::Float32, {2}}, "x");
  b.Raise("tests.LimitError@0", "too large: {}", {x});
  b.Return({x});
  const std::string text = ir::Print(m);
  EXPECT_NE(text.find("raise \"tests.LimitError@0\""), std::string::npos) << text;
  const ir::Module again = ir::Parse(text);
  EXPECT_EQ(again.entry().nodes[0].callees[0], "tests.LimitError@0");
  EXPECT_EQ(ir::Print(again), text);
}

}  // namespace
}  // namespace kiln
