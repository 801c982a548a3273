// dce.cc - dead-code elimination.
//
// 1. Decide which functions have side effects (a print/raise/mutating/random node, or a call of
//    such a function), iterating to a fixed point because regions call regions.
// 2. In each function, walk nodes backwards: a node is live if it has a side effect or one of its
//    outputs is used by a live node or returned.
// 3. Rebuild the node list without dead nodes, renumbering references.
// 4. Drop functions that no live node calls (the entry always stays).
#include <set>
#include <unordered_map>

#include "ops/registry.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln::passes {
namespace {

bool NodeHasOwnEffect(const ir::Node& node) {
  switch (node.kind) {
    case ir::NodeKind::Print:
    case ir::NodeKind::Raise:
      return true;
    case ir::NodeKind::Op: {
      const OpDef& def = GetOpDef(node.op);
      return !def.mutated_inputs.empty() || def.is_random;
    }
    default:
      return false;
  }
}

std::set<std::string> FunctionsWithEffects(const ir::Module& module) {
  std::set<std::string> effects;
  bool changed = true;
  while (changed) {
    changed = false;
    for (const auto& f : module.funcs()) {
      if (effects.count(f->name)) continue;
      for (const auto& node : f->nodes) {
        bool effect = NodeHasOwnEffect(node);
        for (const auto& callee : node.callees) effect = effect || effects.count(callee);
        if (node.kind == ir::NodeKind::Raise) effect = true;
        if (effect) {
          effects.insert(f->name);
          changed = true;
          break;
        }
      }
    }
  }
  return effects;
}

bool HasEffect(const ir::Node& node, const std::set<std::string>& effects) {
  if (NodeHasOwnEffect(node)) return true;
  if (node.kind == ir::NodeKind::Raise) return false;
  for (const auto& callee : node.callees)
    if (effects.count(callee)) return true;
  return false;
}

void EliminateIn(ir::Func& f, const std::set<std::string>& effects) {
  std::vector<bool> live(f.nodes.size(), false);
  auto mark = [&](const ir::ValueRef& v) {
    if (!v.is_param() && !v.is_none()) live[v.node] = true;
  };
  for (const auto& r : f.results) mark(r);
  for (int n = static_cast<int>(f.nodes.size()) - 1; n >= 0; --n) {
    if (!live[n] && HasEffect(f.nodes[n], effects)) live[n] = true;
    if (live[n])
      for (const auto& v : f.nodes[n].inputs) mark(v);
  }
  KeepNodes(f, live);
}

}  // namespace

void DeadCodeElimination(ir::Module& module) {
  std::set<std::string> effects = FunctionsWithEffects(module);
  for (auto& f : module.funcs()) EliminateIn(*f, effects);
  // Keep the functions reachable from the entry.
  std::set<std::string> reachable = {module.entry().name};
  std::vector<const ir::Func*> work = {&module.entry()};
  while (!work.empty()) {
    const ir::Func* f = work.back();
    work.pop_back();
    for (const auto& node : f->nodes)
      for (const auto& callee : node.callees) {
        if (node.kind == ir::NodeKind::Raise || reachable.count(callee)) continue;
        reachable.insert(callee);
        if (const ir::Func* c = module.Find(callee)) work.push_back(c);
      }
  }
  auto& funcs = module.funcs();
  std::vector<std::unique_ptr<ir::Func>> kept;
  for (auto& f : funcs)
    if (reachable.count(f->name)) kept.push_back(std::move(f));
  funcs = std::move(kept);
}

}  // namespace kiln::passes
