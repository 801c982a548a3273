// dataflow.cc - plans which nodes must wait for which when a team runs a function.
#include "runtime/dataflow.h"

#include <algorithm>

#include "analysis/aliasing.h"
#include "ops/registry.h"

namespace kiln {
namespace {

bool RunsInTeam(const ir::Node& node, bool chunked) {
  switch (node.kind) {
    case ir::NodeKind::Const:
      return true;
    case ir::NodeKind::Call:
      return chunked;
    case ir::NodeKind::Op: {
      const OpDef& def = GetOpDef(node.op);
      return !def.communicates && !def.reads_queue && node.op != OpKind::CustomAot;
    }
    default:
      return false;
  }
}

// The nodes that read and write each alias class, as program order reaches them.
struct ClassAccesses {
  int last_writer = -1;
  std::vector<int> readers_since;  // since the last write
};

void AddEdge(std::vector<std::vector<int>>& preds, int from, int to) {
  if (from < 0 || from == to) return;
  auto& p = preds[to];
  if (std::find(p.begin(), p.end(), from) == p.end()) p.push_back(from);
}

}  // namespace

DataflowPlan PlanDataflow(const ir::Func& f, const analysis::ModuleEffects& effects,
                          const std::function<bool(int)>& chunked) {
  DataflowPlan plan;
  const int num_nodes = static_cast<int>(f.nodes.size());
  for (int n = 0; n < num_nodes; ++n)
    if (!RunsInTeam(f.nodes[n], f.nodes[n].kind == ir::NodeKind::Call && chunked(n))) return plan;
  plan.eligible = true;

  std::vector<int> base(num_nodes);
  int slots = static_cast<int>(f.params.size());
  for (int n = 0; n < num_nodes; ++n) {
    base[n] = slots;
    slots += static_cast<int>(f.nodes[n].outputs.size());
  }
  auto slot = [&](const ir::ValueRef& v) {
    return v.is_param() ? v.index : base[v.node] + v.index;
  };

  std::vector<std::vector<int>> preds(num_nodes);
  plan.reads.resize(num_nodes);
  plan.readers.assign(slots, 0);
  for (size_t p = 0; p < f.params.size(); ++p) plan.readers[p] = -1;
  for (const auto& r : f.results)
    if (!r.is_none()) plan.readers[slot(r)] = -1;

  const analysis::AliasClasses alias(f, effects);
  std::vector<ClassAccesses> classes(slots);  // indexed by class id (< slots)
  int last_random = -1;
  for (int n = 0; n < num_nodes; ++n) {
    const ir::Node& node = f.nodes[n];
    std::vector<int> touched, written;
    for (const auto& v : node.inputs) {
      if (v.is_none()) continue;
      const int s = slot(v);
      if (!v.is_param()) AddEdge(preds, v.node, n);
      auto& reads = plan.reads[n];
      if (std::find(reads.begin(), reads.end(), s) == reads.end()) {
        reads.push_back(s);
        if (plan.readers[s] >= 0) ++plan.readers[s];
      }
      if (alias.Written(v)) touched.push_back(alias.Class(v));
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const ir::ValueRef out{n, static_cast<int>(i)};
      if (alias.Written(out)) touched.push_back(alias.Class(out));
    }
    for (int k : analysis::WrittenInputs(node, effects))
      if (k < static_cast<int>(node.inputs.size()) && !node.inputs[k].is_none())
        written.push_back(alias.Class(node.inputs[k]));
    // Reads and views wait for the last write; a write waits for every access since it.
    for (int c : touched) AddEdge(preds, classes[c].last_writer, n);
    for (int c : written) {
      for (int r : classes[c].readers_since) AddEdge(preds, r, n);
      AddEdge(preds, classes[c].last_writer, n);
    }
    for (int c : touched)
      if (std::find(written.begin(), written.end(), c) == written.end())
        classes[c].readers_since.push_back(n);
    for (int c : written) {
      classes[c].last_writer = n;
      classes[c].readers_since.clear();
    }
    if (node.kind == ir::NodeKind::Op && GetOpDef(node.op).is_random) {
      AddEdge(preds, last_random, n);
      last_random = n;
    }
  }

  plan.num_preds.resize(num_nodes);
  plan.succs.resize(num_nodes);
  for (int n = 0; n < num_nodes; ++n) {
    plan.num_preds[n] = static_cast<int>(preds[n].size());
    for (int p : preds[n]) plan.succs[p].push_back(n);
  }
  return plan;
}

}  // namespace kiln
