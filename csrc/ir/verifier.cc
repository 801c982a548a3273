// verifier.cc - checks a module is well formed and typed; runs after every pass in tests.
//
// 1. Every operand is a param or an output of an earlier node of the same function.
// 2. Op nodes: operands and attributes fit the schema (arity, optional and variadic inputs,
//    attribute types), then the registry's inference gives the recorded types.
// 3. if/while/call: callees exist and their signatures match operands and results; a while's
//    cond returns one bool scalar and its body returns the carried types unchanged.
// 4. Every function returns values it defines.
// 5. No function reaches itself through if/while/call (the executor would recurse forever).
// 6. The signature, when there is one, fits the entry function (signature.cc).
// 7. Function names are names the text form can spell after '@'.
#include <algorithm>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "ir/ir.h"
#include "ir/text_form.h"

namespace kiln::ir {
namespace {

bool SameType(const TensorMeta& a, const TensorMeta& b) {
  return a.dtype == b.dtype && a.shape == b.shape;
}

class FuncVerifier {
 public:
  FuncVerifier(const Module& m, const Func& f) : m_(m), f_(f) {}

  void Run() {
    for (size_t n = 0; n < f_.nodes.size(); ++n) {
      node_ = static_cast<int>(n);
      const Node& node = f_.nodes[n];
      for (ValueRef v : node.inputs) CheckDefined(v);
      // Only an op's optional input may be absent; regions, calls and prints need values.
      for (ValueRef v : node.inputs)
        Require(node.kind == NodeKind::Op || !v.is_none(), "takes 'none' as an operand");
      switch (node.kind) {
        case NodeKind::Op:
          CheckOp(node);
          break;
        case NodeKind::Const:
          CheckConst(node);
          break;
        case NodeKind::If:
          CheckIf(node);
          break;
        case NodeKind::While:
          CheckWhile(node);
          break;
        case NodeKind::Call:
          CheckSignature(node, Callee(node, 0), node.inputs, 0);
          break;
        case NodeKind::Print:
          Require(node.outputs.empty(), "has results");
          break;
        case NodeKind::Raise:
          Require(node.outputs.empty() && node.callees.size() == 1,
                  "needs an exception type and no results");
          break;
        case NodeKind::Interpret:
          Require(node.callees.size() == 1 && !node.callees[0].empty(), "needs a site key");
          break;
      }
    }
    CheckResults();
  }

  // Run by Verify for every function first, so a callee's result types can be read.
  void CheckResults() {
    node_ = -1;
    for (ValueRef v : f_.results) CheckDefined(v);
  }

 private:
  template <typename... Args>
  [[noreturn]] void Fail(const Args&... args) {
    std::string where = " return";
    if (node_ >= 0) {
      const Node& node = f_.nodes[node_];
      where = " node " + std::to_string(node_) + " (" +
              (node.kind == NodeKind::Op ? OpName(node.op) : NodeKindName(node.kind)) + ")";
      if (node.loc.known())
        where += " at " + node.loc.file + ":" + std::to_string(node.loc.line) + ":" +
                 std::to_string(node.loc.column);
    }
    Throw(ErrorKind::Value, "ir verifier: @", f_.name, where, ": ", args...);
  }
  template <typename... Args>
  void Require(bool ok, const Args&... args) {
    if (!ok) Fail(args...);
  }

  void CheckDefined(ValueRef v) {
    if (v.is_none()) return;
    if (v.is_param()) {
      Require(v.index >= 0 && v.index < static_cast<int>(f_.params.size()), "param ", v.index,
              " does not exist");
      return;
    }
    int limit = node_ >= 0 ? node_ : static_cast<int>(f_.nodes.size());
    Require(v.node >= 0 && v.node < limit, "uses a value of node ", v.node,
            " before it is defined");
    Require(v.index >= 0 && v.index < static_cast<int>(f_.nodes[v.node].outputs.size()),
            "uses output ", v.index, " of node ", v.node, " which has no such output");
  }

  // Arity and attribute types come first, so no inference function sees a malformed node.
  void CheckOp(const Node& node) {
    const OpDef& def = GetOpDef(node.op);
    std::vector<bool> given;
    for (ValueRef v : node.inputs) given.push_back(!v.is_none());
    try {
      CheckInputArity(def, given);
      CheckAttrTypes(def, node.attrs);
    } catch (const Error& e) {
      Fail(e.what());
    }
    // Omitted trailing optional inputs are absent, as eager dispatch and the executor pad them.
    std::vector<TensorMeta> metas;
    for (ValueRef v : node.inputs) metas.push_back(f_.meta(v));
    while (metas.size() < def.inputs.size() && std::string(def.inputs[metas.size()]).back() == '?')
      metas.push_back(f_.meta(ValueRef::None()));
    CheckPromoted(def, metas);
    std::vector<TensorMeta> inferred;
    try {
      inferred = def.infer(def, metas, node.attrs);
    } catch (const Error& e) {
      Fail(def.name, ": ", e.what());
    }
    Require(inferred.size() == node.outputs.size(), def.name, " gives ", inferred.size(),
            " results, the node records ", node.outputs.size());
    for (size_t k = 0; k < inferred.size(); ++k) {
      Require(SameType(inferred[k], node.outputs[k]), def.name, " result ", k, " is ",
              TypeString(inferred[k]), " but recorded as ", TypeString(node.outputs[k]));
    }
  }

