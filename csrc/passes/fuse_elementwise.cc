// fuse_elementwise.cc - outlines chains of elementwise ops into a function the executor runs as
// one chunked pass over memory (runtime/fused_elementwise.h).
//
//   %3 = mul(%0, %1) : f32[64,512]
//   %4 = add(%3, %2) : f32[64,512]          (%2: f32[512])
//   %5 = tanh(%4) : f32[64,512]
// becomes
//   %5 = call @fused_elementwise(%0, %1, %2) : f32[64,512]
// with the three ops moved into @fused_elementwise. A group grows backwards from its last op: a
// producer joins when it is an elementwise op with the group's static output shape and every
// user of its value is in the group (no intermediate is needed outside it). Values from outside
// become the body's parameters and must fit a chunked run; one-element constants are copied in
// (what a chunked body may hold is analysis/chunking.h's, which the executor's runner asks too).
// A group needs two ops or more, and no node with an effect (analysis/effects.h) may lie between
// its first and last op, since the call reads its inputs where the last op was (the ops before
// such a node are left out). Grouping is linear in the ops it visits, so a long unrolled
// loop compiles in linear time.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "analysis/chunking.h"
#include "analysis/effects.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln::passes {
namespace {

bool IsChunkableConst(const ir::Func& f, const ir::ValueRef& v) {
  return !v.is_param() && !v.is_none() && analysis::IsChunkableConst(f.nodes[v.node]);
}

class ElementwiseFuser {
 public:
  ElementwiseFuser(ir::Module& module, ir::Func& f, const analysis::ModuleEffects& effects)
      : m_(module),
        f_(f),
        effects_(effects),
        users_(f.nodes.size()),
        removed_(f.nodes.size(), false),
        tried_(f.nodes.size(), false) {
    for (size_t n = 0; n < f.nodes.size(); ++n)
      for (const auto& v : f.nodes[n].inputs)
        if (!v.is_param() && !v.is_none()) users_[v.node].push_back(static_cast<int>(n));
    for (const auto& r : f.results)
      if (!r.is_param() && !r.is_none()) users_[r.node].push_back(-1);
  }

  void Run() {
    for (int n = static_cast<int>(f_.nodes.size()) - 1; n >= 0; --n)
      if (!removed_[n] && !tried_[n] && analysis::IsChunkableOp(f_.nodes[n])) TryFuse(n);
    std::vector<bool> keep(removed_.size());
    for (size_t n = 0; n < keep.size(); ++n) keep[n] = !removed_[n];
    KeepNodes(f_, keep);
  }

 private:
  // The ops that can run with sink n as one chunked pass, in node order. A producer joins once
  // every use of its value is in the group: each member counts the uses it adds, so a chain of
  // n ops is grouped in O(n log n), not by rescanning the group until nothing joins.
  std::vector<int> Group(int sink) const {
    std::set<int> group = {sink};
    std::unordered_map<int, size_t> uses_inside;  // candidate producer -> its uses in the group
    const Shape& shape = f_.nodes[sink].outputs[0].shape;
    std::vector<int> work = {sink};
    while (!work.empty()) {
      const int member = work.back();
      work.pop_back();
      for (const auto& v : f_.nodes[member].inputs) {
        if (v.is_param() || v.is_none() || group.count(v.node) || removed_[v.node]) continue;
        const ir::Node& p = f_.nodes[v.node];
        if (!analysis::IsChunkableOp(p) || p.outputs[0].shape != shape) continue;
        if (++uses_inside[v.node] == users_[v.node].size()) {
          group.insert(v.node);
          work.push_back(v.node);
        }
      }
    }
    return std::vector<int>(group.begin(), group.end());
  }

