// aliasing.cc - alias classes by union-find over a function's values.
#include "analysis/aliasing.h"

namespace kiln::analysis {
namespace {

// A node that runs code the analysis does not see op by op: its functions (if/while/call), or
// Python (an interpret node, which may return an input itself or write one in place).
bool RunsOpaqueCode(const ir::Node& node) {
  return node.kind == ir::NodeKind::If || node.kind == ir::NodeKind::While ||
         node.kind == ir::NodeKind::Call || node.kind == ir::NodeKind::Interpret;
}

std::vector<int> AllInputs(const ir::Node& node) {
  std::vector<int> all(node.inputs.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  return all;
}

}  // namespace

std::vector<int> MayAliasInputs(const ir::Node& node) {
  if (RunsOpaqueCode(node)) return AllInputs(node);
  if (node.kind == ir::NodeKind::Op && GetOpDef(node.op).is_view && !node.inputs.empty())
    return {0};
  return {};
}

std::vector<int> WrittenInputs(const ir::Node& node, const ModuleEffects& effects) {
  if (node.kind == ir::NodeKind::Op) return GetOpDef(node.op).mutated_inputs;
  if (RunsOpaqueCode(node) && effects.MayWrite(node)) return AllInputs(node);
  return {};
}

bool MakesFreshOutputs(const ir::Node& node) {
  return node.kind == ir::NodeKind::Op && !GetOpDef(node.op).allocates_outputs;
}

AliasClasses::AliasClasses(const ir::Func& f, const ModuleEffects& effects, ParamAliasing params) {
  offset_.resize(f.nodes.size());
  int next = static_cast<int>(f.params.size());
  for (size_t n = 0; n < f.nodes.size(); ++n) {
    offset_[n] = next;
    next += static_cast<int>(f.nodes[n].outputs.size());
  }
  parent_.resize(next);
  for (int i = 0; i < next; ++i) parent_[i] = i;
  if (params == ParamAliasing::MayAlias)
    for (size_t p = 1; p < f.params.size(); ++p) Union(0, static_cast<int>(p));
  for (size_t n = 0; n < f.nodes.size(); ++n) {
    const ir::Node& node = f.nodes[n];
    for (int i : MayAliasInputs(node)) {
      const ir::ValueRef in = node.inputs[i];
      if (in.is_none()) continue;
      for (size_t k = 0; k < node.outputs.size(); ++k)
        Union(offset_[n] + static_cast<int>(k), Id(in));
    }
  }
  written_.assign(next, false);
  for (const auto& node : f.nodes)
    for (int i : WrittenInputs(node, effects))
      if (i < static_cast<int>(node.inputs.size()) && !node.inputs[i].is_none())
        written_[Class(node.inputs[i])] = true;
  returned_.assign(next, false);
  for (const auto& r : f.results)
    if (!r.is_none()) returned_[Class(r)] = true;
  has_param_.assign(next, false);
  for (size_t p = 0; p < f.params.size(); ++p) has_param_[Root(static_cast<int>(p))] = true;
}

int AliasClasses::Class(ir::ValueRef v) const { return Root(Id(v)); }

bool AliasClasses::SharesParam(ir::ValueRef v) const { return has_param_[Class(v)]; }

int AliasClasses::Root(int i) const {
  while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
  return i;
}

void AliasClasses::Union(int a, int b) { parent_[Root(a)] = Root(b); }

}  // namespace kiln::analysis
