// effects.cc - node and function effects, propagated through regions to a fixed point.
#include "analysis/effects.h"

#include <unordered_set>
#include <vector>

namespace kiln::analysis {
namespace {

// What the node does itself; an if/while/call adds its functions' effects (ModuleEffects::Of).
Effects OwnEffects(const ir::Node& node) {
  Effects e;
  switch (node.kind) {
    case ir::NodeKind::Op:
      return OpEffects(GetOpDef(node.op));
    case ir::NodeKind::Print:
      e.prints = true;
      return e;
    case ir::NodeKind::Raise:
      e.raises = true;
      return e;
    case ir::NodeKind::Interpret:  // arbitrary Python: never removed, merged, moved or folded
      return Effects::All();
    default:
      return e;
  }
}

bool RunsFunctions(const ir::Node& node) {
  return node.kind == ir::NodeKind::If || node.kind == ir::NodeKind::While ||
         node.kind == ir::NodeKind::Call;
}

bool Same(const Effects& a, const Effects& b) {
  return a.writes == b.writes && a.random == b.random && a.prints == b.prints &&
         a.raises == b.raises && a.communicates == b.communicates && a.reads_queue == b.reads_queue;
}

// The functions `f` runs directly.
std::vector<const ir::Func*> Callees(const ir::Module& module, const ir::Func& f) {
  std::vector<const ir::Func*> callees;
  for (const auto& node : f.nodes)
    if (RunsFunctions(node))
      for (const auto& name : node.callees)
        if (const ir::Func* c = module.Find(name)) callees.push_back(c);
  return callees;
}

// The module's functions, callees before their callers where the calls form no cycle (the
// verifier refuses cycles): a depth-first walk kept on the heap, since regions may nest deeply.
std::vector<const ir::Func*> CalleesFirst(const ir::Module& module) {
  std::vector<const ir::Func*> order;
  std::unordered_set<const ir::Func*> visited;
  struct Frame {
    const ir::Func* func;
    std::vector<const ir::Func*> callees;
    size_t next = 0;
  };
  for (const auto& root : module.funcs()) {
    if (!visited.insert(root.get()).second) continue;
    std::vector<Frame> stack;
    stack.push_back({root.get(), Callees(module, *root)});
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next == top.callees.size()) {
        order.push_back(top.func);
        stack.pop_back();
        continue;
      }
      const ir::Func* callee = top.callees[top.next++];
      if (visited.insert(callee).second) stack.push_back({callee, Callees(module, *callee)});
    }
  }
  return order;
}

}  // namespace

Effects& Effects::operator|=(const Effects& o) {
  writes = writes || o.writes;
  random = random || o.random;
  prints = prints || o.prints;
  raises = raises || o.raises;
  communicates = communicates || o.communicates;
  reads_queue = reads_queue || o.reads_queue;
  return *this;
}

Effects OpEffects(const OpDef& def) {
  Effects e;
  e.writes = !def.mutated_inputs.empty();
  e.random = def.is_random;
  e.communicates = def.communicates;
  e.reads_queue = def.reads_queue;
  return e;
}

bool IsPureOp(const ir::Node& node) {
  return node.kind == ir::NodeKind::Op && OpEffects(GetOpDef(node.op)).pure();
}

ModuleEffects::ModuleEffects(const ir::Module& module) {
  const std::vector<const ir::Func*> order = CalleesFirst(module);
  for (const ir::Func* f : order) funcs_[f->name] = Effects{};
  // Callees first, one sweep settles every function; another confirms it. Effects only grow
  // and are bounded, so the loop also ends on IR whose calls form a cycle.
  bool changed = true;
  while (changed) {
    changed = false;
    for (const ir::Func* f : order) {
      Effects e;
      for (const auto& node : f->nodes) e |= Of(node);
      Effects& known = funcs_[f->name];
      if (!Same(known, e)) {
        known = e;
        changed = true;
      }
    }
  }
}

Effects ModuleEffects::Of(const ir::Node& node) const {
  Effects e = OwnEffects(node);
  if (RunsFunctions(node))
    for (const auto& callee : node.callees) e |= OfFunc(callee);
  return e;
}

Effects ModuleEffects::OfFunc(const std::string& name) const {
  auto it = funcs_.find(name);
  return it == funcs_.end() ? Effects::All() : it->second;
}

}  // namespace kiln::analysis
