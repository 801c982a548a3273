// ir.h - kiln's graph IR: a module of functions whose bodies are lists of typed nodes.
//
//   Module   := Func+                      (entry is the first; control-flow regions are Funcs)
//   Func     := name, params, nodes, results
//   Node     := op(registry op) | const | if | while | call | print | raise | interpret
//   Value    := a param of the enclosing Func, or output k of an earlier node
//
// Every value is a tensor with a dtype and a shape (-1 where only known at run time); Python
// scalars, tuples, lists and dicts are resolved by the front end before IR is built. Control flow
// is structured: `if` runs one of two Funcs on its operands, `while` runs a cond Func and a body
// Func over loop-carried values. This keeps each node's inputs and outputs explicit, which is
// what reverse-mode autodiff and serialization need. Nodes carry the source location they came
// from, for error messages.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/signature.h"
#include "ops/registry.h"

namespace kiln::ir {

struct SourceLoc {
  std::string file;
  int line = 0;
  int column = 0;
  bool known() const { return line > 0; }
};

// A value: param `index` of the function (node == -1), output `index` of node `node`, or the
// absent value of an omitted optional op input (node == -2).
struct ValueRef {
  int node = -1;
  int index = 0;
  static ValueRef None() { return {-2, 0}; }
  bool is_param() const { return node == -1; }
  bool is_none() const { return node == -2; }
  bool operator==(const ValueRef& o) const { return node == o.node && index == o.index; }
};

enum class NodeKind : uint8_t { Op, Const, If, While, Call, Print, Raise, Interpret };
const char* NodeKindName(NodeKind kind);

struct Node {
  NodeKind kind = NodeKind::Op;
  OpKind op = OpKind::Add;  // for Op nodes
  Attrs attrs;              // op attributes, in the op's schema order
  std::vector<ValueRef> inputs;
  std::vector<TensorMeta> outputs;   // one per result of the node
  std::vector<std::string> callees;  // If: {then, else}; While: {cond, body}; Call: {callee};
                                     // Raise: {exception type name, e.g. "ValueError"}
                                     // Interpret: {the host's site key}
  Tensor value;                      // Const: the constant
  std::string text;                  // Print: format; Raise: message; Interpret: what the
                                     // site runs (source text, for messages and export)
  SourceLoc loc;
};

struct Func {
  std::string name;
  std::vector<std::string> param_names;  // for printing only; may be empty
  std::vector<TensorMeta> params;
  std::vector<Node> nodes;  // in execution order
  std::vector<ValueRef> results;

  const TensorMeta& meta(ValueRef v) const {
    static const TensorMeta kAbsent{DType::Float32, {}, false, false};
    if (v.is_none()) return kAbsent;
    return v.is_param() ? params.at(v.index) : nodes.at(v.node).outputs.at(v.index);
  }
  std::vector<TensorMeta> result_metas() const;
};

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;  // funcs are owned; copying would need a deep clone
  Module& operator=(const Module&) = delete;
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;

  Func& AddFunc(const std::string& name);  // name must be new; the first one added is the entry
  Func* Find(const std::string& name);
  const Func* Find(const std::string& name) const;
  Func& entry() { return *funcs_.front(); }
  const Func& entry() const { return *funcs_.front(); }
  const std::vector<std::unique_ptr<Func>>& funcs() const { return funcs_; }
  std::vector<std::unique_ptr<Func>>& funcs() { return funcs_; }
  bool empty() const { return funcs_.empty(); }
  // A name not used yet, from `prefix`.
  std::string FreshName(const std::string& prefix) const;
  // What the entry function means to its caller (signature.h); none for IR that only tests or
  // tools run. Passes keep it: they never change the entry's parameters or results.
  const std::optional<Signature>& signature() const { return signature_; }
  void set_signature(std::optional<Signature> signature) { signature_ = std::move(signature); }

 private:
  std::vector<std::unique_ptr<Func>> funcs_;
  std::optional<Signature> signature_;
  mutable std::unordered_map<std::string, size_t> index_;    // name -> position in funcs_
  mutable std::unordered_map<std::string, int> next_fresh_;  // prefix -> next number to try
};

// Builds a Func node by node, inferring each op's outputs with the registry (the same
// inference eager mode uses), so a built graph is typed by construction.
class Builder {
 public:
  Builder(Module& module, Func& func) : module_(module), func_(func) {}

  ValueRef Param(const TensorMeta& meta, const std::string& name = "");
  ValueRef Const(const Tensor& value, SourceLoc loc = {});
  std::vector<ValueRef> Op(OpKind op, std::vector<ValueRef> inputs, Attrs attrs = {},
                           SourceLoc loc = {});
  ValueRef Op1(OpKind op, std::vector<ValueRef> inputs, Attrs attrs = {}, SourceLoc loc = {}) {
    return Op(op, std::move(inputs), std::move(attrs), std::move(loc))[0];
  }
  // Runs then_func or else_func (same signature, params = inputs) on `inputs`.
  std::vector<ValueRef> If(ValueRef cond, std::vector<ValueRef> inputs,
                           const std::string& then_func, const std::string& else_func,
                           SourceLoc loc = {});
  // Loop-carried values: cond(carried) -> bool scalar; body(carried) -> carried.
  std::vector<ValueRef> While(std::vector<ValueRef> carried, const std::string& cond_func,
                              const std::string& body_func, SourceLoc loc = {});
  std::vector<ValueRef> Call(const std::string& callee, std::vector<ValueRef> inputs,
                             SourceLoc loc = {});
  void Print(const std::string& format, std::vector<ValueRef> inputs, SourceLoc loc = {});
  // Raises at run time when reached (the front end puts it in an `if` branch); `format` may
  // show the values of `inputs` with {} placeholders.
  void Raise(const std::string& error_type, const std::string& format, std::vector<ValueRef> inputs,
             SourceLoc loc = {});
  // A run-time interpreter node (LAX): the host (Python) runs site `key` on the inputs' values
  // when the graph runs and returns values of the declared `outputs` types
  // (runtime/interpret.h). `what` says what the site runs, for messages.
  std::vector<ValueRef> Interpret(const std::string& key, const std::string& what,
                                  std::vector<ValueRef> inputs, std::vector<TensorMeta> outputs,
                                  SourceLoc loc = {});
  void Return(std::vector<ValueRef> results);

  Func& func() { return func_; }

 private:
  std::vector<ValueRef> Append(Node node);
  void PromoteOperands(const OpDef& def, std::vector<ValueRef>& inputs, const SourceLoc& loc);
  void CheckWeakConstFits(const OpDef& def, ValueRef v, DType target) const;
  Module& module_;
  Func& func_;
};

// The stable text form (printer.cc) and its parser (parser.cc): Parse(Print(m)) prints the same.
std::string Print(const Module& module);
std::string TypeString(const TensorMeta& meta);
Module Parse(const std::string& text);

// Checks the module is well formed and typed (verifier.cc), its signature included; throws
// ValueError naming the function and node otherwise. Runs after every pass in tests.
void Verify(const Module& module);

}  // namespace kiln::ir