  // A promoted op's kernel reads its inputs in one dtype: the builder casts them first
  // (Builder::PromoteOperands), so IR text must carry those casts too. Without this check a
  // parsed `matmul(f64, f32)` would reach a kernel reading the f32 buffer as doubles.
  void CheckPromoted(const OpDef& def, const std::vector<TensorMeta>& metas) {
    if (def.promotion == Promotion::None) return;
    DType target;
    try {
      target = PromotionTarget(def, metas);
    } catch (const Error& e) {
      Fail(def.name, ": ", e.what());
    }
    for (size_t i = 0; i < metas.size(); ++i) {
      const bool listed = def.promoted_inputs.empty() ||
                          std::find(def.promoted_inputs.begin(), def.promoted_inputs.end(),
                                    static_cast<int>(i)) != def.promoted_inputs.end();
      Require(!listed || !metas[i].present || metas[i].dtype == target, def.name, " input ", i,
              " is ", DTypeName(metas[i].dtype), " but the op computes in ", DTypeName(target),
              ": cast it first");
    }
  }

  void CheckConst(const Node& node) {
    Require(node.value.defined(), "has no value");
    Require(node.outputs.size() == 1 &&
                SameType(node.outputs[0], {node.value.dtype(), node.value.shape()}),
            "type does not match its value");
  }

  const Func& Callee(const Node& node, int which) {
    Require(static_cast<int>(node.callees.size()) > which, "names no callee ", which);
    const Func* f = m_.Find(node.callees[which]);
    Require(f != nullptr, "calls @", node.callees[which], ", which does not exist");
    return *f;
  }

  // callee(params) must accept `args` (from index `from`) and return the node's outputs.
  void CheckSignature(const Node& node, const Func& callee, const std::vector<ValueRef>& args,
                      size_t from) {
    Require(callee.params.size() == args.size() - from, "@", callee.name, " takes ",
            callee.params.size(), " values, given ", args.size() - from);
    for (size_t i = from; i < args.size(); ++i)
      Require(SameType(callee.params[i - from], f_.meta(args[i])), "argument ", i - from, " of @",
              callee.name, " is ", TypeString(f_.meta(args[i])), ", expected ",
              TypeString(callee.params[i - from]));
    auto results = callee.result_metas();
    Require(results.size() == node.outputs.size(), "@", callee.name, " returns ", results.size(),
            " values, the node has ", node.outputs.size());
    for (size_t k = 0; k < results.size(); ++k)
      Require(SameType(results[k], node.outputs[k]), "result ", k, " of @", callee.name, " is ",
              TypeString(results[k]), ", the node records ", TypeString(node.outputs[k]));
  }

  void CheckIf(const Node& node) {
    Require(!node.inputs.empty(), "has no condition");
    const TensorMeta& cond = f_.meta(node.inputs[0]);
    Require(cond.dtype == DType::Bool && NumElements(cond.shape) == 1,
            "condition must be a bool scalar, got ", TypeString(cond));
    CheckSignature(node, Callee(node, 0), node.inputs, 1);
    CheckSignature(node, Callee(node, 1), node.inputs, 1);
  }

  void CheckWhile(const Node& node) {
    const Func& cond = Callee(node, 0);
    const Func& body = Callee(node, 1);
    CheckSignature(node, body, node.inputs, 0);
    Require(cond.params.size() == node.inputs.size(), "@", cond.name, " must take the ",
            node.inputs.size(), " carried values");
    Require(body.results.size() == node.inputs.size(), "@", body.name, " must return the ",
            node.inputs.size(), " carried values");
    auto cond_results = cond.result_metas();
    Require(cond_results.size() == 1 && cond_results[0].dtype == DType::Bool &&
                NumElements(cond_results[0].shape) == 1,
            "@", cond.name, " must return one bool scalar");
    for (size_t i = 0; i < node.inputs.size(); ++i)
      Require(SameType(body.result_metas()[i], f_.meta(node.inputs[i])), "carried value ", i,
              " changes type in @", body.name, ": ", TypeString(f_.meta(node.inputs[i])), " -> ",
              TypeString(body.result_metas()[i]));
  }

  const Module& m_;
  const Func& f_;
  int node_ = -1;
};

// Regions and calls must not recurse: the executor runs a callee on the machine stack, so a
// cycle would overflow it (the front end never makes one). Depth-first over callee names.
class CallCycleFinder {
 public:
  explicit CallCycleFinder(const Module& m) : m_(m) {}

  void Visit(const Func& f) {
    int& state = state_[f.name];
    if (state == kDone) return;
    KILN_CHECK(state != kOnPath, Value, "ir verifier: @", f.name,
               " calls itself (through if/while/call); recursion is not supported");
    state = kOnPath;
    for (const Node& node : f.nodes) {
      if (node.kind != NodeKind::If && node.kind != NodeKind::While && node.kind != NodeKind::Call)
        continue;
      for (const std::string& name : node.callees)
        if (const Func* callee = m_.Find(name)) Visit(*callee);
    }
    state = kDone;  // unordered_map references survive the insertions made meanwhile
  }

 private:
  enum { kNew = 0, kOnPath, kDone };
  const Module& m_;
  std::unordered_map<std::string, int> state_;
};

}  // namespace

void Verify(const Module& module) {
  KILN_CHECK(!module.empty(), Value, "ir verifier: the module has no functions");
  // Names the text form could not spell would make a module print as IR that does not parse
  // (found by fuzzing model files, whose function names come from the file).
  for (const auto& f : module.funcs())
    KILN_CHECK(text::IsGlobalName(f->name), Value, "ir verifier: function name '", f->name,
               "' is not letters, digits, '_' and '.'");
  for (const auto& f : module.funcs()) FuncVerifier(module, *f).CheckResults();
  for (const auto& f : module.funcs()) FuncVerifier(module, *f).Run();
  CallCycleFinder cycles(module);
  for (const auto& f : module.funcs()) cycles.Visit(*f);
  VerifySignature(module);
}

}  // namespace kiln::ir
