// simplify.cc - algebraic simplification: identities that make an op node unnecessary.
//
//   x * 1, 1 * x, x / 1, x - 0, x + (-0.0), (-0.0) + x  ->  x
//   neg(neg(x))                                          ->  x
//   transpose(transpose(x, p1), p2)                      ->  transpose(x, p1 o p2), or x
//   transpose(x, identity)                               ->  x
//   reshape(reshape(x, s1), s2)                          ->  reshape(x, s2)
//   reshape(x, s) with the result shaped like x          ->  x
//   cast(cast(x, t1), t2)                                ->  cast(x, t2) when t1 holds x exactly
//   cast(x, dtype(x))                                    ->  x
//   matmul(transpose(x, swap of the last two axes), y)   ->  matmul(x, y), transpose_a flipped
//   (and likewise for y and transpose_b): the kernel reads the same transposed view, and later
//   passes (fuse_epilogue, pack_weights) see the operand itself, a weight written `x @ w.T`
//   included.
//
// Each rewrite keeps the result's dtype, shape and weakness exactly (checked by re-running the
// registry's inference), so users of the value and the verifier see no change. A replaced node
// has its uses redirected to the replacement, like cse; "dce" then removes it.
//
// Exactness. The neutral constant is a const node (or a cast of one, as the front end emits for
// Python scalars; "fold" usually has made that a const already) whose every element is the
// neutral value, and broadcasting it must not change x's shape. For floating results x + 0.0 is
// not x: -0.0 + 0.0 is +0.0. So adding folds only a constant of negative zeros (integers: any
// zero), and subtracting only positive zeros. A cast chain folds only when the middle type holds
// every value of x's dtype exactly and is in the same category (bool to anything, integer to a
// wider integer that holds it, float to a wider float): then the last cast converts the same
// value either way. Integer -> float -> integer is excluded: out-of-range float-to-int
// conversion differs from integer wrap-around.
//
// Aliasing (analysis/aliasing.h). Values that may share storage form alias classes (views join
// their input, region outputs their inputs, and a function's params all share one class: the
// caller may pass one tensor twice). Nothing in a class that something writes in place is
// touched. And a function result is redirected only to a value that already aliased it, or to a
// fresh value (no param in its class) that no other result aliases: a returned `x * 1` must stay
// a new tensor, not the caller's x.
#include <cmath>
#include <set>
#include <string>

#include "analysis/aliasing.h"
#include "analysis/effects.h"
#include "core/error.h"
#include "ops/evaluate.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

constexpr int64_t kMaxConstElements = 1 << 16;

bool SameMeta(const TensorMeta& a, const TensorMeta& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.weak == b.weak;
}

bool IsOp(const ir::Node& node, OpKind op) {
  return node.kind == ir::NodeKind::Op && node.op == op && node.outputs.size() == 1;
}

// ---- constants

// The value of a const node, or of casts of one (computed with the cast kernel, as "fold"
// would); undefined otherwise.
Tensor ConstValue(const ir::Func& f, ir::ValueRef v) {
  if (v.is_param() || v.is_none()) return Tensor();
  const ir::Node& node = f.nodes[v.node];
  if (node.kind == ir::NodeKind::Const) return node.value;
  if (!IsOp(node, OpKind::Cast)) return Tensor();
  Tensor inner = ConstValue(f, node.inputs[0]);
  if (!inner.defined() || inner.numel() > kMaxConstElements) return Tensor();
  return EvaluateOp(OpKind::Cast, {inner}, node.attrs)[0];
}

enum class Neutral { One, Zero, PositiveZero, NegativeZero };

