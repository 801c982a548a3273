// executor.cc - a direct interpreter of the IR: each node runs its registry kernel in order.
//
// Values live in a per-call table indexed like the IR (params, then node outputs). Before a call
// it computes each value's last use; a value is released right after it, so its buffer returns
// to the caching allocator and the next node reuses it (peak memory ~ the live set, and no
// system allocation in steady state). Op nodes go straight to the kernel: their attributes are
// complete, casts are explicit in the IR and static output types were inferred at compile time.
// `if` and `while` call the interpreter on their region functions.
#include "runtime/executor.h"

#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "runtime/eager.h"

namespace kiln {
namespace {

bool TypeMatches(const TensorMeta& want, const Tensor& t) {
  if (want.dtype != t.dtype() || want.shape.size() != static_cast<size_t>(t.ndim())) return false;
  for (size_t i = 0; i < want.shape.size(); ++i)
    if (want.shape[i] >= 0 && want.shape[i] != t.shape()[i]) return false;
  return true;
}

bool Truth(const Tensor& t, const ir::Node& node) {
  KILN_CHECK(t.numel() == 1, Value, "the condition at line ", node.loc.line,
             " must be a single value, got a tensor of shape ", ShapeStr(t.shape()));
  return *t.To(DType::Bool).Contiguous().data<bool>();
}

// Runs an op node's kernel: outputs from the compile-time types when they are all known.
std::vector<Tensor> RunOpNode(const ir::Node& node, std::vector<Tensor> inputs) {
  const OpDef& def = GetOpDef(node.op);
  std::vector<Tensor> outputs;
  if (!def.allocates_outputs) {
    bool known = true;
    for (const auto& m : node.outputs)
      for (int64_t d : m.shape) known = known && d >= 0;
    std::vector<TensorMeta> metas = node.outputs;
    if (!known) {
      std::vector<TensorMeta> in;
      for (const auto& t : inputs) in.push_back(MetaOf(t));
      metas = def.infer(def, in, node.attrs);
    }
    outputs.reserve(metas.size());
    for (const auto& m : metas) outputs.push_back(Tensor::Empty(m.shape, m.dtype));
  }
  KernelContext ctx{def, inputs, outputs, node.attrs};
  def.kernel(ctx);
  for (int i : def.mutated_inputs)
    if (inputs[i].defined()) MarkWritten(inputs[i]);
  return outputs;
}

class Interpreter {
 public:
  Interpreter(const ir::Module& module, const ir::Func& func, const RunOptions& options)
      : m_(module), f_(func), options_(options) {}

  std::vector<Tensor> Run(const std::vector<Tensor>& args) {
    KILN_CHECK(args.size() == f_.params.size(), Type, "@", f_.name, " takes ", f_.params.size(),
               " inputs, got ", args.size());
    for (size_t i = 0; i < args.size(); ++i)
      KILN_CHECK(TypeMatches(f_.params[i], args[i]), Type, "@", f_.name, ": input ", i,
                 " should be ", ir::TypeString(f_.params[i]), ", got ", DTypeName(args[i].dtype()),
                 ShapeStr(args[i].shape()));
    params_ = args;
    outputs_.assign(f_.nodes.size(), {});
    std::vector<std::vector<int>> dies_after =
        options_.free_dead_values ? LastUses() : std::vector<std::vector<int>>();
    for (size_t n = 0; n < f_.nodes.size(); ++n) {
      outputs_[n] = RunNode(f_.nodes[n]);
      if (n < dies_after.size())
        for (int dead : dies_after[n]) outputs_[dead].clear();
    }
    std::vector<Tensor> results;
    for (ir::ValueRef r : f_.results) results.push_back(Get(r));
    return results;
  }

 private:
  Tensor Get(ir::ValueRef v) const {
    if (v.is_none()) return Tensor();
    return v.is_param() ? params_[v.index] : outputs_[v.node][v.index];
  }
  std::vector<Tensor> Gather(const std::vector<ir::ValueRef>& refs, size_t from = 0) const {
    std::vector<Tensor> out;
    for (size_t i = from; i < refs.size(); ++i) out.push_back(Get(refs[i]));
    return out;
  }
  // For each node, the earlier nodes whose outputs it is the last to use (results never die).
  std::vector<std::vector<int>> LastUses() const {
    std::vector<int> last(f_.nodes.size(), -1);
    for (size_t n = 0; n < f_.nodes.size(); ++n)
      for (const auto& v : f_.nodes[n].inputs)
        if (!v.is_param() && !v.is_none()) last[v.node] = static_cast<int>(n);
    for (const auto& r : f_.results)
      if (!r.is_param() && !r.is_none()) last[r.node] = static_cast<int>(f_.nodes.size());
    std::vector<std::vector<int>> dies_after(f_.nodes.size());
    for (size_t n = 0; n < f_.nodes.size(); ++n) {
      // A value nobody uses dies right after it is made; one used later, after its last user.
      int at = last[n] < 0 ? static_cast<int>(n) : last[n];
      if (at < static_cast<int>(f_.nodes.size())) dies_after[at].push_back(static_cast<int>(n));
    }
    return dies_after;
  }

