// pack_weights.cc - marks products by weights that stay the same between calls, so their kernel
// reads a copy packed once into its fastest layout instead of the weight as given.
//
//   %m = matmul(%x, %w) {..}            (float32, %w a 2-D parameter of the entry function)
//   %f = fused_matmul(%x, %w, ..) {..}
// become fused_matmul(..) {.., pack_weight=True} (a plain matmul as one with no epilogue).
//
// A weight qualifies when the compiled function cannot write it (analysis/aliasing.h): no node of
// the entry function writes it or a view of it in place, and it is not handed to a region or call
// that writes (a training step, which updates its weights on every call, keeps reading them
// unpacked). The kernel still checks at run time that the bytes did not change
// since they were packed (see kernels/cpu/derived_cache.h); the pass only says where packing
// pays. Products inside regions (their weights arrive as region parameters) are left alone.
#include <string>

#include "analysis/aliasing.h"
#include "analysis/effects.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

// Which parameters of `f` (the entry function) may be written while it runs, each on its own.
std::vector<bool> WrittenParams(const ir::Module& module, const ir::Func& f) {
  const analysis::ModuleEffects effects(module);
  const analysis::AliasClasses alias(f, effects, analysis::ParamAliasing::Distinct);
  std::vector<bool> written(f.params.size());
  for (size_t p = 0; p < f.params.size(); ++p)
    written[p] = alias.Written(ir::ValueRef{-1, static_cast<int>(p)});
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
