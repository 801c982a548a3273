// reverse.cc - the backward sweep over IR nodes with a GradBuilder that emits nodes.
//
// 1. Seed the targets' gradients (ones unless a sens is given).
// 2. Walk the forward nodes from last to `begin`; for an op node whose outputs received
//    gradients, run its registry rule through GraphGradBuilder, which emits the rule's ops as new
//    nodes of the same function, and add the results into the inputs' gradients.
// 3. Read off the sources' gradients, emitting zeros where none arrived.
// An `if` node's backward is another `if` over per-branch gradient functions (BranchGradient);
// a `while` node's backward is a loop over its iterations in reverse (while_grad.cc).
#include "autodiff/reverse.h"

#include <map>
#include <set>

#include "autodiff/reverse_internal.h"
#include "core/error.h"
#include "ops/grad.h"

namespace kiln::autodiff {
namespace {

using Key = std::pair<int, int>;  // (node, output) of a ValueRef; params use node -1
Key KeyOf(const ir::ValueRef& v) { return {v.node, v.index}; }

bool Differentiable(const TensorMeta& m) { return m.present && IsFloating(m.dtype); }

class GraphGradBuilder final : public GradBuilder {
 public:
  GraphGradBuilder(ir::Builder& b, const ir::Node& node, std::vector<ir::ValueRef> out_grads,
                   std::vector<bool> wants, ir::SourceLoc loc)
      : b_(b), node_(node), wants_(std::move(wants)), loc_(std::move(loc)) {
    for (const auto& v : node.inputs) inputs_.push_back(Add(v));
    for (size_t k = 0; k < node.outputs.size(); ++k) outputs_.push_back(-1);
    out_grads_ = std::move(out_grads);
  }
  void SetOutputRefs(int node_index) {
    for (size_t k = 0; k < node_.outputs.size(); ++k)
      outputs_[k] = Add({node_index, static_cast<int>(k)});
  }

  int num_inputs() const override { return static_cast<int>(inputs_.size()); }
  int num_outputs() const override { return static_cast<int>(outputs_.size()); }
  GradVar input(int i) override { return {inputs_[i]}; }
  GradVar output(int i) override { return {outputs_[i]}; }
  bool has_out_grad(int i) const override { return !out_grads_[i].is_none(); }
  bool wants_input_grad(int i) const override { return wants_[i]; }
  const Attrs& attrs() const override { return node_.attrs; }
  TensorMeta meta(GradVar v) override { return b_.func().meta(table_.at(v.id)); }

  GradVar out_grad(int i) override {
    if (out_grads_[i].is_none())
      out_grads_[i] = FilledLike(b_, table_.at(outputs_[i]), node_.outputs[i], 0.0, loc_);
    return {Add(out_grads_[i])};
  }

  std::vector<GradVar> Emit(OpKind kind, const std::vector<GradVar>& inputs, Attrs attrs) override {
    std::vector<ir::ValueRef> refs;
    for (GradVar v : inputs) refs.push_back(v.defined() ? table_.at(v.id) : ir::ValueRef::None());
    std::vector<GradVar> out;
    for (const auto& r : b_.Op(kind, refs, std::move(attrs), loc_)) out.push_back({Add(r)});
    return out;
  }

  GradVar Scalar(double value) override {
    Tensor t = Tensor::Empty({}, DType::Float64);
    *t.data<double>() = value;
    t.impl()->wrapped_number = true;
    return {Add(b_.Const(t, loc_))};
  }

  ir::ValueRef ref(GradVar v) const { return table_.at(v.id); }

 private:
  int Add(const ir::ValueRef& v) {
    table_.push_back(v);
    return static_cast<int>(table_.size()) - 1;
  }

