// fuse_epilogue.cc - folds a float32 matmul's elementwise epilogue into one fused_matmul node.
//
//   %m = matmul(%a, %b)                       (float32)
//   %z = add(%m, %bias)                       bias: 1-D, the length of %m's last dim    [optional]
//   %y = relu|sigmoid|tanh|gelu(%z)     (gelu exact or tanh-approximated) [optional] %r = add(%y,
//   %res)                        res: %y's type exactly; only with no activation
// becomes %r = fused_matmul(%a, %b, %bias, %res) {transpose_a, transpose_b, activation}, in the
// place of the last node of the chain (the bias and residual are defined before it); the other
// nodes of the chain are removed. Each link is taken only when the value before it has exactly
// one user in the function (a use by a region call, or a function result, counts) and the link
// keeps the value's dtype and shape exactly, so the fused node has the type of the value it
// replaces. No node with an effect (analysis/effects.h: print, raise, an in-place write, a random
// draw, a region or call that does one) may lie between the matmul and the end of the chain: the
// fused node reads the matmul's operands later than the matmul did.
#include <string>

#include "analysis/effects.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln::passes {
namespace {

bool SameType(const TensorMeta& a, const TensorMeta& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.weak == b.weak;
}

bool IsOp(const ir::Node& node, OpKind op) {
  return node.kind == ir::NodeKind::Op && node.op == op;
}

// The activation name fused_matmul uses for an activation node, or "" if it is not one.
std::string ActivationOf(const ir::Node& node) {
  if (node.kind != ir::NodeKind::Op) return "";
  switch (node.op) {
    case OpKind::Relu:
      return "relu";
    case OpKind::Sigmoid:
      return "sigmoid";
    case OpKind::Tanh:
      return "tanh";
    case OpKind::Gelu:
      return AttrString(node.attrs, 0) == "tanh" ? "gelu_tanh" : "gelu";
    default:
      return "";
  }
}

class Fuser {
 public:
  Fuser(ir::Func& f, const analysis::ModuleEffects& effects)
      : f_(f),
        effects_(effects),
        uses_(f.nodes.size(), 0),
        user_(f.nodes.size(), -1),
        removed_(f.nodes.size(), false) {
    for (size_t n = 0; n < f.nodes.size(); ++n)
      for (const auto& v : f.nodes[n].inputs) Count(v, static_cast<int>(n));
    for (const auto& r : f.results) Count(r, -1);
  }

  void Run() {
    for (size_t n = 0; n < f_.nodes.size(); ++n) TryFuse(static_cast<int>(n));
    std::vector<bool> keep(removed_.size());
    for (size_t n = 0; n < keep.size(); ++n) keep[n] = !removed_[n];
    KeepNodes(f_, keep);
  }

 private:
  void Count(const ir::ValueRef& v, int user) {
    if (v.is_param() || v.is_none()) return;
    uses_[v.node]++;
    user_[v.node] = user;
  }

  // The node that is the only user of node n's (single) output, or -1.
  int SoleUser(int n) const {
    const int u = uses_[n] == 1 ? user_[n] : -1;
    return u >= 0 && !removed_[u] ? u : -1;
  }

  // For add(%x, %other) or add(%other, %x): the other operand; None otherwise.
  ir::ValueRef OtherOperand(const ir::Node& add, int x) const {
    if (!IsOp(add, OpKind::Add) || add.inputs.size() != 2) return ir::ValueRef::None();
    const ir::ValueRef &l = add.inputs[0], &r = add.inputs[1];
    const bool left = !l.is_param() && !l.is_none() && l.node == x;
    const bool right = !r.is_param() && !r.is_none() && r.node == x;
    if (left == right) return ir::ValueRef::None();  // x on both sides (or neither)
    return left ? r : l;
  }

  void TryFuse(int n) {
    const ir::Node& mm = f_.nodes[n];
    if (!IsOp(mm, OpKind::MatMul) || mm.outputs.size() != 1 || mm.inputs.size() != 2 ||
        mm.attrs.size() != 2)
      return;
    const TensorMeta out = mm.outputs[0];
    // float32, and bfloat16 (mixed precision: its kernel runs the epilogue in float32 on
    // oneDNN's bf16 primitive, rounding once).
    if ((out.dtype != DType::Float32 && out.dtype != DType::BFloat16) || out.shape.empty()) return;
    for (const auto& v : mm.inputs)
      if (v.is_none() || f_.meta(v).dtype != out.dtype) return;

    std::vector<int> chain = {n};
    ir::ValueRef bias = ir::ValueRef::None(), residual = ir::ValueRef::None();
    std::string activation = "none";
    // Each link: the sole user of the chain's last value, keeping its type exactly.
    auto next = [&]() -> int {
      const int u = SoleUser(chain.back());
      if (u < 0 || f_.nodes[u].outputs.size() != 1 || !SameType(f_.nodes[u].outputs[0], out))
        return -1;
      return u;
    };
    if (int u = next(); u >= 0) {
      ir::ValueRef b = OtherOperand(f_.nodes[u], chain.back());
      if (!b.is_none()) {
        const TensorMeta& m = f_.meta(b);
        const int64_t cols = out.shape.back();
        if (m.dtype == out.dtype && !m.weak && cols >= 0 && m.shape == Shape{cols}) {
          bias = b;
          chain.push_back(u);
        }
      }
    }
    if (int u = next(); u >= 0) {
      std::string act = ActivationOf(f_.nodes[u]);
      if (!act.empty()) {
        activation = act;
        chain.push_back(u);
      }
    }
    if (activation == "none") {
      if (int u = next(); u >= 0) {
        ir::ValueRef r = OtherOperand(f_.nodes[u], chain.back());
        if (!r.is_none() && SameType(f_.meta(r), out) && IsStaticShape(out.shape)) {
          residual = r;
          chain.push_back(u);
        }
      }
    }
    if (chain.size() == 1) return;
    const int last = chain.back();
    for (int k = n + 1; k < last; ++k)
      if (!effects_.IsPure(f_.nodes[k])) return;

    ir::Node fused;
    fused.kind = ir::NodeKind::Op;
    fused.op = OpKind::FusedMatMul;
    fused.inputs = {mm.inputs[0], mm.inputs[1], bias, residual};
    while (fused.inputs.back().is_none()) fused.inputs.pop_back();  // omit absent trailing inputs
    fused.attrs = {mm.attrs[0], mm.attrs[1], activation, false};
    fused.outputs = f_.nodes[last].outputs;
    fused.loc = mm.loc;
    for (size_t i = 0; i + 1 < chain.size(); ++i) removed_[chain[i]] = true;
    f_.nodes[last] = std::move(fused);
  }

  ir::Func& f_;
  const analysis::ModuleEffects& effects_;
  std::vector<int> uses_;      // uses of each node's outputs (results count)
  std::vector<int> user_;      // the last user of each node (-1: a function result)
  std::vector<bool> removed_;  // folded into a fused node
};

}  // namespace

void FuseEpilogue(ir::Module& module) {
  const analysis::ModuleEffects effects(module);
  for (auto& f : module.funcs()) Fuser(*f, effects).Run();
}

}  // namespace kiln::passes