// Every element of `value` is `want`. Zeros of integer and bool types are positive zeros.
bool AllElements(const Tensor& value, Neutral want) {
  if (value.numel() > kMaxConstElements) return false;
  const Tensor v = value.Contiguous();
  return DispatchDType(v.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* data = v.template data<T>();
    for (int64_t i = 0; i < v.numel(); ++i) {
      double x = static_cast<double>(static_cast<compute_t<T>>(data[i]));
      bool ok = want == Neutral::One            ? x == 1.0
                : want == Neutral::Zero         ? x == 0.0
                : want == Neutral::PositiveZero ? x == 0.0 && !std::signbit(x)
                                                : x == 0.0 && std::signbit(x);
      if (!ok) return false;
    }
    return true;
  });
}

// Broadcasting `c` against `x` leaves x's shape, at run time too: each of c's dimensions is 1
// or x's (known) dimension.
bool BroadcastKeepsShape(const Shape& c, const Shape& x) {
  if (c.size() > x.size()) return false;
  size_t extra = x.size() - c.size();
  for (size_t i = 0; i < c.size(); ++i)
    if (c[i] != 1 && (x[extra + i] < 0 || c[i] != x[extra + i])) return false;
  return true;
}

// ---- casts

// `to` holds every value of `from` exactly, in the same category (bool holds in anything): a
// wider integer of the same signedness, a signed one wider than an unsigned one, a wider float.
bool ExactWidening(DType from, DType to) {
  if (from == to || from == DType::Bool) return true;
  if (IsIntegral(from)) {
    if (!IsIntegral(to) || (IsUnsigned(to) && !IsUnsigned(from))) return false;
    return ItemSize(to) > ItemSize(from);
  }
  if (from == DType::Float16 || from == DType::BFloat16)
    return to == DType::Float32 || to == DType::Float64;
  if (from == DType::Float32) return to == DType::Float64;
  return false;
}

// ---- the pass over one function

class Simplifier {
 public:
  Simplifier(ir::Func& f, const analysis::ModuleEffects& effects) : f_(f), alias_(f, effects) {}

  void Run() {
    replacement_.resize(f_.nodes.size());
    for (size_t n = 0; n < f_.nodes.size(); ++n) {
      ir::Node& node = f_.nodes[n];
      for (auto& v : node.inputs) v = Resolve(v);
      replacement_[n] = {static_cast<int>(n), 0};
      if (node.kind != ir::NodeKind::Op || node.outputs.size() != 1) continue;
      ir::ValueRef self{static_cast<int>(n), 0};
      if (alias_.Written(self)) continue;
      SimplifyNode(self, node);
    }
    for (auto& r : f_.results) r = Resolve(r);
  }

 private:
  ir::ValueRef Resolve(ir::ValueRef v) const {
    if (v.is_param() || v.is_none() || v.index != 0) return v;
    return replacement_[v.node];
  }

  const ir::Node* Producer(ir::ValueRef v) const {
    return v.is_param() || v.is_none() ? nullptr : &f_.nodes[v.node];
  }

  // Redirects the uses of `self` to `to` when the types match and aliasing allows it.
  bool Replace(ir::ValueRef self, ir::ValueRef to) {
    if (!SameMeta(f_.meta(self), f_.meta(to)) || alias_.Written(to)) return false;
    bool returned = false;
    for (const auto& r : f_.results) returned = returned || r == self;
    if (returned && !alias_.MayAlias(self, to)) {
      // A const node's tensor is the same object on every call: never hand it out.
      const ir::Node* producer = Producer(to);
      if (producer != nullptr && producer->kind == ir::NodeKind::Const) return false;
      if (alias_.SharesParam(to) || Returned(to)) return false;
      newly_returned_.insert(alias_.Class(to));
    }
    replacement_[self.node] = to;
    return true;
  }

  // Re-runs inference on a rewritten node; restores `saved` unless the types are unchanged.
  bool KeepsType(ir::Node& node, const ir::Node& saved) {
    const OpDef& def = GetOpDef(node.op);
    std::vector<TensorMeta> metas;
    for (const auto& v : node.inputs) metas.push_back(f_.meta(v));
    bool same = false;
    try {
      std::vector<TensorMeta> inferred = def.infer(def, metas, node.attrs);
      same = inferred.size() == 1 && SameMeta(inferred[0], saved.outputs[0]);
    } catch (const Error&) {
      same = false;
    }
    if (!same) node = saved;
    return same;
  }

