// fuse_attention.cc - folds scaled dot-product attention into one fused_attention node (O2).
//
//   %s = matmul(%q, %k) {transpose_a=False, transpose_b=T}      (float32, 2 dims or more)
//   %t = mul(%s, %c) | mul(%c, %s) | div(%s, %c)   %c: a one-element constant   [optional]
//   %u = add(%t, %mask) | add(%mask, %t)           the scores' type is kept     [optional]
//   %p = softmax(%u) {axis=-1}                     (or the last axis by number)
//   %o = matmul(%p, %v) {transpose_a=False, transpose_b=False}
// becomes %o = fused_attention(%q, %k, %v, %mask) {transpose_key=T, scale=c (or 1/c)} in the
// place of the last matmul, whose kernel never stores the (.., sq, sk) probabilities. Each link
// is taken only when the value before it has exactly one user (so a training step, whose backward
// reads the probabilities, keeps the chain: its gradient needs them anyway) and keeps the
// scores' dtype and shape. A division is taken only by a power of two, whose reciprocal is exact.
// Uses by nodes nothing live reads do not count. No node with an effect may lie between the first
// matmul and the last: the fused node reads q and k later than the first matmul did. Runs before
// fuse_epilogue, which would otherwise take the mask add as a residual.
#include <cmath>

#include "analysis/effects.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace kiln::passes {
namespace {

bool IsOp(const ir::Node& node, OpKind op) {
  return node.kind == ir::NodeKind::Op && node.op == op;
}

bool SameType(const TensorMeta& a, const TensorMeta& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.weak == b.weak;
}

bool IsPlainMatMul(const ir::Node& node, bool allow_transpose_b) {
  return IsOp(node, OpKind::MatMul) && node.inputs.size() == 2 && node.outputs.size() == 1 &&
         node.attrs.size() == 2 && !AttrBool(node.attrs, 0) &&
         (allow_transpose_b || !AttrBool(node.attrs, 1));
}

// The value of a one-element float constant, or NaN when `v` is not one.
double ConstantScalar(const ir::Func& f, const ir::ValueRef& v) {
  if (v.is_param() || v.is_none()) return std::nan("");
  const ir::Node& c = f.nodes[v.node];
  if (c.kind != ir::NodeKind::Const || !c.value.defined() || c.value.numel() != 1 ||
      (c.value.dtype() != DType::Float32 && c.value.dtype() != DType::Float64))
    return std::nan("");
  return *c.value.To(DType::Float64).Contiguous().data<double>();
}

class AttentionFuser {
 public:
  AttentionFuser(ir::Func& f, const analysis::ModuleEffects& effects)
      : f_(f),
        effects_(effects),
        uses_(f.nodes.size(), 0),
        user_(f.nodes.size(), -1),
        removed_(f.nodes.size(), false) {
    // Uses by dead nodes do not count: nn.MultiheadAttention builds head-averaged weights that
    // dce removes when they are not returned, and they must not keep the chain apart.
    live_.assign(f.nodes.size(), false);
    for (const auto& r : f.results) Count(r, -1);
    for (int n = static_cast<int>(f.nodes.size()) - 1; n >= 0; --n) {
      live_[n] = uses_[n] > 0 || !effects.IsPure(f.nodes[n]);
      if (live_[n])
        for (const auto& v : f.nodes[n].inputs) Count(v, n);
    }
  }

  void Run() {
    bool fused = false;
    for (size_t n = 0; n < f_.nodes.size(); ++n) fused |= TryFuse(static_cast<int>(n));
    if (!fused) return;
    // Dead nodes go too: one may read a probability this pass removed.
    std::vector<bool> keep(removed_.size());
    for (size_t n = 0; n < keep.size(); ++n) keep[n] = live_[n] && !removed_[n];
    KeepNodes(f_, keep);
  }

 private:
  void Count(const ir::ValueRef& v, int user) {
    if (v.is_param() || v.is_none()) return;
    uses_[v.node]++;
    user_[v.node] = user;
  }

  // The sole user of node n's value when it keeps the scores' type, or -1.
  int Next(int n, const TensorMeta& scores) const {
    const int u = uses_[n] == 1 ? user_[n] : -1;
    if (u < 0 || removed_[u] || f_.nodes[u].outputs.size() != 1 ||
        !SameType(f_.nodes[u].outputs[0], scores))
      return -1;
    return u;
  }

