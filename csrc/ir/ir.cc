// ir.cc - Module bookkeeping and the typed Builder.
#include "ir/ir.h"

#include <algorithm>

#include "core/error.h"

namespace kiln::ir {

const char* NodeKindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::Op:
      return "op";
    case NodeKind::Const:
      return "const";
    case NodeKind::If:
      return "if";
    case NodeKind::While:
      return "while";
    case NodeKind::Call:
      return "call";
    case NodeKind::Print:
      return "print";
    case NodeKind::Raise:
      return "raise";
    case NodeKind::Interpret:
      return "interpret";
  }
  return "?";
}

std::vector<TensorMeta> Func::result_metas() const {
  std::vector<TensorMeta> out;
  for (ValueRef r : results) out.push_back(meta(r));
  return out;
}

Func& Module::AddFunc(const std::string& name) {
  KILN_CHECK(Find(name) == nullptr, Value, "ir: function @", name, " is defined twice");
  funcs_.push_back(std::make_unique<Func>());
  funcs_.back()->name = name;
  index_[name] = funcs_.size() - 1;
  return *funcs_.back();
}

// By name through index_, in constant time (graphs of unrolled loops hold thousands of
// functions). Functions are only added through AddFunc, but a pass may drop or reorder
// funcs(): an entry that no longer matches rebuilds the index.
const Func* Module::Find(const std::string& name) const {
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto hit = index_.find(name);
    if (hit == index_.end() && index_.size() >= funcs_.size()) return nullptr;
    if (hit != index_.end() && hit->second < funcs_.size() && funcs_[hit->second]->name == name)
      return funcs_[hit->second].get();
    index_.clear();
    for (size_t i = 0; i < funcs_.size(); ++i) index_[funcs_[i]->name] = i;
  }
  return nullptr;
}

Func* Module::Find(const std::string& name) {
  return const_cast<Func*>(static_cast<const Module*>(this)->Find(name));
}

std::string Module::FreshName(const std::string& prefix) const {
  // Numbers already handed out for the prefix are not tried again (linear, not quadratic).
  int& next = next_fresh_[prefix];
  for (;; ++next) {
    std::string name = prefix + "_" + std::to_string(next);
    if (Find(name) == nullptr) return name;
  }
}

ValueRef Builder::Param(const TensorMeta& meta, const std::string& name) {
  func_.params.push_back(meta);
  func_.param_names.resize(func_.params.size() - 1);
  func_.param_names.push_back(name);
  return ValueRef{-1, static_cast<int>(func_.params.size()) - 1};
}

std::vector<ValueRef> Builder::Append(Node node) {
  func_.nodes.push_back(std::move(node));
  const Node& added = func_.nodes.back();
  int id = static_cast<int>(func_.nodes.size()) - 1;
  std::vector<ValueRef> outs;
  for (size_t k = 0; k < added.outputs.size(); ++k) outs.push_back({id, static_cast<int>(k)});
  return outs;
}

// A Python int constant joining an integer tensor must fit its dtype, as in eager dispatch;
// checked here so the error arrives at compile time with the user's line.
void Builder::CheckWeakConstFits(const OpDef& def, ValueRef v, DType target) const {
  if (v.node < 0) return;
  const Node& node = func_.nodes[v.node];
  if (node.kind != NodeKind::Const || !node.value.defined()) return;
  CheckWeakScalarFits(def.name, node.value, target);
}

// The casts eager dispatch makes before a promoted op (ops/evaluate.h), as explicit nodes.
void Builder::PromoteOperands(const OpDef& def, std::vector<ValueRef>& inputs,
                              const SourceLoc& loc) {
  if (def.promotion == Promotion::None) return;
  std::vector<TensorMeta> metas;
  for (ValueRef v : inputs) metas.push_back(func_.meta(v));
  DType target = PromotionTarget(def, metas);
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool listed = def.promoted_inputs.empty() ||
                  std::find(def.promoted_inputs.begin(), def.promoted_inputs.end(),
                            static_cast<int>(i)) != def.promoted_inputs.end();
    if (!listed || !metas[i].present || metas[i].dtype == target) continue;
    CheckWeakConstFits(def, inputs[i], target);
    inputs[i] = Op1(OpKind::Cast, {inputs[i]}, {target}, loc);
  }
}

