// test_model_file.cc - model files (engine/model_file.h) and the public runtime API: round
// trips of modules with regions and a dynamic batch, external weights, refused and damaged
// files, and runs from several threads.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "engine/model.h"
#include "engine/model_file.h"
#include "engine/proto/mind_ir.pb.h"
#include "ir/ir.h"
#include "kiln/runtime.h"

namespace kiln {
namespace {

// y = relu(x @ W + b) summed with a loop: while i < n: acc = acc + (i > 1 ? y : 0).
const char* kModel = R"(signature {
  input %0 "x" : f32[?,3]
  weight %1 "fc.weight" : f32[3,2]
  weight %2 "fc.bias" : f32[2]
  input %3 "n" : i64[]
  outputs (result 0, {"acc": result 1, "n": 3, "eps": 0.5, "flag": True, "none": None}, [])
}

func @main(%0: f32[?,3], %1: f32[3,2], %2: f32[2], %3: i64[]) -> (f32[?,2], f32[?,2]) {
  %4 = matmul(%0, %1) {transpose_a=False, transpose_b=False} : f32[?,2]
  %5 = add(%4, %2) : f32[?,2]
  %6 = relu(%5) : f32[?,2] loc("net.py":12:8)
  %7 = const [0] : i64[]
  %8 = sub(%6, %6) : f32[?,2]
  %9, %10, %11, %12 = while(%7, %3, %8, %6) cond @cond body @body : i64[], i64[], f32[?,2], f32[?,2]
  return %6, %11
}

func @cond(%0: i64[], %1: i64[], %2: f32[?,2], %3: f32[?,2]) -> (b[]) {
  %4 = less(%0, %1) : b[]
  return %4
}

func @body(%0: i64[], %1: i64[], %2: f32[?,2], %3: f32[?,2]) -> (i64[], i64[], f32[?,2], f32[?,2]) {
  %4 = const [1] : weak i64[]
  %5 = greater(%0, %4) : b[]
  %6 = if %5(%2, %3) then @add_it else @keep : f32[?,2]
  %7 = add(%0, %4) : i64[]
  return %7, %1, %6, %3
}

func @add_it(%0: f32[?,2], %1: f32[?,2]) -> (f32[?,2]) {
  %2 = add(%0, %1) : f32[?,2]
  return %2
}

func @keep(%0: f32[?,2], %1: f32[?,2]) -> (f32[?,2]) {
  return %0
}
)";

Tensor Iota(const Shape& shape, float scale) {
  Tensor t = Tensor::Empty(shape, DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = scale * static_cast<float>((i % 7) - 3);
  return t;
}

Tensor Scalar(int64_t v) {
  Tensor t = Tensor::Empty({}, DType::Int64);
  t.data<int64_t>()[0] = v;
  return t;
}

std::vector<Tensor> Weights() { return {Iota({3, 2}, 0.5f), Iota({2}, 0.25f)}; }

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/kiln_model_" + name;
}

