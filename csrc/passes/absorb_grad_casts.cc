// absorb_grad_casts.cc - lets a fused optimizer update read a mixed-precision gradient uncast.
//
//   %g = cast(%g16) {dtype=float32}          (%g16 bfloat16 or float16; %g used only here)
//   %u = apply_momentum(%w, %a, %lr, %g, %m)
// becomes apply_momentum(%w, %a, %lr, %g16, %m): the update converts each element as it reads
// it (ops/optim.cc), the same values the cast would give, without writing and re-reading a
// float32 copy of every gradient. The same for apply_sgd and apply_adam. The cast, now unused,
// is left for DCE.
#include "passes/passes.h"

namespace kiln::passes {
namespace {

// The gradient's input position of each update op; -1 for other nodes.
int GradientInput(const ir::Node& node) {
  if (node.kind != ir::NodeKind::Op) return -1;
  switch (node.op) {
    case OpKind::ApplyMomentum:
      return 3;
    case OpKind::ApplySGD:
    case OpKind::ApplyAdam:
      return 4;
    default:
      return -1;
  }
}

bool IsLowPrecision(DType d) { return d == DType::BFloat16 || d == DType::Float16; }

void AbsorbIn(ir::Func& f) {
  std::vector<int> uses(f.nodes.size(), 0);
  auto count = [&](const ir::ValueRef& v) {
    if (!v.is_param() && !v.is_none()) uses[v.node]++;
  };
  for (const auto& node : f.nodes)
    for (const auto& v : node.inputs) count(v);
  for (const auto& r : f.results) count(r);
  for (auto& node : f.nodes) {
    const int gi = GradientInput(node);
    if (gi < 0 || gi >= static_cast<int>(node.inputs.size())) continue;
    const ir::ValueRef g = node.inputs[gi];
    if (g.is_param() || g.is_none() || uses[g.node] != 1) continue;
    const ir::Node& cast = f.nodes[g.node];
    if (cast.kind != ir::NodeKind::Op || cast.op != OpKind::Cast) continue;
    const DType from = f.meta(cast.inputs[0]).dtype, var = f.meta(node.inputs[0]).dtype;
    if (!IsLowPrecision(from) || cast.outputs[0].dtype != var) continue;
    if (var != DType::Float32 && var != DType::Float64) continue;
    node.inputs[gi] = cast.inputs[0];
    uses[g.node] = 0;
  }
}

}  // namespace

void AbsorbGradCasts(ir::Module& module) {
  for (auto& f : module.funcs()) AbsorbIn(*f);
}

}  // namespace kiln::passes
