// dce.cc - dead-code elimination.
//
// 1. Find each function's effects (analysis/effects.h: print, raise, in-place writes, random
//    draws, and whatever the regions it runs do).
// 2. In each function, walk nodes backwards: a node is live if it has an effect or one of its
//    outputs is used by a live node or returned.
// 3. Rebuild the node list without dead nodes, renumbering references.
// 4. Drop functions that no live node calls (the entry always stays).
#include <set>

#include "analysis/effects.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln::passes {
namespace {

void EliminateIn(ir::Func& f, const analysis::ModuleEffects& effects) {
  std::vector<bool> live(f.nodes.size(), false);
  auto mark = [&](const ir::ValueRef& v) {
    if (!v.is_param() && !v.is_none()) live[v.node] = true;
  };
  for (const auto& r : f.results) mark(r);
  for (int n = static_cast<int>(f.nodes.size()) - 1; n >= 0; --n) {
    if (!live[n] && !effects.IsPure(f.nodes[n])) live[n] = true;
    if (live[n])
      for (const auto& v : f.nodes[n].inputs) mark(v);
  }
  KeepNodes(f, live);
}

}  // namespace

void DeadCodeElimination(ir::Module& module) {
  const analysis::ModuleEffects effects(module);
  for (auto& f : module.funcs()) EliminateIn(*f, effects);
  // Keep the functions reachable from the entry.
  std::set<std::string> reachable = {module.entry().name};
  std::vector<const ir::Func*> work = {&module.entry()};
  while (!work.empty()) {
    const ir::Func* f = work.back();
    work.pop_back();
    for (const auto& node : f->nodes)
      for (const auto& callee : node.callees) {
        if (node.kind == ir::NodeKind::Raise || node.kind == ir::NodeKind::Interpret ||
            reachable.count(callee))
          continue;  // their callees name an exception type / a host site, not functions
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