ValueRef Builder::Const(const Tensor& value, SourceLoc loc) {
  Node node;
  node.kind = NodeKind::Const;
  node.value = value;
  node.outputs = {MetaOf(value)};  // a Python scalar stays weakly typed
  node.loc = std::move(loc);
  return Append(std::move(node))[0];
}

std::vector<ValueRef> Builder::Op(OpKind op, std::vector<ValueRef> inputs, Attrs attrs,
                                  SourceLoc loc) {
  const OpDef& def = GetOpDef(op);
  Node node;
  node.kind = NodeKind::Op;
  node.op = op;
  node.attrs = CompleteAttrs(def, std::move(attrs));
  PromoteOperands(def, inputs, loc);
  std::vector<TensorMeta> metas;
  for (ValueRef v : inputs) metas.push_back(func_.meta(v));
  node.outputs = def.infer(def, metas, node.attrs);
  for (const auto& m : node.outputs) CheckShapeSize(def.name, m.shape, m.dtype);
  node.inputs = std::move(inputs);
  node.loc = std::move(loc);
  return Append(std::move(node));
}

namespace {
const Func& Callee(const Module& m, const std::string& name) {
  const Func* f = m.Find(name);
  KILN_CHECK(f != nullptr, Value, "ir: no function named @", name);
  return *f;
}
}  // namespace

std::vector<ValueRef> Builder::If(ValueRef cond, std::vector<ValueRef> inputs,
                                  const std::string& then_func, const std::string& else_func,
                                  SourceLoc loc) {
  Node node;
  node.kind = NodeKind::If;
  node.inputs = {cond};
  node.inputs.insert(node.inputs.end(), inputs.begin(), inputs.end());
  node.callees = {then_func, else_func};
  node.outputs = Callee(module_, then_func).result_metas();
  node.loc = std::move(loc);
  return Append(std::move(node));
}

std::vector<ValueRef> Builder::While(std::vector<ValueRef> carried, const std::string& cond_func,
                                     const std::string& body_func, SourceLoc loc) {
  Node node;
  node.kind = NodeKind::While;
  node.inputs = std::move(carried);
  node.callees = {cond_func, body_func};
  node.outputs = Callee(module_, body_func).result_metas();
  node.loc = std::move(loc);
  return Append(std::move(node));
}

std::vector<ValueRef> Builder::Call(const std::string& callee, std::vector<ValueRef> inputs,
                                    SourceLoc loc) {
  Node node;
  node.kind = NodeKind::Call;
  node.inputs = std::move(inputs);
  node.callees = {callee};
  node.outputs = Callee(module_, callee).result_metas();
  node.loc = std::move(loc);
  return Append(std::move(node));
}

void Builder::Print(const std::string& format, std::vector<ValueRef> inputs, SourceLoc loc) {
  Node node;
  node.kind = NodeKind::Print;
  node.text = format;
  node.inputs = std::move(inputs);
  node.loc = std::move(loc);
  Append(std::move(node));
}

void Builder::Raise(const std::string& error_type, const std::string& format,
                    std::vector<ValueRef> inputs, SourceLoc loc) {
  Node node;
  node.kind = NodeKind::Raise;
  node.callees = {error_type};
  node.text = format;
  node.inputs = std::move(inputs);
  node.loc = std::move(loc);
  Append(std::move(node));
}

std::vector<ValueRef> Builder::Interpret(const std::string& key, const std::string& what,
                                         std::vector<ValueRef> inputs,
                                         std::vector<TensorMeta> outputs, SourceLoc loc) {
  Node node;
  node.kind = NodeKind::Interpret;
  node.callees = {key};
  node.text = what;
  node.inputs = std::move(inputs);
  node.outputs = std::move(outputs);
  node.loc = std::move(loc);
  return Append(std::move(node));
}

void Builder::Return(std::vector<ValueRef> results) { func_.results = std::move(results); }

}  // namespace kiln::ir