  // Which input of `node` is node x's value: 0 or 1, or -1 (neither, or both).
  static int SideOf(const ir::Node& node, int x) {
    auto is_x = [&](const ir::ValueRef& v) { return !v.is_param() && !v.is_none() && v.node == x; };
    if (node.inputs.size() != 2 || is_x(node.inputs[0]) == is_x(node.inputs[1])) return -1;
    return is_x(node.inputs[0]) ? 0 : 1;
  }

  // Takes a scale link at node u (the sole user of `last`): sets *scale; false if u is not one.
  bool TakeScale(int u, int last, double* scale) const {
    const ir::Node& node = f_.nodes[u];
    const int side = SideOf(node, last);
    if (side < 0) return false;
    const double c = ConstantScalar(f_, node.inputs[1 - side]);
    if (std::isnan(c) || !std::isfinite(c)) return false;
    if (IsOp(node, OpKind::Mul)) {
      *scale = c;
      return true;
    }
    int exponent = 0;
    if (IsOp(node, OpKind::Div) && side == 0 && c != 0 && std::frexp(c, &exponent) == 0.5) {
      *scale = 1.0 / c;  // a power of two: x / c == x * (1 / c) exactly
      return true;
    }
    return false;
  }

  // Fuses the chain starting at matmul node n, if it is one; true when it did.
  bool TryFuse(int n) {
    const ir::Node& mm = f_.nodes[n];
    if (!IsPlainMatMul(mm, true) || removed_[n]) return false;
    const TensorMeta scores = mm.outputs[0];
    if (scores.dtype != DType::Float32 || scores.shape.size() < 2) return false;
    for (const auto& v : mm.inputs)
      if (v.is_none() || f_.meta(v).dtype != DType::Float32 || f_.meta(v).shape.size() < 2)
        return false;
    std::vector<int> chain = {n};
    double scale = 1.0;
    ir::ValueRef mask = ir::ValueRef::None();
    int u = Next(n, scores);
    if (u >= 0 && TakeScale(u, chain.back(), &scale)) {
      chain.push_back(u);
      u = Next(u, scores);
    }
    if (u >= 0 && IsOp(f_.nodes[u], OpKind::Add) && SideOf(f_.nodes[u], chain.back()) >= 0) {
      const ir::ValueRef m = f_.nodes[u].inputs[1 - SideOf(f_.nodes[u], chain.back())];
      if (f_.meta(m).dtype == DType::Float32 && !f_.meta(m).weak) {
        mask = m;
        chain.push_back(u);
        u = Next(u, scores);
      }
    }
    const int64_t rank = static_cast<int64_t>(scores.shape.size());
    if (u < 0 || !IsOp(f_.nodes[u], OpKind::Softmax) || f_.nodes[u].attrs.size() != 1) return false;
    const int64_t axis = AttrInt(f_.nodes[u].attrs, 0);
    if (axis != -1 && axis != rank - 1) return false;
    chain.push_back(u);
    const int last = uses_[u] == 1 ? user_[u] : -1;
    if (last < 0 || removed_[last] || !IsPlainMatMul(f_.nodes[last], false) ||
        SideOf(f_.nodes[last], u) != 0)
      return false;
    const ir::ValueRef v = f_.nodes[last].inputs[1];
    if (f_.meta(v).dtype != DType::Float32 || f_.meta(v).shape.size() < 2) return false;
    for (int k = n + 1; k < last; ++k)
      if (!effects_.IsPure(f_.nodes[k])) return false;

    ir::Node fused;
    fused.kind = ir::NodeKind::Op;
    fused.op = OpKind::FusedAttention;
    fused.inputs = {mm.inputs[0], mm.inputs[1], v, mask};
    if (mask.is_none()) fused.inputs.pop_back();
    fused.attrs = {mm.attrs[1], scale};
    fused.outputs = f_.nodes[last].outputs;
    fused.loc = mm.loc;
    for (int c : chain) removed_[c] = true;
    f_.nodes[last] = std::move(fused);
    return true;
  }

  ir::Func& f_;
  const analysis::ModuleEffects& effects_;
  std::vector<int> uses_;      // uses of each node's outputs (results count)
  std::vector<int> user_;      // the last user of each node (-1: a function result)
  std::vector<bool> removed_;  // folded into a fused node
  std::vector<bool> live_;     // read by something live (or has an effect)
};

}  // namespace

void FuseAttention(ir::Module& module) {
  const analysis::ModuleEffects effects(module);
  for (auto& f : module.funcs()) AttentionFuser(*f, effects).Run();
}

}  // namespace kiln::passes
