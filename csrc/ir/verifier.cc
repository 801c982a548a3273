// verifier.cc - checks a module is well formed and typed; runs after every pass in tests.
//
// 1. Every operand is a param or an output of an earlier node of the same function.
// 2. Op nodes: attributes fit the schema and the registry's inference gives the recorded types.
// 3. if/while/call: callees exist and their signatures match operands and results; a while's
//    cond returns one bool scalar and its body returns the carried types unchanged.
// 4. Every function returns values it defines.
#include "core/error.h"
#include "ir/ir.h"

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
      }
    }
    node_ = -1;
    for (ValueRef v : f_.results) CheckDefined(v);
  }

 private:
  template <typename... Args>
  [[noreturn]] void Fail(const Args&... args) {
    std::string where = node_ >= 0 ? " node " + std::to_string(node_) + " (" +
                                         NodeKindName(f_.nodes[node_].kind) + ")"
                                   : " return";
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

  void CheckOp(const Node& node) {
    const OpDef& def = GetOpDef(node.op);
    Require(node.attrs.size() == def.attrs.size(), def.name, " has ", node.attrs.size(),
            " attributes, its schema ", def.attrs.size());
    std::vector<TensorMeta> metas;
    for (ValueRef v : node.inputs) metas.push_back(f_.meta(v));
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

  void CheckConst(const Node& node) {
    Require(node.value.defined(), "has no value");
    Require(node.outputs.size() == 1 &&
                SameType(node.outputs[0], {node.value.dtype(), node.value.shape()}),
            "type does not match its value");
  }

  const Func& Callee(const Node& node, int which) {
    const Func* f = m_.Find(node.callees.at(which));
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

}  // namespace

void Verify(const Module& module) {
  KILN_CHECK(!module.empty(), Value, "ir verifier: the module has no functions");
  for (const auto& f : module.funcs()) FuncVerifier(module, *f).Run();
}

}  // namespace kiln::ir
