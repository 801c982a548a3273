// cse.cc - common-subexpression elimination within each function.
//
// Two op nodes with the same op, attributes and inputs compute the same value, unless the op is
// random or writes to an input; constants with the same dtype, shape and bytes are one constant.
// Later duplicates are redirected to the first occurrence (DCE then removes them). Reuse never
// crosses a node that may write (assign, batch_norm's statistics, if/while/call, print/raise).
#include <cstring>
#include <map>

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

bool Eligible(const ir::Node& node) {
  if (node.kind == ir::NodeKind::Const) return true;
  if (node.kind != ir::NodeKind::Op) return false;
  const OpDef& def = GetOpDef(node.op);
  return !def.is_random && def.mutated_inputs.empty();
}

}  // namespace

void CommonSubexpressionElimination(ir::Module& module) {
  for (auto& fp : module.funcs()) {
    ir::Func& f = *fp;
    std::map<std::string, int> first;
    std::vector<int> replacement(f.nodes.size());
    for (size_t n = 0; n < f.nodes.size(); ++n) {
      ir::Node& node = f.nodes[n];
      replacement[n] = static_cast<int>(n);
      for (auto& v : node.inputs)
        if (!v.is_param() && !v.is_none()) v.node = replacement[v.node];
      if (!Eligible(node)) {
        // A write (assign, a region that may assign) can change what an earlier value computed
        // from its inputs would be: nothing before it is reused after it.
        if (node.kind != ir::NodeKind::Const) first.clear();
        continue;
      }
      auto [it, inserted] = first.emplace(KeyOf(f, node), static_cast<int>(n));
      if (!inserted) replacement[n] = it->second;
    }
    for (auto& r : f.results)
      if (!r.is_param() && !r.is_none()) r.node = replacement[r.node];
  }
}

}  // namespace kiln::passes
