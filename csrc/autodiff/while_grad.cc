// while_grad.cc - the backward of a `while` node: checkpoints of the carried values, then a sweep
// over the iterations in reverse that recomputes each one's inputs from the nearest checkpoint.
//
// The trip count is known only when the loop runs, and the IR's shapes are static, so the
// checkpoints live in a fixed number S of slots per carried value ([S, *shape] tensors written in
// place). Two levels of them make the sweep linear for loops of up to S*S iterations:
//   n      = the number of iterations (the forward loop, given a counter);
//   stride = ceil(n / S); level 1 holds c_0, c_stride, c_2*stride, ... (the loop run once more);
//   for each segment j, last to first:
//     level 2 holds every s2-th state of the segment, s2 = ceil(segment length / S), recomputed
//     from level-1 slot j;
//     for each iteration k of the segment, last to first:
//       c_k = the body applied (k mod s2) times to level-2 slot k / s2;  g = vjp(body at c_k)(g)
//   d c_0 = g
// For n <= S*S that is about 3n body evaluations and n vjps (PyNative keeps all n states on its
// tape instead). S is 64, fewer where the slots of large carried values would pass a memory
// budget; with one slot it degenerates to recomputing every c_k from c_0 (n*n/2 evaluations).
// Loops whose carried values have no static shape (or are absent) take that way directly.
#include <algorithm>

#include "autodiff/reverse_internal.h"

