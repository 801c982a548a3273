// fold.cc - constant folding: op nodes whose inputs are all constants run now, at compile time.
//
// The folded node becomes a const node holding the kernel's result (the same kernel the graph
// would run, so folding never changes a value). Only pure ops fold (analysis/effects.h: no random
// draw, no in-place write), and not results bigger than kMaxFoldedElements, which would bloat
// the graph. The op runs through ops/evaluate.h, not eager dispatch: compiling inside a user's
// gradient tape must leave nothing on it.
#include "analysis/effects.h"
#include "ops/evaluate.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

constexpr int64_t kMaxFoldedElements = 1 << 16;

bool Foldable(const ir::Func& f, const ir::Node& node) {
  if (!analysis::IsPureOp(node) || node.outputs.size() != 1) return false;
  for (const auto& v : node.inputs) {
    if (v.is_none()) continue;
    if (v.is_param() || f.nodes[v.node].kind != ir::NodeKind::Const) return false;
  }
  const Shape& shape = node.outputs[0].shape;
  return IsStaticShape(shape) && NumElements(shape) <= kMaxFoldedElements;
}

}  // namespace

void FoldConstants(ir::Module& module) {
  for (auto& fp : module.funcs()) {
    ir::Func& f = *fp;
    for (auto& node : f.nodes) {
      if (!Foldable(f, node)) continue;
      std::vector<Tensor> inputs;
      for (const auto& v : node.inputs)
        inputs.push_back(v.is_none() ? Tensor() : f.nodes[v.node].value);
      Tensor value = EvaluateOp(node.op, inputs, node.attrs)[0].Contiguous();
      // A view of an input constant (reshape, transpose) gets its own copy: constants own data.
      for (const auto& in : inputs)
        if (in.defined() && value.same_storage(in)) value = value.Clone();
      node.kind = ir::NodeKind::Const;
      node.value = value;
      node.inputs.clear();
      node.attrs.clear();
      node.outputs = {TensorMeta{value.dtype(), value.shape()}};
    }
  }
}

}  // namespace kiln::passes
