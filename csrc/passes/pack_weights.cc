// pack_weights.cc - marks products by weights that stay the same between calls, so their kernel
// reads a copy packed once into its fastest layout instead of the weight as given.
//
//   %m = matmul(%x, %w) {..}            (float32, %w a 2-D parameter of the entry function)
//   %f = fused_matmul(%x, %w, ..) {..}
// become fused_matmul(..) {.., pack_weight=True} (a plain matmul as one with no epilogue).
//
// A weight qualifies when the compiled function cannot write it: no node of the entry function
// writes it in place, and it is not handed to a region or call while any function of the module
// writes one of its own parameters (a training step, which updates its weights on every call,
// keeps reading them unpacked). The kernel still checks at run time that the bytes did not change
// since they were packed (see kernels/cpu/derived_cache.h); the pass only says where packing
// pays. Products inside regions (their weights arrive as region parameters) are left alone.
#include <string>

#include "passes/passes.h"

namespace kiln::passes {
namespace {

bool WritesOwnParam(const ir::Func& f) {
  for (const auto& node : f.nodes) {
    if (node.kind != ir::NodeKind::Op) continue;
    for (int i : GetOpDef(node.op).mutated_inputs)
      if (i < static_cast<int>(node.inputs.size()) && node.inputs[i].is_param()) return true;
  }
  return false;
}

// Which parameters of `f` (the entry function) may be written while it runs.
std::vector<bool> WrittenParams(const ir::Module& module, const ir::Func& f) {
  bool regions_write = false;
  for (const auto& g : module.funcs())
    regions_write = regions_write || (g.get() != &f && WritesOwnParam(*g));
  std::vector<bool> written(f.params.size(), false);
  for (const auto& node : f.nodes) {
    std::vector<int> writes;
    if (node.kind == ir::NodeKind::Op) {
      writes = GetOpDef(node.op).mutated_inputs;
    } else if (regions_write) {
      for (size_t i = 0; i < node.inputs.size(); ++i) writes.push_back(static_cast<int>(i));
    }
    for (int i : writes)
      if (i < static_cast<int>(node.inputs.size()) && node.inputs[i].is_param())
        written[node.inputs[i].index] = true;
  }
  return written;
}

}  // namespace

void PackWeights(ir::Module& module) {
  ir::Func& f = module.entry();
  const std::vector<bool> written = WrittenParams(module, f);
  for (auto& node : f.nodes) {
    if (node.kind != ir::NodeKind::Op) continue;
    if (node.op != OpKind::MatMul && node.op != OpKind::FusedMatMul) continue;
    if (node.inputs.size() < 2 || node.outputs.size() != 1) continue;
    const ir::ValueRef w = node.inputs[1];
    if (!w.is_param() || written[w.index]) continue;
    const TensorMeta& wm = f.meta(w);
    const TensorMeta& am = f.meta(node.inputs[0]);
    if (wm.dtype != DType::Float32 || am.dtype != DType::Float32 || wm.shape.size() != 2) continue;
    if (node.op == OpKind::MatMul) {
      node.op = OpKind::FusedMatMul;
      node.attrs = {node.attrs[0], node.attrs[1], std::string("none"), true};
    }
    node.attrs[3] = true;
  }
}

}  // namespace kiln::passes