  void TryFuse(int sink) {
    std::vector<int> group = AfterLastEffect(Group(sink), sink);
    if (group.size() < 2) return;
    const Shape& shape = f_.nodes[sink].outputs[0].shape;
    std::vector<ir::ValueRef> outside;   // the body's parameters, in first-use order
    std::set<std::pair<int, int>> seen;  // outside values already listed, as (node, index)
    for (int n : group) {
      for (const auto& v : f_.nodes[n].inputs) {
        const bool inside = !v.is_param() && std::binary_search(group.begin(), group.end(), v.node);
        if (inside || IsChunkableConst(f_, v) || !seen.insert({v.node, v.index}).second) continue;
        if (!analysis::FitsElementwiseChunks(f_.meta(v).shape, shape)) {
          // Its members would meet the same input as sinks: not tried again (keeps it linear).
          for (int m : group) tried_[m] = true;
          return;
        }
        outside.push_back(v);
      }
    }
    const std::string name = m_.FreshName("fused_elementwise");
    ir::Func& body = m_.AddFunc(name);
    BuildBody(body, group, outside);
    ir::Node call;
    call.kind = ir::NodeKind::Call;
    call.callees = {name};
    call.inputs = outside;
    call.outputs = f_.nodes[sink].outputs;
    call.loc = f_.nodes[sink].loc;
    for (int n : group) removed_[n] = n != sink;
    f_.nodes[sink] = std::move(call);
  }

  // The members after the last node with an effect between the group's first op and the sink
  // (the call runs where the sink was; a region that only computes does not count). They still form
  // a group: every use of a value comes after the op making it.
  std::vector<int> AfterLastEffect(std::vector<int> group, int sink) const {
    if (group.size() < 2) return group;
    for (int k = sink - 1; k > group.front(); --k) {
      if (!std::binary_search(group.begin(), group.end(), k) && !effects_.IsPure(f_.nodes[k])) {
        group.erase(group.begin(), std::upper_bound(group.begin(), group.end(), k));
        break;
      }
    }
    return group;
  }

  // The group's ops (and the one-element constants they read) as a function of `outside`.
  void BuildBody(ir::Func& body, const std::vector<int>& group,
                 const std::vector<ir::ValueRef>& outside) {
    for (const auto& v : outside) body.params.push_back(f_.meta(v));
    std::unordered_map<int, int> index;        // a node of f_ -> its node in body (sized by group)
    std::map<std::pair<int, int>, int> param;  // an outside value (node, index) -> its param
    for (size_t i = 0; i < outside.size(); ++i)
      param[{outside[i].node, outside[i].index}] = static_cast<int>(i);
    auto map = [&](const ir::ValueRef& v) -> ir::ValueRef {
      auto at = param.find({v.node, v.index});
      if (at != param.end()) return ir::ValueRef{-1, at->second};
      if (!index.count(v.node)) {  // a one-element constant, copied in
        index[v.node] = static_cast<int>(body.nodes.size());
        body.nodes.push_back(f_.nodes[v.node]);
      }
      return ir::ValueRef{index.at(v.node), v.index};
    };
    for (int n : group) {
      ir::Node node = f_.nodes[n];
      for (auto& v : node.inputs) v = map(v);
      index[n] = static_cast<int>(body.nodes.size());
      body.nodes.push_back(std::move(node));
    }
    body.results = {ir::ValueRef{index[group.back()], 0}};
  }

  ir::Module& m_;
  ir::Func& f_;
  const analysis::ModuleEffects& effects_;  // of the module before this pass added bodies
  std::vector<std::vector<int>> users_;     // users of each node's outputs (-1: a result)
  std::vector<bool> removed_;               // moved into a fused body
  std::vector<bool> tried_;                 // in a group that could not fuse: not a sink again
};

}  // namespace

void FuseElementwise(ir::Module& module) {
  const analysis::ModuleEffects effects(module);
  std::vector<ir::Func*> funcs;  // bodies added while fusing are not visited
  for (auto& f : module.funcs()) funcs.push_back(f.get());
  for (ir::Func* f : funcs) ElementwiseFuser(module, *f, effects).Run();
}

}  // namespace kiln::passes
