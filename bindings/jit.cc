// jit.cc - the graph builder and compiled graphs for the Python front end (kiln.jit).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "core/allocator.h"
#include "frontend/graph_builder.h"
#include "passes/passes.h"
#include "runtime/eager.h"
#include "runtime/executor.h"

namespace kiln::bind {

namespace {

using frontend::GraphBuilder;
using frontend::GValue;
using Handle = std::tuple<int, int, int>;  // (function, node, output) as Python sees a value

Handle ToHandle(const GValue& v) { return {v.func, v.ref.node, v.ref.index}; }
GValue FromHandle(const Handle& h) { return {std::get<0>(h), {std::get<1>(h), std::get<2>(h)}}; }

std::vector<GValue> FromHandles(const std::vector<Handle>& hs) {
  std::vector<GValue> out;
  for (const auto& h : hs) out.push_back(FromHandle(h));
  return out;
}
std::vector<Handle> ToHandles(const std::vector<GValue>& vs) {
  std::vector<Handle> out;
  for (const auto& v : vs) out.push_back(ToHandle(v));
  return out;
}

ir::SourceLoc Loc(const std::string& file, int line, int column) { return {file, line, column}; }

TensorMeta MetaFrom(DType dtype, const Shape& shape) { return TensorMeta{dtype, shape}; }

// "op f32[8,128]" for a node, as a profile lists it.
std::string NodeSummary(const ir::Node& node) {
  std::string what;
  switch (node.kind) {
    case ir::NodeKind::Op:
      what = GetOpDef(node.op).name;
      break;
    case ir::NodeKind::Call:
      what = "call @" + node.callees[0];
      break;
    default:
      what = node.kind == ir::NodeKind::Const   ? "const"
             : node.kind == ir::NodeKind::If    ? "if"
             : node.kind == ir::NodeKind::While ? "while"
                                                : "print/raise";
  }
  if (!node.outputs.empty()) what += " " + ir::TypeString(node.outputs[0]);
  return what;
}

// A compiled graph: the verified module and its executor entry point.
struct Executable {
  explicit Executable(ir::Module m)
      : module(std::make_unique<ir::Module>(std::move(m))), program(*module) {}
  std::unique_ptr<ir::Module> module;  // on the heap: the program points into it
  Program program;
  int64_t last_peak_bytes = 0;  // memory the last run held at its peak, above what it started with
  std::vector<double> last_profile;  // seconds per entry node of the last profiled run

  nb::tuple Run(nb::sequence args, bool free_dead_values, bool profile) {
    std::vector<Tensor> inputs;
    for (nb::handle h : args) {
      if (!nb::isinstance<Tensor>(h)) throw nb::type_error("expected a list of Tensors as inputs");
      inputs.push_back(nb::cast<const Tensor&>(h));
    }
    int64_t before = GetAllocatorStats().allocated_bytes;
    ResetPeakAllocated();
    RunOptions options;
    options.free_dead_values = free_dead_values;
    std::vector<double> seconds;
    if (profile) options.node_seconds = &seconds;
    std::vector<Tensor> outputs = program.Run(inputs, options);
    if (profile) last_profile = std::move(seconds);
    last_peak_bytes = GetAllocatorStats().peak_allocated_bytes - before;
    nb::list out;
    for (auto& t : outputs) out.append(Wrap(std::move(t)));
    return nb::tuple(out);
  }
};

// The steady-state call of a compiled graph, checked in one C++ call: every argument a Tensor of
// the dtype and shape the graph was compiled for, and no Cell attribute set since the Python path
// last checked the guards (cell_epoch unchanged). Anything else returns None and the caller
// takes the full path (signature, guards, recompilation), which re-arms this one.
struct FastCall {
  nb::object owner;  // the Python Executable, kept alive
  Executable* exe;
  std::vector<TensorMeta> signature;
  std::vector<Tensor> parameters;  // the graph's trailing inputs (weights), in order
  int64_t epoch;
  static inline int64_t hits = 0;