namespace kiln::autodiff {
namespace {

constexpr int64_t kMaxSlots = 64;
// Both levels' slots together, per loop. PyNative's tape keeps every state, so this only bounds
// how far the compiled backward's memory may exceed a single state's.
constexpr int64_t kSlotBudgetBytes = int64_t{64} << 20;

const TensorMeta kI64{DType::Int64, {}};

ir::ValueRef ScalarI64(ir::Builder& b, int64_t value) {
  Tensor t = Tensor::Empty({}, DType::Int64);
  *t.data<int64_t>() = value;
  return b.Const(t);
}

std::vector<ir::ValueRef> Params(ir::Builder& b, const std::vector<TensorMeta>& metas) {
  std::vector<ir::ValueRef> out;
  for (const auto& m : metas) out.push_back(b.Param(m));
  return out;
}

std::vector<ir::ValueRef> Slice(const std::vector<ir::ValueRef>& v, size_t begin, size_t count) {
  return std::vector<ir::ValueRef>(v.begin() + begin, v.begin() + begin + count);
}

std::vector<TensorMeta> Concat(std::vector<TensorMeta> a, const std::vector<TensorMeta>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<ir::ValueRef> Concat(std::vector<ir::ValueRef> a, const std::vector<ir::ValueRef>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The carried values a loop body changes: the others (captured weights, inputs read by index)
// need no slots, every state has c_0's.
std::vector<size_t> Changed(const ir::Func& body) {
  std::vector<size_t> changed;
  for (size_t k = 0; k < body.results.size(); ++k)
    if (body.results[k].node != -1 || body.results[k].index != static_cast<int>(k))
      changed.push_back(k);
  return changed;
}

// Slots per level for the changed values; 0 when one of them cannot be stored (no static shape).
int64_t SlotsFor(const std::vector<TensorMeta>& carried, const std::vector<size_t>& changed) {
  int64_t bytes = 0;
  for (size_t k : changed) {
    const TensorMeta& m = carried[k];
    if (!m.present) return 0;
    int64_t numel = 1;
    for (int64_t d : m.shape) {
      if (d < 0) return 0;
      if (d > 0 && numel > kSlotBudgetBytes / d) return 1;  // one value alone exceeds the budget
      numel *= d;
    }
    bytes += numel * static_cast<int64_t>(ItemSize(m.dtype));
    if (bytes > kSlotBudgetBytes) return 1;
  }
  return std::clamp<int64_t>(kSlotBudgetBytes / std::max<int64_t>(1, 2 * bytes), 1, kMaxSlots);
}

// The carried values of a generated loop, in named groups: Add returns a group's first position.
struct Layout {
  std::vector<TensorMeta> metas;
  size_t Add(const std::vector<TensorMeta>& group) {
    const size_t at = metas.size();
    metas.insert(metas.end(), group.begin(), group.end());
    return at;
  }
};

class WhileGradBuilder {
 public:
  WhileGradBuilder(ir::Module& module, const ir::Node& node)
      : module_(module),
        node_(node),
        carried_(node.outputs),
        n_(carried_.size()),
        changed_(Changed(*module.Find(node.callees[1]))),
        slots_(SlotsFor(carried_, changed_)) {
    std::vector<bool> is_changed(n_, false);
    for (size_t k : changed_) {
      is_changed[k] = true;
      Shape shape = {slots_};
      shape.insert(shape.end(), carried_[k].shape.begin(), carried_[k].shape.end());
      slot_metas_.push_back({carried_[k].dtype, shape});
    }
    for (size_t k = 0; k < n_; ++k) {
      if (is_changed[k]) continue;
      kept_.push_back(k);
      kept_metas_.push_back(carried_[k]);
    }
  }

  std::vector<ir::ValueRef> Build(ir::Builder& parent, int index,
                                  const std::vector<ir::ValueRef>& out_grads) {
    BuildReplay();
    body_grad_ = BranchGradient(module_, node_.callees[1]);
    std::vector<ir::ValueRef> c0(node_.inputs.begin(), node_.inputs.end());
    ir::ValueRef trips = CountInForward(parent.func(), index);
    std::vector<ir::ValueRef> g;
    for (size_t k = 0; k < n_; ++k) {
      const TensorMeta& m = carried_[k];
      g.push_back(out_grads[k].is_none() ? FilledLike(parent, {index, static_cast<int>(k)}, m, 0.0)
                                         : out_grads[k]);
    }
    return slots_ > 0 ? Checkpointed(parent, c0, trips, g) : FromStart(parent, c0, trips, g);
  }

 private:
  ir::Func& AddFunc(const std::string& stem, std::string& name) {
    name = module_.FreshName(node_.callees[1] + stem);
    return module_.AddFunc(name);
  }

  ir::ValueRef Op(ir::Builder& b, OpKind op, std::vector<ir::ValueRef> inputs, Attrs attrs = {}) {
    return b.Op1(op, std::move(inputs), std::move(attrs), node_.loc);
  }
  ir::ValueRef I64(ir::Builder& b, int64_t value) { return ScalarI64(b, value); }
  ir::ValueRef CeilDiv(ir::Builder& b, ir::ValueRef a, ir::ValueRef d) {
    return Op(b, OpKind::FloorDiv,
              {Op(b, OpKind::Add, {a, Op(b, OpKind::Sub, {d, I64(b, 1)})}), d});
  }

  // A loop's cond function `k >= 0` over the carried values of `layout`, k first.
  std::string CountdownCond(const Layout& layout) {
    std::string name;
    ir::Builder b(module_, AddFunc("_backward_cond", name));
    auto p = Params(b, layout.metas);
    b.Return({Op(b, OpKind::GreaterEqual, {p[0], I64(b, 0)})});
    return name;
  }

  // n, counted by the forward loop itself: its node becomes a call of a new function that runs
  // while(c, i) cond @C(c) body (@B(c), i + 1) from i = 0 and returns i as one more output.
  ir::ValueRef CountInForward(ir::Func& func, int index) {
    std::string cond, body, counted;
    const auto metas = Concat(carried_, {kI64});
    {
      ir::Builder b(module_, AddFunc("_count_cond", cond));
      auto p = Params(b, metas);
      b.Return(b.Call(node_.callees[0], Slice(p, 0, n_)));
    }
    {
      ir::Builder b(module_, AddFunc("_count", body));
      auto p = Params(b, metas);
      auto next = b.Call(node_.callees[1], Slice(p, 0, n_));
      next.push_back(Op(b, OpKind::Add, {p[n_], I64(b, 1)}));
      b.Return(next);
    }
    {
      ir::Builder b(module_, AddFunc("_counted", counted));
      std::vector<ir::ValueRef> p;
      for (const auto& v : node_.inputs) p.push_back(b.Param(func.meta(v)));
      b.Return(b.While(Concat(p, {I64(b, 0)}), cond, body, node_.loc));
    }
    ir::Node& forward = func.nodes[index];
    forward.kind = ir::NodeKind::Call;
    forward.callees = {counted};
    forward.outputs.push_back(kI64);
    return {index, static_cast<int>(n_)};
  }

  // The loop that applies the body `steps` times: while(c, i, steps) cond i < steps.
  void BuildReplay() {
    const auto metas = Concat(carried_, {kI64, kI64});
    {
      ir::Builder b(module_, AddFunc("_replay_cond", replay_cond_));
      auto p = Params(b, metas);
      b.Return({Op(b, OpKind::Less, {p[n_], p[n_ + 1]})});
    }
    ir::Builder b(module_, AddFunc("_replay", replay_body_));
    auto p = Params(b, metas);
    auto next = b.Call(node_.callees[1], Slice(p, 0, n_));
    next.push_back(Op(b, OpKind::Add, {p[n_], I64(b, 1)}));
    next.push_back(p[n_ + 1]);
    b.Return(next);
  }
  std::vector<ir::ValueRef> Replay(ir::Builder& b, const std::vector<ir::ValueRef>& c,
                                   ir::ValueRef steps) {
    auto init = Concat(c, {I64(b, 0), steps});
    return Slice(b.While(init, replay_cond_, replay_body_, node_.loc), 0, n_);
  }

  // Fresh (zero) slots: one [S, *shape] tensor per changed value.
  std::vector<ir::ValueRef> NewSlots(ir::Builder& b) {
    std::vector<ir::ValueRef> slots;
    for (const auto& m : slot_metas_)
      slots.push_back(b.Op1(OpKind::Fill, {}, {m.shape, 0.0, m.dtype}, node_.loc));
    return slots;
  }

  // State `index` of the slots, with the unchanged values `kept`, as the loop's carried values.
  std::vector<ir::ValueRef> Read(ir::Builder& b, const std::vector<ir::ValueRef>& slots,
                                 ir::ValueRef index, const std::vector<ir::ValueRef>& kept) {
    std::vector<ir::ValueRef> c(n_);
    for (size_t q = 0; q < changed_.size(); ++q)
      c[changed_[q]] = Op(b, OpKind::AdvancedIndex, {slots[q], index}, {Shape{0}});
    for (size_t q = 0; q < kept_.size(); ++q) c[kept_[q]] = kept[q];
    return c;
  }
  std::vector<ir::ValueRef> Kept(const std::vector<ir::ValueRef>& c) {
    std::vector<ir::ValueRef> kept;
    for (size_t k : kept_) kept.push_back(c[k]);
    return kept;
  }

  // `slots` written in place with c_0, c_stride, ... of a run of `count` iterations from c:
  // while(c, j, slots, stride, count) cond j*stride < count. Returns the slots.
  std::vector<ir::ValueRef> Record(ir::Builder& parent, const std::vector<ir::ValueRef>& c,
                                   const std::vector<ir::ValueRef>& slots, ir::ValueRef stride,
                                   ir::ValueRef count) {
    Layout l;
    const size_t at_c = l.Add(carried_), at_j = l.Add({kI64}), at_slots = l.Add(slot_metas_),
                 at_stride = l.Add({kI64}), at_count = l.Add({kI64});
    if (record_cond_.empty()) {
      {
        ir::Builder b(module_, AddFunc("_record_cond", record_cond_));
        auto p = Params(b, l.metas);
        b.Return({Op(b, OpKind::Less, {Op(b, OpKind::Mul, {p[at_j], p[at_stride]}), p[at_count]})});
      }
      ir::Builder b(module_, AddFunc("_record", record_body_));
      auto p = Params(b, l.metas);
      const ir::ValueRef j = p[at_j], step = p[at_stride], total = p[at_count];
      std::vector<ir::ValueRef> written;
      for (size_t q = 0; q < changed_.size(); ++q)
        written.push_back(Op(b, OpKind::IndexPut, {p[at_slots + q], p[at_c + changed_[q]], j},
                             {Shape{0}, false}));
      // On to the next checkpoint, or nowhere after the last one (that state is never read).
      ir::ValueRef after = Op(
          b, OpKind::Sub, {Op(b, OpKind::Sub, {total, I64(b, 1)}), Op(b, OpKind::Mul, {j, step})});
      ir::ValueRef more =
          Op(b, OpKind::Cast, {Op(b, OpKind::GreaterEqual, {after, step})}, {DType::Int64});
      auto next = Replay(b, Slice(p, at_c, n_), Op(b, OpKind::Mul, {step, more}));
      next.push_back(Op(b, OpKind::Add, {j, I64(b, 1)}));
      b.Return(Concat(Concat(next, written), {step, total}));
    }
    auto init = Concat(Concat(Concat(c, {I64(parent, 0)}), slots), {stride, count});
    return Slice(parent.While(init, record_cond_, record_body_, node_.loc), at_slots,
                 changed_.size());
  }

  std::vector<ir::ValueRef> Checkpointed(ir::Builder& parent, const std::vector<ir::ValueRef>& c0,
                                         ir::ValueRef trips, const std::vector<ir::ValueRef>& g) {
    const size_t nv = changed_.size(), nk = kept_.size();
    // The iterations of one segment, last to first: while(k, g, slots2, kept, s2) cond k >= 0.
    Layout in;
    const size_t in_g = (in.Add({kI64}), in.Add(carried_)), in_slots = in.Add(slot_metas_),
                 in_kept = in.Add(kept_metas_), in_s2 = in.Add({kI64});
    const std::string inner_cond = CountdownCond(in);
    std::string inner_body;
    {
      ir::Builder b(module_, AddFunc("_backward", inner_body));
      auto p = Params(b, in.metas);
      const ir::ValueRef k = p[0], s2 = p[in_s2];
      auto start =
          Read(b, Slice(p, in_slots, nv), Op(b, OpKind::FloorDiv, {k, s2}), Slice(p, in_kept, nk));
      auto ck = Replay(b, start, Op(b, OpKind::Mod, {k, s2}));
      auto g_prev = b.Call(body_grad_, Concat(ck, Slice(p, in_g, n_)), node_.loc);
      auto next = Concat({Op(b, OpKind::Sub, {k, I64(b, 1)})}, g_prev);
      b.Return(Concat(next, Slice(p, in_slots, nv + nk + 1)));
    }
    // The segments, last to first: while(j, g, slots1, slots2, kept, stride, n) cond j >= 0.
    // The level-2 slots are allocated once and rewritten for each segment.
    Layout out;
    const size_t out_g = (out.Add({kI64}), out.Add(carried_)), out_slots1 = out.Add(slot_metas_),
                 out_slots2 = out.Add(slot_metas_), out_kept = out.Add(kept_metas_),
                 out_stride = out.Add({kI64}), out_n = out.Add({kI64});
    const std::string outer_cond = CountdownCond(out);
    std::string outer_body;
    {
      ir::Builder b(module_, AddFunc("_segments", outer_body));
      auto p = Params(b, out.metas);
      const ir::ValueRef j = p[0], stride = p[out_stride], n = p[out_n];
      const auto kept = Slice(p, out_kept, nk);
      ir::ValueRef length = Op(b, OpKind::Minimum,
                               {stride, Op(b, OpKind::Sub, {n, Op(b, OpKind::Mul, {j, stride})})});
      ir::ValueRef s2 = Op(b, OpKind::Maximum, {I64(b, 1), CeilDiv(b, length, I64(b, slots_))});
      auto level2 = Record(b, Read(b, Slice(p, out_slots1, nv), j, kept), Slice(p, out_slots2, nv),
                           s2, length);
      auto init = Concat({Op(b, OpKind::Sub, {length, I64(b, 1)})}, Slice(p, out_g, n_));
      init = Concat(Concat(Concat(init, level2), kept), {s2});
      auto g_prev = Slice(b.While(init, inner_cond, inner_body, node_.loc), in_g, n_);
      auto next = Concat({Op(b, OpKind::Sub, {j, I64(b, 1)})}, g_prev);
      next = Concat(Concat(next, Slice(p, out_slots1, nv)), level2);
      b.Return(Concat(Concat(next, kept), {stride, n}));
    }
    ir::ValueRef stride =
        Op(parent, OpKind::Maximum, {I64(parent, 1), CeilDiv(parent, trips, I64(parent, slots_))});
    auto level1 = Record(parent, c0, NewSlots(parent), stride, trips);
    ir::ValueRef last = Op(parent, OpKind::Sub, {CeilDiv(parent, trips, stride), I64(parent, 1)});
    auto init = Concat(Concat(Concat({last}, g), level1), NewSlots(parent));
    init = Concat(Concat(init, Kept(c0)), {stride, trips});
    return Slice(parent.While(init, outer_cond, outer_body, node_.loc), out_g, n_);
  }

  // Without slots: for k = n-1 .. 0, c_k recomputed from c_0 (k body evaluations each).
  std::vector<ir::ValueRef> FromStart(ir::Builder& parent, const std::vector<ir::ValueRef>& c0,
                                      ir::ValueRef trips, const std::vector<ir::ValueRef>& g) {
    Layout l;
    const size_t at_g = (l.Add({kI64}), l.Add(carried_)), at_c0 = l.Add(carried_);
    const std::string cond = CountdownCond(l);
    std::string body;
    {
      ir::Builder b(module_, AddFunc("_backward", body));
      auto p = Params(b, l.metas);
      auto ck = Replay(b, Slice(p, at_c0, n_), p[0]);
      auto g_prev = b.Call(body_grad_, Concat(ck, Slice(p, at_g, n_)), node_.loc);
      auto next = Concat({Op(b, OpKind::Sub, {p[0], I64(b, 1)})}, g_prev);
      b.Return(Concat(next, Slice(p, at_c0, n_)));
    }
    auto init = Concat(Concat({Op(parent, OpKind::Sub, {trips, I64(parent, 1)})}, g), c0);
    return Slice(parent.While(init, cond, body, node_.loc), at_g, n_);
  }

  ir::Module& module_;
  const ir::Node& node_;
  const std::vector<TensorMeta> carried_;
  const size_t n_;
  const std::vector<size_t> changed_;  // carried values the body changes: they get slots
  const int64_t slots_;
  std::vector<TensorMeta> slot_metas_;
  std::vector<size_t> kept_;  // the others
  std::vector<TensorMeta> kept_metas_;
  std::string body_grad_, replay_cond_, replay_body_, record_cond_, record_body_;
};

}  // namespace

std::vector<ir::ValueRef> WhileGradient(ir::Module& module, ir::Builder& parent, int index,
                                        const std::vector<ir::ValueRef>& out_grads) {
  const ir::Node node = parent.func().nodes[index];  // a copy: the node is rewritten
  return WhileGradBuilder(module, node).Build(parent, index, out_grads);
}

}  // namespace kiln::autodiff
