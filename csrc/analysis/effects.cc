// effects.cc - node and function effects, propagated through regions to a fixed point.
#include "analysis/effects.h"

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
         a.raises == b.raises;
}

}  // namespace

Effects& Effects::operator|=(const Effects& o) {
  writes = writes || o.writes;
  random = random || o.random;
  prints = prints || o.prints;
  raises = raises || o.raises;
  return *this;
}

Effects OpEffects(const OpDef& def) {
  Effects e;
  e.writes = !def.mutated_inputs.empty();
  e.random = def.is_random;
  return e;
}

bool IsPureOp(const ir::Node& node) {
  return node.kind == ir::NodeKind::Op && OpEffects(GetOpDef(node.op)).pure();
}

ModuleEffects::ModuleEffects(const ir::Module& module) {
  for (const auto& f : module.funcs()) funcs_[f->name] = Effects{};
  // Effects only grow, and each function's are bounded, so this ends; most modules settle in
  // one or two sweeps.
  bool changed = true;
  while (changed) {
    changed = false;
    for (const auto& f : module.funcs()) {
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
