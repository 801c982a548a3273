// fold.cc - constant folding: op nodes whose inputs are all constants run now, at compile time.
//
// The folded node becomes a const node holding the kernel's result (the same kernel the graph
// would run, so folding never changes a value). Only pure ops fold (analysis/effects.h: no random
// draw, no in-place write), and not results bigger than kMaxFoldedElements, which would bloat
// the graph. Nor does a value something later writes in place through a view (x[0] = v on a
// copy of zeros): folding the view would make it a constant of its own, and the write would no
// longer reach the tensor it views (analysis/aliasing.h). The op runs through ops/evaluate.h, not
// eager dispatch: compiling inside a user's gradient tape must leave nothing on it.
#include "analysis/aliasing.h"
#include "analysis/effects.h"
#include "ops/evaluate.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

constexpr int64_t kMaxFoldedElements = 1 << 16;

bool Foldable(const ir::Func& f, int n, const analysis::AliasClasses& alias) {
  const ir::Node& node = f.nodes[n];
  if (!analysis::IsPureOp(node) || node.outputs.size() != 1) return false;
  if (alias.Written({n, 0})) return false;
  for (const auto& v : node.inputs) {
    if (v.is_none()) continue;
    if (v.is_param() || f.nodes[v.node].kind != ir::NodeKind::Const) return false;
  }
  const Shape& shape = node.outputs[0].shape;
  return IsStaticShape(shape) && NumElements(shape) <= kMaxFoldedElements;
}

}  // namespace

void FoldConstants(ir::Module& module) {
  const analysis::ModuleEffects effects(module);
  for (auto& fp : module.funcs()) {
    ir::Func& f = *fp;
    // Classes from before any node here folds: a folded node was in no written class, so the
    // classes of the nodes still to be decided stay as they were.
    const analysis::AliasClasses alias(f, effects);
    for (size_t n = 0; n < f.nodes.size(); ++n) {
      ir::Node& node = f.nodes[n];
      if (!Foldable(f, static_cast<int>(n), alias)) continue;
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