  void SimplifyNode(ir::ValueRef self, ir::Node& node) {
    switch (node.op) {
      case OpKind::Mul:
        if (!ArithmeticIdentity(self, node, 1, Neutral::One))
          ArithmeticIdentity(self, node, 0, Neutral::One);
        break;
      case OpKind::Div:
        ArithmeticIdentity(self, node, 1, Neutral::One);
        break;
      case OpKind::Add:
        if (!ArithmeticIdentity(self, node, 1, Neutral::NegativeZero))
          ArithmeticIdentity(self, node, 0, Neutral::NegativeZero);
        break;
      case OpKind::Sub:
        ArithmeticIdentity(self, node, 1, Neutral::PositiveZero);
        break;
      case OpKind::Neg:
        DoubleNegation(self, node);
        break;
      case OpKind::Transpose:
        Transpose(self, node);
        break;
      case OpKind::Reshape:
        Reshape(self, node);
        break;
      case OpKind::Cast:
        Cast(self, node);
        break;
      case OpKind::MatMul:
        AbsorbTranspose(node, 0);
        AbsorbTranspose(node, 1);
        break;
      default:
        break;
    }
  }

  // x op c -> x, with c (input `const_at`) all `want`. Zeros: for a floating result, x + c is
  // x only when c is -0.0 and x - c only when c is +0.0; for other results any zero will do.
  bool ArithmeticIdentity(ir::ValueRef self, const ir::Node& node, int const_at, Neutral want) {
    if (node.inputs.size() != 2) return false;
    ir::ValueRef x = node.inputs[1 - const_at];
    Tensor c = ConstValue(f_, node.inputs[const_at]);
    if (!c.defined() || x.is_none()) return false;
    if (!BroadcastKeepsShape(c.shape(), f_.meta(x).shape)) return false;
    if (want != Neutral::One && !IsFloating(f_.meta(self).dtype)) want = Neutral::Zero;
    return AllElements(c, want) && Replace(self, x);
  }

  void DoubleNegation(ir::ValueRef self, const ir::Node& node) {
    const ir::Node* inner = Producer(node.inputs[0]);
    if (inner == nullptr || !IsOp(*inner, OpKind::Neg) || alias_.Written(node.inputs[0])) return;
    Replace(self, inner->inputs[0]);
  }

  static std::vector<int64_t> Normalized(const std::vector<int64_t>& perm) {
    std::vector<int64_t> out = perm;
    int64_t n = static_cast<int64_t>(perm.size());
    for (auto& a : out)
      if (a < 0) a += n;
    return out;
  }

  static bool IsIdentity(const std::vector<int64_t>& perm) {
    for (size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != static_cast<int64_t>(i)) return false;
    return true;
  }

  void Transpose(ir::ValueRef self, ir::Node& node) {
    const ir::Node* inner = Producer(node.inputs[0]);
    if (inner != nullptr && IsOp(*inner, OpKind::Transpose) && !alias_.Written(node.inputs[0]) &&
        !alias_.Written(inner->inputs[0])) {
      // y = transpose(x, p1): y's axis i is x's axis p1[i]; z = transpose(y, p2): z's axis j is
      // y's axis p2[j], so x's axis p1[p2[j]].
      std::vector<int64_t> p1 = Normalized(AttrInts(inner->attrs, 0));
      std::vector<int64_t> p2 = Normalized(AttrInts(node.attrs, 0));
      if (p1.size() == p2.size()) {
        std::vector<int64_t> composed(p2.size());
        for (size_t j = 0; j < p2.size(); ++j) composed[j] = p1[p2[j]];
        ir::Node saved = node;
        node.inputs[0] = inner->inputs[0];
        node.attrs[0] = composed;
        KeepsType(node, saved);
      }
    }
    if (IsIdentity(Normalized(AttrInts(node.attrs, 0)))) Replace(self, node.inputs[0]);
  }

