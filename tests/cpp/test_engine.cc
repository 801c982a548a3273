// test_engine.cc - the engine without Python: compile IR text with its signature, run it, and
// the signature's text round trip, verifier checks and input checks.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "engine/engine.h"
#include "ir/ir.h"

namespace kiln {
namespace {

using ir::OutputTree;
using Kind = OutputTree::Kind;

std::string ReadFixture(const std::string& name) {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/tests/ir/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The fixture without its leading comment lines: the canonical text Print must give back.
std::string WithoutComments(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line))
    if (line.rfind("//", 0) != 0) out += line + "\n";
  return out;
}

Tensor Iota(const Shape& shape, float scale = 1.0f, DType dtype = DType::Float32) {
  Tensor t = Tensor::Empty(shape, DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * static_cast<float>(i + 1);
  return dtype == DType::Float32 ? t : t.To(dtype);
}

// The message of the kiln::Error `run` throws, checked to be of `kind`.
template <typename F>
std::string ErrorOf(F run, ErrorKind kind) {
  try {
    run();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

void ExpectContains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

// signature.ir: out0 = x @ W + b, out1 = sum(out0), out2 = out0 * scale.
const char* kFixture = "signature.ir";

// The signature fixture with the first `from` replaced by `to`.
std::string FixtureWith(const std::string& from, const std::string& to) {
  std::string text = ReadFixture(kFixture);
  text.replace(text.find(from), from.size(), to);
  return text;
}

TEST(EngineSignature, FixturePrintsBackIdentically) {
  const std::string text = ReadFixture(kFixture);
  ASSERT_FALSE(text.empty()) << "tests/ir/signature.ir not found";
  ir::Module m = ir::Parse(text);
  ir::Verify(m);
  const std::string printed = ir::Print(m);
  EXPECT_EQ(printed, WithoutComments(text));
  ir::Module again = ir::Parse(printed);
  ASSERT_TRUE(again.signature().has_value());
  EXPECT_TRUE(*again.signature() == *m.signature());
  EXPECT_EQ(ir::Print(again), printed);
}

TEST(EngineSignature, FixtureParsesIntoRolesTypesAndTree) {
  ir::Module m = ir::Parse(ReadFixture(kFixture));
  const ir::Signature& sig = *m.signature();
  ASSERT_EQ(sig.inputs.size(), 4u);
  EXPECT_EQ(sig.inputs[0].role, ir::InputRole::Input);
  EXPECT_EQ(sig.inputs[0].name, "x");
  EXPECT_EQ(sig.inputs[0].shape, (Shape{-1, 3}));
  EXPECT_EQ(sig.inputs[1].role, ir::InputRole::Weight);
  EXPECT_EQ(sig.inputs[1].name, "fc.weight");
  EXPECT_EQ(sig.inputs[3].role, ir::InputRole::Input);
  EXPECT_EQ(sig.CountRole(ir::InputRole::Weight), 2u);
  EXPECT_EQ(sig.CountOpaque(), 1);
  const OutputTree& top = sig.outputs;
  ASSERT_EQ(top.kind, Kind::Tuple);
  ASSERT_EQ(top.items.size(), 3u);
  EXPECT_TRUE(top.items[0] == OutputTree::ResultLeaf(0));
  const OutputTree& dict = top.items[1];
  ASSERT_EQ(dict.kind, Kind::Dict);
  ASSERT_EQ(dict.keys.size(), 6u);
  EXPECT_TRUE(dict.keys[0] == OutputTree::LiteralLeaf(std::string("sum")));
  EXPECT_TRUE(dict.items[1] == OutputTree::LiteralLeaf(int64_t{3}));
  EXPECT_TRUE(dict.items[2] == OutputTree::LiteralLeaf(0.5));
  EXPECT_TRUE(dict.items[3] == OutputTree::LiteralLeaf(true));
  EXPECT_TRUE(dict.items[4] == OutputTree::LiteralLeaf(std::monostate{}));
  EXPECT_TRUE(dict.keys[5] == OutputTree::OpaqueLeaf(0));
  ASSERT_EQ(dict.items[5].kind, Kind::List);
  EXPECT_TRUE(dict.items[5].items[2] == OutputTree::LiteralLeaf(std::string("a \"quoted\" name")));
  EXPECT_TRUE(top.items[2] == OutputTree::Sequence(Kind::Tuple, {}));
}

// A signature built in C++ with every literal kind prints and parses back to the same one.
TEST(EngineSignature, EveryLiteralKindRoundTrips) {
  ir::Module m = ir::Parse(ReadFixture(kFixture));
  std::vector<OutputTree> leaves = {
      OutputTree::ResultLeaf(0),
      OutputTree::LiteralLeaf(std::numeric_limits<int64_t>::min()),
      OutputTree::LiteralLeaf(-0.0),
      OutputTree::LiteralLeaf(1e300),
      OutputTree::LiteralLeaf(0.1),
      OutputTree::LiteralLeaf(-std::numeric_limits<double>::infinity()),
      OutputTree::LiteralLeaf(std::string("line\nbreak \\ and \"quotes\"")),
      OutputTree::LiteralLeaf(false),
      OutputTree::Sequence(Kind::Tuple, {OutputTree::ResultLeaf(1)}),
      OutputTree::Sequence(Kind::List, {}),
      OutputTree::Dict({OutputTree::LiteralLeaf(int64_t{1}), OutputTree::LiteralLeaf(2.5)},
                       {OutputTree::ResultLeaf(2), OutputTree::OpaqueLeaf(0)})};
  m.set_signature(ir::EntrySignature(m, {1, 2}, OutputTree::Sequence(Kind::List, leaves)));
  ir::Verify(m);
  const std::string printed = ir::Print(m);
  ExpectContains(printed, "(result 1,)");
  ExpectContains(printed, "-0.0");
  ExpectContains(printed, "-inf");
  ir::Module again = ir::Parse(printed);
  EXPECT_TRUE(*again.signature() == *m.signature()) << printed;
  EXPECT_EQ(ir::Print(again), printed);
  const double zero = std::get<double>(again.signature()->outputs.items[2].literal);
  EXPECT_TRUE(std::signbit(zero));
}

TEST(EngineSignature, NaNRoundTrips) {
  ir::Module m = ir::Parse(ReadFixture(kFixture));
  ir::Signature sig = *m.signature();
  sig.outputs.items[1].items[2] = OutputTree::LiteralLeaf(std::nan(""));
  m.set_signature(sig);
  ir::Module again = ir::Parse(ir::Print(m));
  const auto& leaf = again.signature()->outputs.items[1].items[2];
  EXPECT_TRUE(std::isnan(std::get<double>(leaf.literal)));
}

TEST(EngineSignature, ParserNamesWhereASignatureIsMalformed) {
  auto replaced = [](const std::string& from, const std::string& to) {
    return FixtureWith(from, to);
  };
  struct Case {
    std::string text, message;
  };
  const std::vector<Case> cases = {
      {replaced("weight %2", "weight %7"),
       "line 6:10: signature inputs are the entry's parameters in order"},
      {replaced("weight %2", "argument %2"), "expected 'input', 'weight' or 'outputs'"},
      {replaced(": f32[2]\n", ": weak f32[2]\n"), "never weak"},
      {replaced("(result 0, {", "(result 0 {"), "expected ','"},
      {replaced("result 1", "result -1"), "out of range"},
      {replaced("\"n\": 3", "\"n\": three"), "expected an output"},
      {replaced("\"n\": 3", "\"n\": 99999999999999999999"), "out of range"},
  };
  for (const auto& c : cases) {
    std::string message = ErrorOf([&] { ir::Parse(c.text); }, ErrorKind::Value);
    ExpectContains(message, "ir parse error at line ");
    ExpectContains(message, c.message);
  }
}

TEST(EngineSignature, ParserRefusesTreesNestedTooDeep) {
  std::string deep;
  for (int i = 0; i <= ir::kMaxOutputDepth; ++i) deep += "[";
  for (int i = 0; i <= ir::kMaxOutputDepth; ++i) deep += "]";
  std::string text =
      "signature {\n  outputs " + deep + "\n}\n\nfunc @main() -> () {\n  return\n}\n";
  ExpectContains(ErrorOf([&] { ir::Parse(text); }, ErrorKind::Value), "nest deeper than");
}

TEST(EngineSignature, VerifierChecksTheSignatureAgainstTheEntry) {
  auto replaced = [](const std::string& from, const std::string& to) {
    return FixtureWith(from, to);
  };
  struct Case {
    std::string text, message;
  };
  const std::vector<Case> cases = {
      {replaced("  input %3 \"scale\" : f32[]\n", ""), "lists 3 inputs, @main takes 4 parameters"},
      {replaced("\"fc.bias\" : f32[2]", "\"fc.bias\" : f32[?]"),
       "weight 2 ('fc.bias') accepts f32[?] but @main's parameter %2 is f32[2]"},
      {replaced("\"scale\" : f32[]", "\"scale\" : f64[]"), "input 3 ('scale') accepts f64[]"},
      {replaced("\"x\" : f32[?,3]", "\"x\" : f32[?,3,1]"), "input 0 ('x') accepts f32[?,3,1]"},
      {replaced("result 2", "result 1"), "'result 1' should be 'result 2'"},
      {replaced("[result 2, ", "["), "the outputs hold 2 results, @main returns 3"},
      {replaced("opaque 0", "opaque 4"), "'opaque 4' should be 'opaque 0'"},
      {replaced("\"flag\": True", "\"n\": True"), "a dict has the key \"n\" twice"},
      {replaced("\"eps\": 0.5, \"flag\": True", "1: 0.5, True: True"), "the key True twice"},
      {replaced("\"none\": None", "(): None"), "a dict key must be a literal or an opaque value"},
  };
  for (const auto& c : cases) {
    ir::Module m = ir::Parse(c.text);
    std::string message = ErrorOf([&] { ir::Verify(m); }, ErrorKind::Value);
    ExpectContains(message, "ir verifier: signature: ");
    ExpectContains(message, c.message);
  }
}

// A signature may pin a dimension the graph leaves open (never the reverse).
TEST(EngineSignature, MayAcceptFewerShapesThanTheParameter) {
  std::string text = ReadFixture(kFixture);
  const std::string from = "\"x\" : f32[?,3]";
  text.replace(text.find(from), from.size(), "\"x\" : f32[8,3]");
  ir::Module m = ir::Parse(text);
  ir::Verify(m);
  engine::CompiledGraph graph = engine::Compile(std::move(m));
  EXPECT_TRUE(graph.Accepts({Iota({8, 3}), Iota({})}));
  EXPECT_FALSE(graph.Accepts({Iota({2, 3}), Iota({})}));
}

void ExpectFixtureResults(const std::vector<Tensor>& out, const Tensor& x, const Tensor& w,
                          const Tensor& b, float scale) {
  ASSERT_EQ(out.size(), 3u);
  const int64_t batch = x.shape()[0];
  ASSERT_EQ(out[0].shape(), (Shape{batch, 2}));
  float total = 0;
  for (int64_t r = 0; r < batch; ++r) {
    for (int64_t c = 0; c < 2; ++c) {
      float want = b.data<float>()[c];
      for (int64_t k = 0; k < 3; ++k)
        want += x.data<float>()[r * 3 + k] * w.data<float>()[k * 2 + c];
      const float got = out[0].Contiguous().data<float>()[r * 2 + c];
      EXPECT_NEAR(got, want, 1e-4f * std::abs(want)) << r << "," << c;
      EXPECT_NEAR(out[2].Contiguous().data<float>()[r * 2 + c], want * scale,
                  1e-3f * std::abs(want));
      total += want;
    }
  }
  EXPECT_NEAR(*out[1].data<float>(), total, 1e-4f * std::abs(total));
}

TEST(Engine, CompilesIRTextAndRunsADynamicBatchWithoutPython) {
  for (const char* level : {"O0", "O1", "O2"}) {
    engine::CompileOptions options;
    options.level = level;
    engine::CompiledGraph graph = engine::Compile(ir::Parse(ReadFixture(kFixture)), options);
    EXPECT_EQ(graph.num_inputs(), 2u);
    EXPECT_EQ(graph.num_weights(), 2u);
    ExpectContains(graph.Text(), "signature {\n  input %0 \"x\" : f32[?,3]");
    const Tensor w = Iota({3, 2}, 0.5f), b = Iota({2}, -1.0f), scale = Iota({}, 3.0f);
    for (int64_t batch : {1, 2, 5}) {
      const Tensor x = Iota({batch, 3}, 0.25f);
      ExpectFixtureResults(graph.Run({x, scale}, {w, b}), x, w, b, 3.0f);
      // RunEntry takes the entry's parameters as the signature interleaves them.
      ExpectFixtureResults(graph.RunEntry({x, w, b, scale}), x, w, b, 3.0f);
    }
  }
}

TEST(Engine, RunNamesTheInputThatDoesNotFitTheSignature) {
  engine::CompiledGraph graph = engine::Compile(ir::Parse(ReadFixture(kFixture)));
  const Tensor x = Iota({2, 3}), w = Iota({3, 2}), b = Iota({2}), scale = Iota({});
  ExpectContains(ErrorOf([&] { graph.Run({Iota({2, 4}), scale}, {w, b}); }, ErrorKind::Value),
                 "compiled graph: input 0 ('x') expects f32[?,3], got f32[2,4]");
  ExpectContains(ErrorOf([&] { graph.Run({Iota({3}), scale}, {w, b}); }, ErrorKind::Value),
                 "input 0 ('x') expects f32[?,3], got f32[3]");
  ExpectContains(
      ErrorOf([&] { graph.Run({x, Iota({}, 1, DType::Int32)}, {w, b}); }, ErrorKind::Type),
      "input 1 ('scale') expects f32[], got i32[]");
  ExpectContains(ErrorOf([&] { graph.Run({x, scale}, {w, Iota({3})}); }, ErrorKind::Value),
                 "weight 1 ('fc.bias') expects f32[2], got f32[3]");
  ExpectContains(ErrorOf([&] { graph.Run({x}, {w, b}); }, ErrorKind::Type),
                 "takes 2 inputs, got 1");
  ExpectContains(ErrorOf([&] { graph.Run({x, scale}, {w}); }, ErrorKind::Type),
                 "binds 2 weights, got 1");
  ExpectContains(ErrorOf([&] { graph.RunEntry({x, w, b}); }, ErrorKind::Type),
                 "takes 4 parameters (2 inputs and 2 weights), got 3");
  ExpectContains(ErrorOf([&] { graph.Run({Tensor(), scale}, {w, b}); }, ErrorKind::Type),
                 "input 0 ('x') expects f32[?,3], got no tensor");
  EXPECT_TRUE(graph.Accepts({x, scale}));
  EXPECT_FALSE(graph.Accepts({x, Iota({}, 1, DType::Float64)}));
  EXPECT_FALSE(graph.Accepts({x}));
}

TEST(Engine, ModuleWithoutSignatureGetsEveryParameterAsAnInput) {
  engine::CompiledGraph one = engine::Compile(ir::Parse(ReadFixture("control_flow.ir")));
  EXPECT_EQ(one.num_inputs(), 2u);
  EXPECT_EQ(one.num_weights(), 0u);
  EXPECT_TRUE(one.signature().outputs == OutputTree::ResultLeaf(0));
  Tensor n = Tensor::Empty({}, DType::Int64);
  *n.data<int64_t>() = 5;
  std::vector<Tensor> out = one.Run({n, Iota({3}, 0.0f)}, {});
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], 4 + 9 + 16);  // squares of 2, 3, 4

  ir::Module two = ir::Parse(
      "func @main(%0: f32[2]) -> (f32[2], f32[2]) {\n  %1 = neg(%0) : f32[2]\n  return %0, "
      "%1\n}\n");
  ir::Signature sig = ir::DefaultSignature(two);
  EXPECT_TRUE(sig.outputs == OutputTree::Sequence(Kind::Tuple, {OutputTree::ResultLeaf(0),
                                                                OutputTree::ResultLeaf(1)}));
}

TEST(Engine, CompileRunsTheLevelsPassesAndKeepsTheSignature) {
  const std::string text =
      "signature {\n  input %0 \"x\" : f32[2]\n  outputs {\"y\": result 0}\n}\n\n"
      "func @main(%0: f32[2]) -> (f32[2]) {\n  %1 = const [1.0, 2.0] : f32[2]\n"
      "  %2 = const [3.0, 4.0] : f32[2]\n  %3 = add(%1, %2) : f32[2]\n"
      "  %4 = mul(%0, %3) : f32[2]\n  return %4\n}\n";
  engine::CompileOptions o0, o1;
  o0.level = "O0";
  EXPECT_NE(engine::Compile(ir::Parse(text), o0).Text().find("add("), std::string::npos);
  engine::CompiledGraph folded = engine::Compile(ir::Parse(text), o1);
  EXPECT_EQ(folded.Text().find("add("), std::string::npos) << folded.Text();
  ExpectContains(folded.Text(), "outputs {\"y\": result 0}");
  std::vector<Tensor> out = folded.Run({Iota({2})}, {});
  EXPECT_FLOAT_EQ(out[0].data<float>()[1], 2 * 6);
  engine::CompileOptions bad;
  bad.level = "O3";
  EXPECT_THROW(engine::Compile(ir::Parse(text), bad), Error);
}

TEST(Engine, ProfiledRunListsEachEntryNodeAndThePeak) {
  engine::CompileOptions options;
  options.level = "O0";
  engine::CompiledGraph graph = engine::Compile(ir::Parse(ReadFixture(kFixture)), options);
  engine::RunStats stats;
  engine::CallOptions call;
  call.profile = true;
  graph.Run({Iota({64, 3}), Iota({})}, {Iota({3, 2}), Iota({2})}, call, &stats);
  ASSERT_EQ(stats.profile.size(), graph.module().entry().nodes.size());
  EXPECT_EQ(stats.profile[0].what, "matmul f32[?,2]");
  for (const auto& node : stats.profile) EXPECT_GE(node.seconds, 0.0);
  EXPECT_GE(stats.peak_bytes, 64 * 2 * 4);
  EXPECT_EQ(graph.NumNodes(), 4u);
}

}  // namespace
}  // namespace kiln
