// cse.cc - common-subexpression elimination within each function.
//
// Two op nodes with the same op, attributes and inputs compute the same value when the op is
// pure (analysis/effects.h: no random draw, no in-place write); constants with the same dtype,
// shape and bytes are one constant. Later duplicates are redirected to the first occurrence (DCE
// then removes them). Reuse never crosses a node that may write (assign, batch_norm's statistics,
// a region that does), and a value something writes in place (analysis/aliasing.h) is neither
// merged nor reused: the two copies would not stay equal.
#include <cstring>
#include <map>

#include "analysis/aliasing.h"
#include "analysis/effects.h"
#include "core/error.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

std::string KeyOf(const ir::Func& f, const ir::Node& node) {
  std::string key;
  if (node.kind == ir::NodeKind::Const) {
    const Tensor v = node.value.Contiguous();
    key = "c" + std::to_string(static_cast<int>(v.dtype())) + ShapeStr(v.shape()) +
          (v.impl()->wrapped_number ? "w" : "s");
    key.append(static_cast<const char*>(v.raw_data()), v.numel() * v.itemsize());
    return key;
  }
  key = "o" + std::to_string(static_cast<int>(node.op)) + "(";
  for (const auto& v : node.inputs)
    key += std::to_string(v.node) + ":" + std::to_string(v.index) + ",";
  key += ")";
  for (const auto& a : node.attrs) key += AttrToString(a) + ";";
  return key;
}

// A node whose single value may stand for an equal one: a constant or a pure op, whose outputs
// nothing in the function writes.
bool Eligible(const ir::Node& node, int n, const analysis::AliasClasses& alias) {
  if (node.kind != ir::NodeKind::Const && !analysis::IsPureOp(node)) return false;
  for (size_t k = 0; k < node.outputs.size(); ++k)
    if (alias.Written({n, static_cast<int>(k)})) return false;
  return true;
}

}  // namespace

void CommonSubexpressionElimination(ir::Module& module) {
  const analysis::ModuleEffects effects(module);
  for (auto& fp : module.funcs()) {
    ir::Func& f = *fp;
    const analysis::AliasClasses alias(f, effects);
    std::map<std::string, int> first;
    std::vector<int> replacement(f.nodes.size());
    for (size_t n = 0; n < f.nodes.size(); ++n) {
      ir::Node& node = f.nodes[n];
      replacement[n] = static_cast<int>(n);
      for (auto& v : node.inputs)
        if (!v.is_param() && !v.is_none()) v.node = replacement[v.node];
      if (effects.MayWrite(node)) {
        // A write (assign, a region that may assign) can change what an earlier value computed
        // from its inputs would be: nothing before it is reused after it.
        first.clear();
        continue;
      }
      if (!Eligible(node, static_cast<int>(n), alias)) continue;
      auto [it, inserted] = first.emplace(KeyOf(f, node), static_cast<int>(n));
      if (!inserted) replacement[n] = it->second;
    }
    for (auto& r : f.results)
      if (!r.is_param() && !r.is_none()) r.node = replacement[r.node];
  }
}

}  // namespace kiln::passes
