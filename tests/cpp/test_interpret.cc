// test_interpret.cc - run-time interpreter nodes (LAX) without Python: the text form, the host,
// the check of what the host returns, passes keeping the node, and export refusing it.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/model_file.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/executor.h"
#include "runtime/interpret.h"

namespace kiln {
namespace {

const char* kDoubleInPython = R"(func @main(%0: f32[3]) -> (f32[3]) {
  %1 = interpret "site7" "numpy.add" (%0) : f32[3] loc("user.py":12:4)
  %2 = add(%1, %0) : f32[3]
  return %2
}
)";

Tensor Filled(const Shape& shape, float value) {
  Tensor t = Tensor::Empty(shape, DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = value;
  return t;
}

struct HostGuard {  // the host is process-wide: every test leaves none installed
  ~HostGuard() { SetInterpretHost(nullptr); }
};

TEST(Interpret, PrintsAndParsesBack) {
  const ir::Module module = ir::Parse(kDoubleInPython);
  const std::string text = ir::Print(module);
  EXPECT_NE(text.find("interpret \"site7\" \"numpy.add\""), std::string::npos) << text;
  EXPECT_EQ(ir::Print(ir::Parse(text)), text);
}

TEST(Interpret, RunsThroughTheHostWithTheGraphsValues) {
  HostGuard guard;
  std::string seen_key;
  SetInterpretHost([&](const std::string& key, const std::vector<Tensor>& inputs) {
    seen_key = key;
    Tensor out = inputs.at(0).Clone();
    for (int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] *= 2;
    return std::vector<Tensor>{out};
  });
  Tensor got = kiln::Run(ir::Parse(kDoubleInPython), {Filled({3}, 1.5f)}).at(0);
  EXPECT_EQ(seen_key, "site7");
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(got.data<float>()[i], 4.5f);
}

TEST(Interpret, AResultOfAnotherTypeIsATypeErrorNamingTheLine) {
  HostGuard guard;
  SetInterpretHost([](const std::string&, const std::vector<Tensor>&) {
    return std::vector<Tensor>{Tensor::Empty({3}, DType::Float64)};
  });
  try {
    kiln::Run(ir::Parse(kDoubleInPython), {Filled({3}, 1.0f)});
    FAIL() << "expected a TypeError";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Type);
    EXPECT_NE(std::string(e.what()).find("user.py:12"), std::string::npos) << e.what();
  }
}

TEST(Interpret, WithoutAHostItIsAnErrorNotACrash) {
  SetInterpretHost(nullptr);
  EXPECT_THROW(kiln::Run(ir::Parse(kDoubleInPython), {Filled({3}, 1.0f)}), Error);
}

TEST(Interpret, PassesKeepTheNodeEvenWhenItsResultIsUnused) {
  ir::Module module = ir::Parse(R"(func @main(%0: f32[3]) -> (f32[3]) {
  %1 = interpret "site1" "self.count = ..." (%0) : f32[3]
  return %0
}
)");
  passes::RunPipeline(module, "O2", true);
  ir::Verify(module);
  ASSERT_EQ(module.entry().nodes.size(), 1u) << ir::Print(module);
  EXPECT_EQ(module.entry().nodes[0].kind, ir::NodeKind::Interpret);
}

TEST(Interpret, ExportRefusesNamingTheLines) {
  ir::Module module = ir::Parse(kDoubleInPython);
  try {
    engine::RefuseInterpretNodes(module);
    FAIL() << "expected a RuntimeError";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("user.py:12 (numpy.add)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