std::vector<float> Values(const Tensor& t) {
  const Tensor c = t.Contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

template <typename F>
std::string ErrorOf(F run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

void ExpectContains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

TEST(ModelFile, RoundTripKeepsEveryFunctionTheSignatureAndTheWeights) {
  const ir::Module module = ir::Parse(kModel);
  const std::string path = TempPath("roundtrip.mindir");
  engine::SaveModel(module, Weights(), path);
  const engine::SavedModel loaded = engine::LoadModel(path);
  EXPECT_EQ(ir::Print(loaded.module), ir::Print(module));
  ASSERT_EQ(loaded.weights.size(), 2u);
  EXPECT_EQ(Values(loaded.weights[0]), Values(Weights()[0]));
  EXPECT_EQ(Values(loaded.weights[1]), Values(Weights()[1]));
  EXPECT_EQ(loaded.module.entry().nodes[2].loc.line, 12);
}

TEST(ModelFile, LoadedModelRunsAsTheOriginalAtAnyBatch) {
  const std::string path = TempPath("run.mindir");
  engine::SaveModel(ir::Parse(kModel), Weights(), path);
  const engine::LoadedModel model(engine::LoadModel(path));
  const engine::CompiledGraph original = engine::Compile(ir::Parse(kModel));
  for (int64_t batch : {1, 5}) {
    const std::vector<Tensor> inputs = {Iota({batch, 3}, 0.3f), Scalar(4)};
    const auto want = original.Run(inputs, Weights());
    const auto got = model.Run(inputs);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(Values(got[0]), Values(want[0]));
    EXPECT_EQ(Values(got[1]), Values(want[1]));
  }
}

TEST(ModelFile, LargeWeightsGoToAnExternalFileBesideTheModel) {
  const std::string path = TempPath("external.mindir");
  engine::SaveOptions options;
  options.external_data_threshold = 0;
  engine::SaveModel(ir::Parse(kModel), Weights(), path, options);
  std::ifstream data(path + ".data", std::ios::binary | std::ios::ate);
  ASSERT_TRUE(data.good());
  EXPECT_GE(static_cast<int64_t>(data.tellg()), 24);
  const engine::SavedModel loaded = engine::LoadModel(path);
  EXPECT_EQ(Values(loaded.weights[0]), Values(Weights()[0]));
  EXPECT_EQ(Values(loaded.weights[1]), Values(Weights()[1]));
  // Read from bytes alone, the model may not reach outside: no folder, no external data.
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  ExpectContains(ErrorOf([&] { engine::ParseModel(bytes.str()); }), "external data");
  // A truncated data file is an error naming the weight, not a short read.
  std::ofstream(path + ".data", std::ios::binary | std::ios::trunc) << "short";
  ExpectContains(ErrorOf([&] { engine::LoadModel(path); }), "weight 'fc.weight'");
}

mind_ir::ModelProto Proto(const std::string& bytes) {
  mind_ir::ModelProto model;
  EXPECT_TRUE(model.ParseFromString(bytes));
  return model;
}

TEST(ModelFile, ExternalDataMayNotNameAPathOutsideTheModelsFolder) {
  engine::SaveOptions options;
  options.external_data_threshold = 0;
  const std::string path = TempPath("escape.mindir");
  engine::SaveModel(ir::Parse(kModel), Weights(), path, options);
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  mind_ir::ModelProto model = Proto(bytes.str());
  model.mutable_graph()->mutable_parameter(0)->mutable_external_data()->set_location(
      "../escape.mindir.data");
  ExpectContains(ErrorOf([&] { engine::ParseModel(model.SerializeAsString(), "/tmp"); }),
                 "is not a file name");
}

TEST(ModelFile, ANewerFormatVersionIsRefusedNamingBothVersions) {
  mind_ir::ModelProto model = Proto(engine::SerializeModel(ir::Parse(kModel), Weights()));
  (*model.mutable_user_info())["kiln_format_version"] = "7";
  const std::string error = ErrorOf([&] { engine::ParseModel(model.SerializeAsString()); });
  ExpectContains(error, "format version 7");
  ExpectContains(error, "versions 1 to 1");
  ExpectContains(error, "newer kiln");
}

TEST(ModelFile, AFileKilnDidNotWriteIsRefusedClearly) {
  mind_ir::ModelProto model;
  model.set_producer_name("SomeTool");
  model.set_ir_version("0.1.1");
  ExpectContains(ErrorOf([&] { engine::ParseModel(model.SerializeAsString()); }),
                 "not a kiln or MindSpore model (written by 'SomeTool'");
  ExpectContains(ErrorOf([&] { engine::ParseModel("not a protobuf at all \xff\xff"); }),
                 "not a MindIR file");
  ExpectContains(ErrorOf([&] { engine::LoadModel(TempPath("missing.mindir")); }), "cannot open");
}

TEST(ModelFile, ATamperedGraphFailsVerificationNotTheProcess) {
  mind_ir::ModelProto model = Proto(engine::SerializeModel(ir::Parse(kModel), Weights()));
  model.mutable_graph()->mutable_node(0)->set_input(0, "%9.0");  // used before defined
  ExpectContains(ErrorOf([&] { engine::ParseModel(model.SerializeAsString()); }),
                 "used before it is defined");
  model = Proto(engine::SerializeModel(ir::Parse(kModel), Weights()));
  model.mutable_graph()->mutable_node(0)->set_op_type("no_such_op");
  ExpectContains(ErrorOf([&] { engine::ParseModel(model.SerializeAsString()); }),
                 "op 'no_such_op' is not one this kiln has");
  model = Proto(engine::SerializeModel(ir::Parse(kModel), Weights()));
  model.mutable_graph()->mutable_parameter(0)->mutable_raw_data()->resize(5);
  ExpectContains(ErrorOf([&] { engine::ParseModel(model.SerializeAsString()); }),
                 "holds 5 bytes of data");
  model = Proto(engine::SerializeModel(ir::Parse(kModel), Weights()));
  model.mutable_graph()->mutable_parameter(0)->set_dims(0, int64_t{1} << 62);
  ExpectContains(ErrorOf([&] { engine::ParseModel(model.SerializeAsString()); }), "weight");
  model = Proto(engine::SerializeModel(ir::Parse(kModel), Weights()));
  model.mutable_functions(0)->set_name("body");  // two functions named @body
  ExpectContains(ErrorOf([&] { engine::ParseModel(model.SerializeAsString()); }), "used twice");
}

// Every prefix and many random byte changes of a real file: each loads or gives kiln::Error.
TEST(ModelFile, DamagedBytesNeverCrash) {
  const std::string bytes = engine::SerializeModel(ir::Parse(kModel), Weights());
  int errors = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    try {
      engine::ParseModel(bytes.substr(0, n));
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string damaged = bytes;
    for (int k = 0; k < 1 + trial % 4; ++k)
      damaged[rng() % damaged.size()] = static_cast<char>(rng() & 0xff);
    try {
      engine::ParseModel(damaged);
    } catch (const Error&) {
    }
  }
}

TEST(ModelFile, AnOutputHoldingAPythonObjectCannotBeSaved) {
  ir::Module module = ir::Parse(kModel);
  ir::Signature sig = *module.signature();
  sig.outputs.items.push_back(ir::OutputTree::OpaqueLeaf(0));
  module.set_signature(sig);
  ExpectContains(ErrorOf([&] { engine::SerializeModel(module, Weights()); }),
                 "neither a tensor nor a constant");
}

TEST(ModelFile, AFailedSaveLeavesTheOldFileIntact) {
  const std::string path = TempPath("keep.mindir");
  engine::SaveModel(ir::Parse(kModel), Weights(), path);
  ExpectContains(ErrorOf([&] { engine::SaveModel(ir::Parse(kModel), {Weights()[0]}, path); }),
                 "binds 2 weights, got 1");
  EXPECT_EQ(engine::LoadModel(path).weights.size(), 2u);
  ExpectContains(ErrorOf([&] { engine::SaveModel(ir::Parse(kModel), Weights(), "/no/dir/m"); }),
                 "cannot write");
}

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/tests/fixtures/mindspore/" + name,
                   std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TEST(MindSporeImport, MapsPrimitivesAndNamesTheOnesItCannot) {
  const std::string bytes = Fixture("ops.mindir");
  ASSERT_FALSE(bytes.empty());
  const engine::SavedModel saved = engine::ParseModel(bytes);
  EXPECT_EQ(saved.module.signature()->inputs[0].name, "x");
  EXPECT_EQ(saved.module.signature()->inputs[1].name, "fc.weight");
  mind_ir::ModelProto model = Proto(bytes);
  for (auto& prim : *model.mutable_primitives())
    if (prim.op_type() == "Tanh") prim.set_op_type("NoSuchPrimitive");
  ExpectContains(ErrorOf([&] { engine::ParseModel(model.SerializeAsString()); }),
                 "MindSpore primitive NoSuchPrimitive");
  model = Proto(bytes);
  model.mutable_primitives()->Clear();
  ExpectContains(ErrorOf([&] { engine::ParseModel(model.SerializeAsString()); }),
                 "which the file does not list");
  model = Proto(bytes);
  model.mutable_graph()->mutable_parameter(0)->mutable_raw_data()->resize(3);
  ExpectContains(ErrorOf([&] { engine::ParseModel(model.SerializeAsString()); }),
                 "weight 'fc.weight': holds 3 bytes");
}

TEST(RuntimeApi, LoadsRunsFromSeveralThreadsAndChecksInputs) {
  const std::string path = TempPath("api.mindir");
  engine::SaveModel(ir::Parse(kModel), Weights(), path);
  const runtime::Model model = runtime::Model::Load(path);
  ASSERT_EQ(model.inputs().size(), 2u);
  EXPECT_EQ(model.inputs()[0].name, "x");
  EXPECT_EQ(model.inputs()[0].shape, (std::vector<int64_t>{-1, 3}));
  EXPECT_EQ(model.outputs().size(), 2u);
  runtime::Tensor x(runtime::DType::Float32, {4, 3});
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = 0.1f * float(i % 5);
  const int64_t n = 5;
  runtime::Tensor steps(runtime::DType::Int64, {}, &n, sizeof(n));
  const auto want = model.Run({x, steps});
  std::vector<std::vector<runtime::Tensor>> got(4);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) threads.emplace_back([&, k] { got[k] = model.Run({x, steps}); });
  for (auto& t : threads) t.join();
  for (const auto& g : got)
    for (size_t o = 0; o < want.size(); ++o)
      for (int64_t i = 0; i < want[o].num_elements(); ++i)
        EXPECT_EQ(g[o].data<float>()[i], want[o].data<float>()[i]);
  runtime::Tensor wrong(runtime::DType::Float32, {4, 2});
  try {
    model.Run({wrong, steps});
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    ExpectContains(e.what(), "input 0 ('x') expects f32[?,3], got f32[4,2]");
  }
  EXPECT_THROW(runtime::Tensor(runtime::DType::Float32, {2}, &n, sizeof(n) + 1),
               std::runtime_error);
}

}  // namespace
}  // namespace kiln
