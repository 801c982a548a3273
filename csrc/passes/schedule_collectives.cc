// schedule_collectives.cc - runs each all_reduce_start as early as its inputs allow, so a
// gradient bucket's all-reduce travels while the rest of the backward pass computes.
//
// The data-parallel reducer emits, after the backward nodes, one all_reduce_start per bucket
// (fed by pure reshapes and a concat of the bucket's gradients) and later the matching
// all_reduce_wait. This pass moves each start, and the pure nodes feeding it, to just after the
// last value they need. What may not move: a pure node never moves above a node that writes,
// raises or communicates; a start never moves above another collective that ran before it, and
// the starts keep their order, so every rank (compiling the same graph) still runs the same
// collectives in the same order. The waits stay where they are: before the first use of the
// reduced gradients, and after their start, whose handle they take.
#include <algorithm>
#include <vector>

#include "analysis/effects.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln::passes {
namespace {

bool IsStart(const ir::Node& node) {
  return node.kind == ir::NodeKind::Op && node.op == OpKind::AllReduceStart;
}

// Nodes that nothing may be moved above.
bool IsFence(const analysis::Effects& e) { return e.writes || e.raises || e.communicates; }

struct Plan {
  std::vector<int> fence_before;  // the last fence before node i (-1: none)
  std::vector<int> anchor;        // a moved node runs right after node anchor[i] (-1: first)
  std::vector<bool> moved;
  std::vector<int> group;  // the start a moved node moves with
};

// The earliest anchor of node i given its producers' places and the fence before it.
int EarliestAnchor(const ir::Func& f, const Plan& plan, int i) {
  int anchor = plan.fence_before[i];
  for (const ir::ValueRef& v : f.nodes[i].inputs) {
    if (v.is_param() || v.is_none()) continue;
    anchor = std::max(anchor, plan.moved[v.node] ? plan.anchor[v.node] : v.node);
  }
  return anchor;
}

// The pure nodes start `s` needs that are not placed yet, in original (topological) order.
std::vector<int> Cone(const ir::Func& f, const analysis::ModuleEffects& effects, const Plan& plan,
                      int s) {
  std::vector<bool> seen(f.nodes.size(), false);
  std::vector<int> stack = {s}, cone;
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    if (seen[i]) continue;
    seen[i] = true;
    cone.push_back(i);
    for (const ir::ValueRef& v : f.nodes[i].inputs) {
      if (v.is_param() || v.is_none() || seen[v.node] || plan.moved[v.node]) continue;
      if (effects.IsPure(f.nodes[v.node])) stack.push_back(v.node);
    }
  }
  std::sort(cone.begin(), cone.end());
  return cone;
}

void ScheduleFunc(ir::Func& f, const analysis::ModuleEffects& effects) {
  const int n = static_cast<int>(f.nodes.size());
  Plan plan{std::vector<int>(n, -1), std::vector<int>(n, -1), std::vector<bool>(n, false),
            std::vector<int>(n, -1)};
  bool any = false;
  for (int i = 0, fence = -1; i < n; ++i) {
    plan.fence_before[i] = fence;
    any = any || IsStart(f.nodes[i]);
    // Starts are placed by this pass; their order among themselves is kept below.
    if (!IsStart(f.nodes[i]) && IsFence(effects.Of(f.nodes[i]))) fence = i;
  }
  if (!any) return;
  int last_start = -1;  // the previous start's anchor
  for (int s = 0; s < n; ++s) {
    if (!IsStart(f.nodes[s])) continue;
    // Where each node of the cone could run at the earliest; the start goes there, and the
    // cone's nodes that now run later than that point move there with it (in their order).
    // Nodes already before it stay: moving them would only lengthen what is kept alive.
    const std::vector<int> cone = Cone(f, effects, plan, s);
    for (int i : cone) {
      plan.anchor[i] = EarliestAnchor(f, plan, i);
      plan.moved[i] = true;  // for EarliestAnchor of its consumers in the cone
    }
    plan.anchor[s] = std::max(plan.anchor[s], last_start);
    const int anchor = plan.anchor[s];
    for (int i : cone) {
      plan.moved[i] = i > anchor;
      plan.anchor[i] = plan.moved[i] ? anchor : -1;
      plan.group[i] = s;
    }
    last_start = anchor;
  }
  // Moved nodes go right after their anchor, start by start (an earlier start's nodes never
  // need a later one's), each start's in original order (producers first).
  std::vector<int> moved;
  for (int i = 0; i < n; ++i)
    if (plan.moved[i]) moved.push_back(i);
  std::stable_sort(moved.begin(), moved.end(),
                   [&](int a, int b) { return plan.group[a] < plan.group[b]; });
  std::vector<std::vector<int>> after(n + 1);
  for (int i : moved) after[plan.anchor[i] + 1].push_back(i);
  std::vector<int> order = after[0];
  for (int i = 0; i < n; ++i) {
    if (!plan.moved[i]) order.push_back(i);
    order.insert(order.end(), after[i + 1].begin(), after[i + 1].end());
  }
  ReorderNodes(f, order);
}

}  // namespace

void ScheduleCollectives(ir::Module& module) {
  const analysis::ModuleEffects effects(module);
  for (auto& f : module.funcs()) ScheduleFunc(*f, effects);
}

}  // namespace kiln::passes