  nb::object Call(nb::tuple args, int64_t now_epoch) {
    if (now_epoch != epoch || args.size() != signature.size()) return nb::none();
    std::vector<Tensor> inputs;
    inputs.reserve(args.size() + parameters.size());
    for (size_t i = 0; i < args.size(); ++i) {
      Tensor* t = nullptr;
      if (!nb::try_cast<Tensor*>(args[i], t) || t == nullptr) return nb::none();
      if (t->dtype() != signature[i].dtype || t->shape() != signature[i].shape) return nb::none();
      inputs.push_back(*t);
    }
    inputs.insert(inputs.end(), parameters.begin(), parameters.end());
    std::vector<Tensor> outputs = exe->program.Run(inputs);
    ++hits;
    return Wrap(std::move(outputs.at(0)));
  }
};

}  // namespace

void BindJit(nb::module_& m) {
  nb::class_<FastCall>(m, "FastCall")
      .def("__init__",
           [](FastCall* self, nb::object executable, const std::vector<Tensor>& args,
              const std::vector<Tensor>& parameters, int64_t epoch) {
             std::vector<TensorMeta> signature;
             for (const auto& t : args) signature.push_back(MetaOf(t));
             Executable* exe = nb::cast<Executable*>(executable);
             new (self)
                 FastCall{std::move(executable), exe, std::move(signature), parameters, epoch};
           })
      .def("__call__", &FastCall::Call, nb::arg("args"), nb::arg("epoch"));
  m.def("fast_call_hits", [] { return FastCall::hits; });

  nb::class_<GraphBuilder>(m, "GraphBuilder")
      .def(nb::init<>())
      .def("input",
           [](GraphBuilder& b, DType dtype, const Shape& shape, const std::string& name) {
             return ToHandle(b.Input(MetaFrom(dtype, shape), name));
           })
      .def("meta",
           [](GraphBuilder& b, const Handle& h) {
             TensorMeta m = b.Meta(FromHandle(h));
             return std::make_tuple(m.dtype, m.shape, m.weak);
           })
      .def("const", [](GraphBuilder& b, const Tensor& value, const std::string& file, int line,
                       int col) { return ToHandle(b.Const(value, Loc(file, line, col))); })
      .def("op",
           [](GraphBuilder& b, int kind, const std::vector<Handle>& inputs,
              const std::vector<bool>& absent, nb::sequence attrs, const std::string& file,
              int line, int col) {
             Attrs values;
             for (nb::handle h : attrs) values.push_back(ToAttr(h));
             return ToHandles(b.Op(static_cast<OpKind>(kind), FromHandles(inputs), absent,
                                   std::move(values), Loc(file, line, col)));
           })
      .def("print_", [](GraphBuilder& b, const std::string& format,
                        const std::vector<Handle>& inputs, const std::string& file, int line,
                        int col) { b.Print(format, FromHandles(inputs), Loc(file, line, col)); })
      .def("raise_",
           [](GraphBuilder& b, const std::string& type, const std::string& format,
              const std::vector<Handle>& inputs, const std::string& file, int line,
              int col) { b.Raise(type, format, FromHandles(inputs), Loc(file, line, col)); })
      .def("new_group", &GraphBuilder::NewGroup)
      .def("begin_region",
           [](GraphBuilder& b, int group, const std::string& prefix,
              const std::vector<std::pair<DType, Shape>>& leading) {
             std::vector<TensorMeta> metas;
             for (const auto& [d, s] : leading) metas.push_back(MetaFrom(d, s));
             return ToHandles(b.BeginRegion(group, prefix, metas));
           })
      .def("end_region",
           [](GraphBuilder& b, const std::vector<Handle>& results) {
             b.EndRegion(FromHandles(results));
           })
      .def("if_",
           [](GraphBuilder& b, const Handle& cond, int group, const std::string& file, int line,
              int col) { return ToHandles(b.If(FromHandle(cond), group, Loc(file, line, col))); })
      .def("while_",
           [](GraphBuilder& b, const std::vector<Handle>& carried, int group,
              const std::string& file, int line, int col) {
             return ToHandles(b.While(FromHandles(carried), group, Loc(file, line, col)));
           })
      .def_prop_ro("current_func", &GraphBuilder::current_func)
      .def("mark", &GraphBuilder::Mark)
      .def("truncate", &GraphBuilder::Truncate)
      .def("gradient",
           [](GraphBuilder& b, int mark, const std::vector<Handle>& targets,
              const std::vector<Handle>& sens, const std::vector<bool>& sens_absent,
              const std::vector<Handle>& sources) {
             return ToHandles(b.Gradient(mark, FromHandles(targets), FromHandles(sens), sens_absent,
                                         FromHandles(sources)));
           })
      .def("set_outputs", [](GraphBuilder& b,
                             const std::vector<Handle>& outs) { b.SetOutputs(FromHandles(outs)); })
      .def("text", [](GraphBuilder& b) { return ir::Print(b.module()); })
      .def("finish", [](GraphBuilder& b, const std::string& level) {
        ir::Verify(b.module());
        passes::RunPipeline(b.module(), level, /*verify_each=*/true);
        return new Executable(std::move(b.module()));
      });

  nb::class_<Executable>(m, "Executable")
      .def("run", &Executable::Run, nb::arg("args"), nb::arg("free_dead_values") = true,
           nb::arg("profile") = false)
      .def_prop_ro("last_profile",
                   [](const Executable& e) {
                     // (what the node is, seconds) for each node of the entry function.
                     nb::list out;
                     const auto& nodes = e.module->entry().nodes;
                     for (size_t n = 0; n < e.last_profile.size() && n < nodes.size(); ++n)
                       out.append(nb::make_tuple(NodeSummary(nodes[n]), e.last_profile[n]));
                     return out;
                   })
      .def_prop_ro("last_peak_bytes", [](const Executable& e) { return e.last_peak_bytes; })
      .def("text", [](const Executable& e) { return ir::Print(*e.module); })
      .def_prop_ro("num_nodes", [](const Executable& e) {
        size_t n = 0;
        for (const auto& f : e.module->funcs()) n += f->nodes.size();
        return n;
      });
}

}  // namespace kiln::bind