  void Reshape(ir::ValueRef self, ir::Node& node) {
    const ir::Node* inner = Producer(node.inputs[0]);
    if (inner != nullptr && IsOp(*inner, OpKind::Reshape) && !alias_.Written(node.inputs[0]) &&
        !alias_.Written(inner->inputs[0])) {
      ir::Node saved = node;
      node.inputs[0] = inner->inputs[0];
      if (!KeepsType(node, saved)) {
        // x's shape is known only at run time: reshape(x, s2) would record s2 as given, -1
        // included; the result's known shape is then the attribute.
        bool known = true;
        for (int64_t d : saved.outputs[0].shape) known = known && d >= 0;
        if (known) {
          node.inputs[0] = inner->inputs[0];
          node.attrs[0] = saved.outputs[0].shape;
          KeepsType(node, saved);
        }
      }
    }
    // The result keeps x's shape: with a dimension unknown, the recorded shapes are equal only
    // when the attribute spells x's shape, and its one -1 resolves to that dimension again.
    const Shape& shape = f_.meta(node.inputs[0]).shape;
    int unknown = 0;
    bool zero = false;
    for (int64_t d : shape) {
      unknown += d < 0;
      zero = zero || d == 0;
    }
    if (unknown > 1 || (unknown == 1 && zero)) return;
    Replace(self, node.inputs[0]);
  }

  void Cast(ir::ValueRef self, ir::Node& node) {
    const ir::Node* inner = Producer(node.inputs[0]);
    if (inner != nullptr && IsOp(*inner, OpKind::Cast) && !alias_.Written(node.inputs[0]) &&
        !alias_.Written(inner->inputs[0]) &&
        ExactWidening(f_.meta(inner->inputs[0]).dtype, inner->outputs[0].dtype)) {
      ir::Node saved = node;
      node.inputs[0] = inner->inputs[0];
      KeepsType(node, saved);
    }
    Replace(self, node.inputs[0]);
  }

  // Operand `side` of a matmul is transpose(x) swapping the last two axes: read x with that
  // side's transpose flag flipped (attributes 0 and 1 are transpose_a and transpose_b).
  void AbsorbTranspose(ir::Node& node, int side) {
    const ir::ValueRef operand = node.inputs[side];
    const ir::Node* inner = Producer(operand);
    if (inner == nullptr || !IsOp(*inner, OpKind::Transpose) || alias_.Written(operand) ||
        alias_.Written(inner->inputs[0]))
      return;
    const std::vector<int64_t> perm = Normalized(AttrInts(inner->attrs, 0));
    const int64_t n = static_cast<int64_t>(perm.size());
    if (n < 2 || perm[n - 2] != n - 1 || perm[n - 1] != n - 2) return;
    for (int64_t i = 0; i + 2 < n; ++i)
      if (perm[i] != i) return;
    ir::Node saved = node;
    node.inputs[side] = inner->inputs[0];
    node.attrs[side] = !AttrBool(node.attrs, side);
    KeepsType(node, saved);
  }

  // v may share storage with a result: one of f's, or one a rewrite has redirected to it.
  bool Returned(ir::ValueRef v) const {
    return alias_.Returned(v) || newly_returned_.count(alias_.Class(v)) > 0;
  }

  ir::Func& f_;
  const analysis::AliasClasses alias_;
  std::set<int> newly_returned_;  // alias classes results were redirected into
  std::vector<ir::ValueRef> replacement_;
};

}  // namespace

void Simplify(ir::Module& module) {
  const analysis::ModuleEffects effects(module);
  for (auto& f : module.funcs()) Simplifier(*f, effects).Run();
}

}  // namespace kiln::passes
