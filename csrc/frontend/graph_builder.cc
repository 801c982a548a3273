// graph_builder.cc - region bookkeeping and capture of outer values for the front end.
#include "frontend/graph_builder.h"

#include "autodiff/reverse.h"
#include "core/error.h"

namespace kiln::frontend {

GraphBuilder::GraphBuilder() {
  module_.AddFunc("main");
  stack_.push_back({0, -1});
}

TensorMeta GraphBuilder::Meta(const GValue& v) const {
  return module_.funcs().at(v.func)->meta(v.ref);
}

GValue GraphBuilder::Input(const TensorMeta& meta, const std::string& name) {
  ir::Func& entry = FuncAt(0);
  ir::Builder b(module_, entry);
  return {0, b.Param(meta, name)};
}

void GraphBuilder::SetOutputs(const std::vector<GValue>& outputs) {
  KILN_CHECK(stack_.size() == 1, Runtime, "graph builder: outputs set inside a region");
  std::vector<ir::ValueRef> refs;
  for (const auto& v : outputs) refs.push_back(Resolve(v));
  FuncAt(0).results = refs;
}

std::vector<GValue> GraphBuilder::Wrap(const std::vector<ir::ValueRef>& refs) {
  std::vector<GValue> out;
  for (auto r : refs) out.push_back({current_func(), r});
  return out;
}

GValue GraphBuilder::Const(const Tensor& value, const ir::SourceLoc& loc) {
  ir::Builder b(module_, FuncAt(current_func()));
  return {current_func(), b.Const(value, loc)};
}

std::vector<GValue> GraphBuilder::Op(OpKind op, const std::vector<GValue>& inputs,
                                     const std::vector<bool>& absent, Attrs attrs,
                                     const ir::SourceLoc& loc) {
  std::vector<ir::ValueRef> refs;
  for (size_t i = 0; i < inputs.size(); ++i)
    refs.push_back(i < absent.size() && absent[i] ? ir::ValueRef::None() : Resolve(inputs[i]));
  ir::Builder b(module_, FuncAt(current_func()));
  return Wrap(b.Op(op, refs, std::move(attrs), loc));
}

void GraphBuilder::Print(const std::string& format, const std::vector<GValue>& inputs,
                         const ir::SourceLoc& loc) {
  std::vector<ir::ValueRef> refs;
  for (const auto& v : inputs) refs.push_back(Resolve(v));
  ir::Builder(module_, FuncAt(current_func())).Print(format, refs, loc);
}

void GraphBuilder::Raise(const std::string& type, const std::string& format,
                         const std::vector<GValue>& inputs, const ir::SourceLoc& loc) {
  std::vector<ir::ValueRef> refs;
  for (const auto& v : inputs) refs.push_back(Resolve(v));
  ir::Builder(module_, FuncAt(current_func())).Raise(type, format, refs, loc);
}

std::vector<GValue> GraphBuilder::Interpret(const std::string& key, const std::string& what,
                                            const std::vector<GValue>& inputs,
                                            const std::vector<TensorMeta>& outputs,
                                            const ir::SourceLoc& loc) {
  std::vector<ir::ValueRef> refs;
  for (const auto& v : inputs) refs.push_back(Resolve(v));
  return Wrap(
      ir::Builder(module_, FuncAt(current_func())).Interpret(key, what, refs, outputs, loc));
}

std::vector<GValue> GraphBuilder::Inline(const ir::Module& callee, const std::string& prefix,
                                         const std::vector<GValue>& params,
                                         const ir::SourceLoc& loc) {
  const ir::Func& entry = callee.entry();
  KILN_CHECK(params.size() == entry.params.size(), Type, "graph: the inlined model takes ",
             entry.params.size(), " values, got ", params.size());
  std::map<std::string, std::string> renamed;
  for (const auto& f : callee.funcs()) renamed[f->name] = module_.FreshName(prefix + f->name);
  for (const auto& f : callee.funcs()) {
    ir::Func& copy = module_.AddFunc(renamed.at(f->name));
    copy.param_names = f->param_names;
    copy.params = f->params;
    copy.nodes = f->nodes;
    copy.results = f->results;
    for (ir::Node& node : copy.nodes) {
      const bool calls = node.kind == ir::NodeKind::If || node.kind == ir::NodeKind::While ||
                         node.kind == ir::NodeKind::Call;
      if (calls)
        for (std::string& name : node.callees) name = renamed.at(name);
    }
  }
  std::vector<ir::ValueRef> refs;
  for (const auto& v : params) refs.push_back(Resolve(v));
  return Wrap(ir::Builder(module_, FuncAt(current_func()))
                  .Call(renamed.at(entry.name), std::move(refs), loc));
}

std::vector<GValue> GraphBuilder::Gradient(int mark, const std::vector<GValue>& targets,
                                           const std::vector<GValue>& sens,
                                           const std::vector<bool>& sens_absent,
                                           const std::vector<GValue>& sources) {
  std::vector<ir::ValueRef> t, s, src;
  for (const auto& v : targets) t.push_back(Resolve(v));
  for (size_t i = 0; i < sens.size(); ++i)
    s.push_back(i < sens_absent.size() && sens_absent[i] ? ir::ValueRef::None() : Resolve(sens[i]));
  for (const auto& v : sources) src.push_back(Resolve(v));
  return Wrap(autodiff::Gradient(module_, FuncAt(current_func()), mark, t, s, src));
}

void GraphBuilder::Truncate(int mark) {
  ir::Func& f = FuncAt(current_func());
  KILN_CHECK(mark >= 0 && mark <= static_cast<int>(f.nodes.size()), Runtime,
             "graph builder: bad truncation mark");
  f.nodes.resize(mark);
}

int GraphBuilder::NewGroup() {
  groups_.push_back({current_func(), {}, {}, {}});
  return static_cast<int>(groups_.size()) - 1;
}

std::vector<GValue> GraphBuilder::BeginRegion(int group, const std::string& prefix,
                                              const std::vector<TensorMeta>& leading) {
  Group& g = groups_.at(group);
  KILN_CHECK(g.parent_func == current_func(), Runtime,
             "graph builder: region opened outside its parent");
  ir::Func& f = module_.AddFunc(module_.FreshName(prefix));
  int index = static_cast<int>(module_.funcs().size()) - 1;
  ir::Builder b(module_, f);
  std::vector<GValue> params;
  for (const auto& m : leading) params.push_back({index, b.Param(m)});
  // Captures the group already has become parameters here too, in the shared order.
  for (const auto& c : g.captures) b.Param(Meta(c));
  for (size_t k = 0; k < g.captures.size(); ++k) {
    const GValue& c = g.captures[k];
    captured_[{index, c.func, c.ref.node, c.ref.index}] = static_cast<int>(leading.size() + k);
  }
  g.funcs.push_back(index);
  g.leading.push_back(leading.size());
  stack_.push_back({index, group});
  return params;
}

void GraphBuilder::EndRegion(const std::vector<GValue>& results) {
  KILN_CHECK(stack_.size() > 1, Runtime, "graph builder: no region to end");
  std::vector<ir::ValueRef> refs;
  for (const auto& v : results) refs.push_back(Resolve(v));
  FuncAt(current_func()).results = refs;
  stack_.pop_back();
}

ir::ValueRef GraphBuilder::Resolve(const GValue& v) { return ResolveIn(stack_.size() - 1, v); }

ir::ValueRef GraphBuilder::ResolveIn(size_t depth, const GValue& v) {
  const Frame& frame = stack_.at(depth);
  if (v.func == frame.func || v.ref.is_none()) return v.ref;
  KILN_CHECK(depth > 0, Runtime, "graph builder: a value of a finished region was used outside it");
  auto key = std::make_tuple(frame.func, v.func, v.ref.node, v.ref.index);
  auto it = captured_.find(key);
  if (it != captured_.end()) return {-1, it->second};
  // Make sure the parent can see v, then add it to this region's group.
  Group& g = groups_.at(frame.group);
  ResolveIn(depth - 1, v);
  g.captures.push_back(v);
  size_t k = g.captures.size() - 1;
  for (size_t i = 0; i < g.funcs.size(); ++i) {
    ir::Func& f = FuncAt(g.funcs[i]);
    ir::Builder(module_, f).Param(Meta(v));
    captured_[{g.funcs[i], v.func, v.ref.node, v.ref.index}] = static_cast<int>(g.leading[i] + k);
  }
  return {-1, captured_.at(key)};
}

std::vector<GValue> GraphBuilder::If(const GValue& cond, int group, const ir::SourceLoc& loc) {
  Group& g = groups_.at(group);
  KILN_CHECK(g.funcs.size() == 2, Runtime, "graph builder: an if needs two branches");
  std::vector<ir::ValueRef> inputs;
  for (const auto& c : g.captures) inputs.push_back(Resolve(c));
  ir::Builder b(module_, FuncAt(current_func()));
  auto outs = b.If(Resolve(cond), inputs, FuncAt(g.funcs[0]).name, FuncAt(g.funcs[1]).name, loc);
  return Wrap(outs);
}

std::vector<GValue> GraphBuilder::While(const std::vector<GValue>& carried, int group,
                                        const ir::SourceLoc& loc) {
  Group& g = groups_.at(group);
  KILN_CHECK(g.funcs.size() == 2, Runtime, "graph builder: a while needs cond and body");
  // Captured values ride along as loop-carried values the body returns unchanged.
  ir::Func& body = FuncAt(g.funcs[1]);
  for (size_t k = 0; k < g.captures.size(); ++k)
    body.results.push_back({-1, static_cast<int>(carried.size() + k)});
  std::vector<ir::ValueRef> inputs;
  for (const auto& v : carried) inputs.push_back(Resolve(v));
  for (const auto& c : g.captures) inputs.push_back(Resolve(c));
  ir::Builder b(module_, FuncAt(current_func()));
  auto outs = b.While(inputs, FuncAt(g.funcs[0]).name, body.name, loc);
  outs.resize(carried.size());
  return Wrap(outs);
}

}  // namespace kiln::frontend
