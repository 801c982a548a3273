// chunking.cc - the facts chunked elementwise runs and in-place reuse rest on.
#include "analysis/chunking.h"

#include "analysis/effects.h"

namespace kiln::analysis {

bool FitsElementwiseChunks(const Shape& operand, const Shape& result) {
  if (!IsStaticShape(operand) || !IsStaticShape(result)) return false;
  if (operand == result) return true;
  if (operand.size() > result.size()) return false;
  if (NumElements(operand) == 1) return true;
  size_t lead = 0;
  while (lead < operand.size() && operand[lead] == 1) ++lead;
  return lead + 1 == operand.size() && !result.empty() && operand.back() == result.back();
}

bool MayWriteOutputOverInput(const ir::Node& node) {
  if (node.kind != ir::NodeKind::Op || node.outputs.size() != 1) return false;
  const OpDef& def = GetOpDef(node.op);
  return def.elementwise && !def.allocates_outputs && IsStaticShape(node.outputs[0].shape);
}

bool IsChunkableOp(const ir::Node& node) { return MayWriteOutputOverInput(node) && IsPureOp(node); }

bool IsChunkableConst(const ir::Node& node) {
  return node.kind == ir::NodeKind::Const && node.value.defined() && node.value.numel() == 1;
}

bool IsChunkableBody(const ir::Func& f) {
  if (f.results.size() != 1 || f.results[0].is_param() || f.results[0].is_none()) return false;
  const Shape& out = f.meta(f.results[0]).shape;
  if (!IsStaticShape(out)) return false;
  for (const auto& p : f.params)
    if (!FitsElementwiseChunks(p.shape, out)) return false;
  int last_op = -1;
  for (size_t n = 0; n < f.nodes.size(); ++n) {
    const ir::Node& node = f.nodes[n];
    if (IsChunkableConst(node)) continue;
    if (!IsChunkableOp(node) || node.outputs[0].shape != out) return false;
    for (const auto& v : node.inputs)
      if (v.is_none()) return false;
    last_op = static_cast<int>(n);
  }
  return last_op >= 0 && f.results[0].node == last_op;
}

}  // namespace kiln::analysis
