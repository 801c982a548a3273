// rewrite_util.cc - node-list compaction the passes share.
#include "passes/rewrite_util.h"

namespace kiln::passes {

void KeepNodes(ir::Func& f, const std::vector<bool>& keep) {
  std::vector<int> new_index(f.nodes.size(), -1);
  std::vector<ir::Node> kept;
  for (size_t n = 0; n < f.nodes.size(); ++n) {
    if (!keep[n]) continue;
    new_index[n] = static_cast<int>(kept.size());
    kept.push_back(std::move(f.nodes[n]));
  }
  auto remap = [&](ir::ValueRef& v) {
    if (!v.is_param() && !v.is_none()) v.node = new_index[v.node];
  };
  for (auto& node : kept)
    for (auto& v : node.inputs) remap(v);
  for (auto& r : f.results) remap(r);
  f.nodes = std::move(kept);
}

void ReorderNodes(ir::Func& f, const std::vector<int>& order) {
  std::vector<int> new_index(f.nodes.size(), -1);
  std::vector<ir::Node> nodes;
  nodes.reserve(order.size());
  for (int old : order) {
    new_index[old] = static_cast<int>(nodes.size());
    nodes.push_back(std::move(f.nodes[old]));
  }
  auto remap = [&](ir::ValueRef& v) {
    if (!v.is_param() && !v.is_none()) v.node = new_index[v.node];
  };
  for (auto& node : nodes)
    for (auto& v : node.inputs) remap(v);
  for (auto& r : f.results) remap(r);
  f.nodes = std::move(nodes);
}

}  // namespace kiln::passes