  ir::Builder& b_;
  const ir::Node& node_;
  std::vector<bool> wants_;
  ir::SourceLoc loc_;
  std::vector<ir::ValueRef> table_, out_grads_;
  std::vector<int> inputs_, outputs_;
};

}  // namespace

ir::ValueRef FilledLike(ir::Builder& b, const ir::ValueRef& like, const TensorMeta& m, double value,
                        const ir::SourceLoc& loc) {
  if (IsStaticShape(m.shape)) return b.Op1(OpKind::Fill, {}, {m.shape, value, m.dtype}, loc);
  return b.Op1(OpKind::FillLike, {like}, {value, m.dtype}, loc);
}

// The backward of one branch of an `if`: a function taking the branch's params and the gradients
// of its results, which recomputes the branch (no forward values are kept) and returns the
// gradients of its params. Recomputing trades time for memory and keeps regions self-contained.
std::string BranchGradient(ir::Module& module, const std::string& branch_name) {
  const ir::Func branch = *module.Find(branch_name);  // a copy: adding functions moves storage
  std::string name = module.FreshName(branch_name + "_grad");
  ir::Func& f = module.AddFunc(name);
  f.params = branch.params;
  f.param_names.assign(branch.params.size(), "");
  f.nodes = branch.nodes;  // params keep their indices, so the copied nodes stay valid
  std::vector<ir::ValueRef> sens;
  for (const auto& m : branch.result_metas()) {
    f.params.push_back(m);
    f.param_names.push_back("");
    sens.push_back({-1, static_cast<int>(f.params.size()) - 1});
  }
  std::vector<ir::ValueRef> sources;
  for (size_t i = 0; i < branch.params.size(); ++i) sources.push_back({-1, static_cast<int>(i)});
  std::vector<ir::ValueRef> grads =
      Gradient(module, *module.Find(name), 0, branch.results, sens, sources);
  module.Find(name)->results = grads;
  return name;
}

std::vector<ir::ValueRef> Gradient(ir::Module& module, ir::Func& func, int begin,
                                   const std::vector<ir::ValueRef>& targets,
                                   const std::vector<ir::ValueRef>& sens,
                                   const std::vector<ir::ValueRef>& sources) {
  ir::Builder b(module, func);
  const int end = static_cast<int>(func.nodes.size());
  std::map<Key, ir::ValueRef> grads;
  auto accumulate = [&](const ir::ValueRef& v, ir::ValueRef g) {
    TensorMeta want = func.meta(v);
    if (func.meta(g).dtype != want.dtype) g = b.Op1(OpKind::Cast, {g}, {want.dtype});
    auto it = grads.find(KeyOf(v));
    if (it == grads.end()) {
      grads.emplace(KeyOf(v), g);
    } else {
      it->second = b.Op1(OpKind::Add, {it->second, g});
    }
  };
  for (size_t i = 0; i < targets.size(); ++i) {
    TensorMeta m = func.meta(targets[i]);
    if (!Differentiable(m)) continue;
    ir::ValueRef seed =
        i < sens.size() && !sens[i].is_none() ? sens[i] : FilledLike(b, targets[i], m, 1.0);
    accumulate(targets[i], seed);
  }
  // A source may be a value computed inside the region (the cut points of backward hooks):
  // its gradient is complete when its node is reached, and kept for the result.
  std::set<Key> source_keys;
  for (const auto& s : sources) source_keys.insert(KeyOf(s));
  std::map<Key, ir::ValueRef> kept;
  for (int n = end - 1; n >= begin; --n) {
    const ir::Node node = func.nodes[n];  // a copy: emitting appends to func.nodes
    std::vector<ir::ValueRef> out_grads(node.outputs.size(), ir::ValueRef::None());
    bool any = false;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      auto it = grads.find({n, static_cast<int>(k)});
      if (it == grads.end()) continue;
      out_grads[k] = it->second;
      if (source_keys.count(it->first)) kept.emplace(it->first, it->second);
      grads.erase(it);
      any = true;
    }
    if (!any || node.kind == ir::NodeKind::Const) continue;  // constants depend on nothing
    // The inputs of a region's gradient function: its args, then its results' gradients.
    auto with_out_grads = [&](std::vector<ir::ValueRef> args) {
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        const TensorMeta& m = node.outputs[k];
        args.push_back(out_grads[k].is_none() ? FilledLike(b, {n, static_cast<int>(k)}, m, 0.0)
                                              : out_grads[k]);
      }
      return args;
    };
    if (node.kind == ir::NodeKind::If) {
      // if c(args) then @t else @e  =>  if c(args, dys) then @t_grad else @e_grad -> d(args)
      std::vector<ir::ValueRef> args(node.inputs.begin() + 1, node.inputs.end());
      std::string then_grad = BranchGradient(module, node.callees[0]);
      std::string else_grad = BranchGradient(module, node.callees[1]);
      std::vector<ir::ValueRef> in_grads =
          b.If(node.inputs[0], with_out_grads(args), then_grad, else_grad, node.loc);
      for (size_t k = 0; k < args.size(); ++k)
        if (Differentiable(func.meta(args[k]))) accumulate(args[k], in_grads[k]);
      continue;
    }
    if (node.kind == ir::NodeKind::Call) {
      // call @f(args)  =>  call @f_grad(args, dys) -> d(args); a while loop's gradient calls the
      // loop body, so this is what differentiates it a second time.
      std::vector<ir::ValueRef> in_grads =
          b.Call(BranchGradient(module, node.callees[0]), with_out_grads(node.inputs), node.loc);
      for (size_t k = 0; k < node.inputs.size(); ++k)
        if (Differentiable(func.meta(node.inputs[k]))) accumulate(node.inputs[k], in_grads[k]);
      continue;
    }
    if (node.kind == ir::NodeKind::While) {
      auto in_grads = WhileGradient(module, b, n, out_grads);
      for (size_t k = 0; k < node.inputs.size(); ++k)
        if (Differentiable(func.meta(node.inputs[k]))) accumulate(node.inputs[k], in_grads[k]);
      continue;
    }
    KILN_CHECK(node.kind != ir::NodeKind::Interpret, Type,
               "grad in Graph mode: the gradient would have to flow through Python code that runs "
               "when the graph runs (",
               node.text, ", ", node.loc.file, ":", node.loc.line,
               "): values computed in Python have no gradient. Compute them with kiln operations, "
               "or cut the gradient with ops.stop_gradient");
    KILN_CHECK(node.kind == ir::NodeKind::Op, NotImplemented,
               "grad in Graph mode: the gradient would have to flow through a ",
               ir::NodeKindName(node.kind), " node (line ", node.loc.line,
               "), which has none — compute this gradient in PyNative mode");
    const OpDef& def = GetOpDef(node.op);
    KILN_CHECK(def.grad != nullptr, NotImplemented, "grad: op '", def.name,
               "' has no gradient rule");
    std::vector<bool> wants;
    for (const auto& v : node.inputs) wants.push_back(!v.is_none() && Differentiable(func.meta(v)));
    GraphGradBuilder g(b, node, out_grads, wants, node.loc);
    g.SetOutputRefs(n);
    std::vector<GradVar> in_grads = def.grad(g);
    for (size_t k = 0; k < node.inputs.size() && k < in_grads.size(); ++k) {
      if (!wants[k] || !in_grads[k].defined()) continue;
      accumulate(node.inputs[k], g.ref(in_grads[k]));
    }
  }
  std::vector<ir::ValueRef> result;
  for (const auto& s : sources) {
    auto in_region = kept.find(KeyOf(s));
    if (in_region != kept.end()) {
      result.push_back(in_region->second);
      continue;
    }
    auto it = grads.find(KeyOf(s));
    if (it != grads.end()) {
      result.push_back(it->second);
      continue;
    }
    result.push_back(FilledLike(b, s, func.meta(s), 0.0));
  }
  return result;
}

}  // namespace kiln::autodiff