  const ir::Func& Callee(const std::string& name) const {
    const ir::Func* f = m_.Find(name);
    KILN_CHECK(f != nullptr, Value, "executor: no function @", name);
    return *f;
  }

  std::vector<Tensor> RunNode(const ir::Node& node) {
    switch (node.kind) {
      case ir::NodeKind::Op:
        return CallOp(node.op, Gather(node.inputs), node.attrs);
      case ir::NodeKind::Const:
        return {node.value};
      case ir::NodeKind::Call:
        return RunFunc(m_, Callee(node.callees[0]), Gather(node.inputs));
      case ir::NodeKind::If: {
        bool taken = Truth(Get(node.inputs[0]), node);
        return RunFunc(m_, Callee(node.callees[taken ? 0 : 1]), Gather(node.inputs, 1), options_);
      }
      case ir::NodeKind::While: {
        const ir::Func& cond = Callee(node.callees[0]);
        const ir::Func& body = Callee(node.callees[1]);
        std::vector<Tensor> carried = Gather(node.inputs);
        while (Truth(RunFunc(m_, cond, carried, options_).at(0), node))
          carried = RunFunc(m_, body, carried, options_);
        return carried;
      }
      case ir::NodeKind::Print: {
        std::string line = FormatWithTensors(node.text, Gather(node.inputs));
        std::fwrite(line.data(), 1, line.size(), stdout);
        std::fputc('\n', stdout);
        std::fflush(stdout);
        return {};
      }
      case ir::NodeKind::Raise: {
        std::string type = node.callees.empty() ? "RuntimeError" : node.callees[0];
        throw RaisedError(type, FormatWithTensors(node.text, Gather(node.inputs)));
      }
    }
    return {};
  }

  const ir::Module& m_;
  const ir::Func& f_;
  const RunOptions& options_;
  std::vector<Tensor> params_;
  std::vector<std::vector<Tensor>> outputs_;
};

std::string TensorText(const Tensor& t) {
  Tensor values = t.To(DType::Float64).Contiguous();
  std::ostringstream out;
  auto element = [&](int64_t i) {
    double v = values.data<double>()[i];
    if (t.dtype() == DType::Bool) {
      out << (v != 0 ? "True" : "False");
    } else if (IsFloating(t.dtype())) {
      // Like NumPy's str(): 8 significant digits, and a trailing "." on whole numbers.
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.8g", v);
      std::string text = buf;
      if (text.find_first_of(".eni") == std::string::npos) text += ".";
      out << text;
    } else {
      out << static_cast<int64_t>(v);
    }
  };
  if (t.ndim() == 0) {
    element(0);
    return out.str();
  }
  // Nested brackets like NumPy's str(), without its alignment.
  std::vector<int64_t> index(t.ndim(), 0);
  for (int64_t i = 0; i < values.numel(); ++i) {
    int opened = 0;
    for (int64_t d = t.ndim() - 1; d >= 0 && index[d] == 0; --d) ++opened;
    out << std::string(opened, '[');
    element(i);
    int closed = 0;
    for (int64_t d = t.ndim() - 1; d >= 0; --d) {
      if (++index[d] < t.shape()[d]) break;
      index[d] = 0;
      ++closed;
    }
    out << std::string(closed, ']');
    if (i + 1 < values.numel()) out << (closed ? "\n" : " ");
  }
  if (values.numel() == 0) out << "[]";
  return out.str();
}

}  // namespace

std::vector<Tensor> RunFunc(const ir::Module& module, const ir::Func& func,
                            const std::vector<Tensor>& args, const RunOptions& options) {
  return Interpreter(module, func, options).Run(args);
}

std::string FormatWithTensors(const std::string& format, const std::vector<Tensor>& args) {
  // "{}" is the next value; "{{" and "}}" are literal braces (Python's str.format convention).
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    bool doubled = i + 1 < format.size() && format[i + 1] == c && (c == '{' || c == '}');
    if (doubled) {
      out += c;
      ++i;
      continue;
    }
    if (c == '{' && i + 1 < format.size() && format[i + 1] == '}' && next < args.size()) {
      out += TensorText(args[next++]);
      ++i;
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace kiln
