// jit.cc - the graph builder and compiled graphs (engine/engine.h) for kiln.jit: conversions only.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "analysis/effects.h"
#include "convert.h"
#include "engine/engine.h"
#include "engine/model_file.h"
#include "engine/onnx_export.h"
#include "frontend/graph_builder.h"
#include "outputs.h"
#include "runtime/interpret.h"

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

std::vector<Tensor> ToTensors(nb::handle items, const char* what) {
  std::vector<Tensor> out;
  for (nb::handle h : items) {
    if (!nb::isinstance<Tensor>(h))
      throw nb::type_error((std::string("expected a list of Tensors as ") + what).c_str());
    out.push_back(nb::cast<const Tensor&>(h));
  }
  return out;
}

nb::tuple ToTensorTuple(std::vector<Tensor> outputs) {
  nb::list out;
  for (auto& t : outputs) out.append(Wrap(std::move(t)));
  return nb::tuple(out);
}

// graph.Run, without the GIL when the graph communicates (see Executable::communicates).
std::vector<Tensor> RunMaybeReleased(const engine::CompiledGraph& graph, bool release,
                                     const std::vector<Tensor>& inputs,
                                     const std::vector<Tensor>& weights) {
  if (!release) return graph.Run(inputs, weights);
  nb::gil_scoped_release unlocked;
  return graph.Run(inputs, weights);
}

// A compiled graph (engine/engine.h) and what its last measured run recorded.
struct Executable {
  explicit Executable(engine::CompiledGraph compiled)
      : graph(std::move(compiled)), communicates(Communicates(graph)) {}
  engine::CompiledGraph graph;
  // A graph with collectives waits for the other ranks while it runs: it runs without the GIL
  // then, so the rank's other Python threads (dataset workers) go on. Nothing in a run needs
  // the GIL (interpreter nodes take it themselves, runtime/interpret.h).
  bool communicates;
  int64_t last_peak_bytes = 0;  // memory the last `run` held at its peak, above its start
  std::vector<engine::NodeTime> last_profile;  // per entry node of the last profiled `run`

  // Every entry parameter in order; the flat results (tests and measurements).
  static bool Communicates(const engine::CompiledGraph& g) {
    return analysis::ModuleEffects(g.module()).OfFunc(g.module().entry().name).communicates;
  }

  nb::tuple Run(nb::sequence params, bool free_dead_values, bool profile) {
    engine::RunStats stats;
    std::vector<Tensor> outputs =
        graph.RunEntry(ToTensors(params, "inputs"), {free_dead_values, profile}, &stats);
    last_peak_bytes = stats.peak_bytes;
    if (profile) last_profile = std::move(stats.profile);
    return ToTensorTuple(std::move(outputs));
  }

  // The user's inputs and the bound weights; the result nested as the signature says.
  nb::object Call(nb::sequence inputs, nb::sequence weights, const nb::tuple& opaque) {
    std::vector<Tensor> in = ToTensors(inputs, "inputs"), bound = ToTensors(weights, "weights");
    std::vector<Tensor> outputs = RunMaybeReleased(graph, communicates, in, bound);
    return BuildOutputs(graph.signature().outputs, outputs, opaque);
  }
};

// The steady-state call of a compiled graph, checked in one C++ call: every argument a Tensor
// the signature accepts, and no Cell attribute set since the Python path last checked the
// guards (cell_epoch unchanged). Anything else returns None and the caller takes the full path
// (signature, guards, recompilation), which re-arms this one.
struct FastCall {
  nb::object owner;  // the Python Executable, kept alive
  const engine::CompiledGraph* graph;
  bool communicates;
  std::vector<Tensor> weights;  // bound when armed, in signature order
  int64_t epoch;
  static inline int64_t hits = 0;

  // `opaque` comes with each call rather than being held here: an object this C++ type held
  // would be invisible to Python's cycle collector (a Cell returned by its own graph would leak).
  nb::object Call(nb::tuple args, int64_t now_epoch, const nb::tuple& opaque) {
    if (now_epoch != epoch || args.size() != graph->num_inputs()) return nb::none();
    std::vector<Tensor> inputs;
    inputs.reserve(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      Tensor* t = nullptr;
      if (!nb::try_cast<Tensor*>(args[i], t) || t == nullptr) return nb::none();
      inputs.push_back(*t);
    }
    if (!graph->Accepts(inputs)) return nb::none();
    std::vector<Tensor> outputs = RunMaybeReleased(*graph, communicates, inputs, weights);
    ++hits;
    return BuildOutputs(graph->signature().outputs, outputs, opaque);
  }
};

}  // namespace

void BindJit(nb::module_& m) {
  nb::class_<FastCall>(m, "FastCall")
      .def("__init__",
           [](FastCall* self, nb::object executable, nb::sequence weights, int64_t epoch) {
             Executable* exe = nb::cast<Executable*>(executable);
             new (self) FastCall{std::move(executable), &exe->graph, exe->communicates,
                                 ToTensors(weights, "weights"), epoch};
           })
      .def("__call__", &FastCall::Call, nb::arg("args"), nb::arg("epoch"), nb::arg("opaque"));
  m.def("fast_call_hits", [] { return FastCall::hits; });
  // The host of run-time interpreter nodes: host(key, inputs tuple) -> sequence of Tensors.
  // Held for the life of the process (never released after the interpreter is gone).
  m.def("set_interpret_host", [](nb::object host) {
    static nb::object* held = nullptr;
    if (held == nullptr) held = new nb::object();
    *held = host;
    if (host.is_none()) {
      SetInterpretHost(nullptr);
      return;
    }
    SetInterpretHost([](const std::string& key, const std::vector<Tensor>& inputs) {
      nb::gil_scoped_acquire gil;
      nb::list args;
      for (const Tensor& t : inputs) args.append(Wrap(Tensor(t)));
      nb::object results = (*held)(key, nb::tuple(args));
      return ToTensors(results, "the results of a run-time interpreter node");
    });
  });

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
      .def("interpret_",
           [](GraphBuilder& b, const std::string& key, const std::string& what,
              const std::vector<Handle>& inputs,
              const std::vector<std::tuple<DType, Shape, bool>>& outputs, const std::string& file,
              int line, int col) {
             std::vector<TensorMeta> metas;
             for (const auto& [d, s, weak] : outputs) metas.push_back(TensorMeta{d, s, weak});
             return ToHandles(
                 b.Interpret(key, what, FromHandles(inputs), metas, Loc(file, line, col)));
           })
      .def("inline_",
           [](GraphBuilder& b, nb::handle executable, const std::vector<Handle>& inputs,
              const std::vector<Handle>& weights, const std::string& file, int line, int col) {
             const engine::CompiledGraph& graph = nb::cast<Executable*>(executable)->graph;
             const ir::Signature& sig = graph.signature();
             std::vector<GValue> params;
             size_t next_input = 0, next_weight = 0;
             for (const auto& in : sig.inputs) {
               const bool weight = in.role == ir::InputRole::Weight;
               const auto& from = weight ? weights : inputs;
               size_t& next = weight ? next_weight : next_input;
               if (next >= from.size())
                 throw nb::type_error("GraphCell: the loaded model takes more inputs than given");
               params.push_back(FromHandle(from[next++]));
             }
             if (next_input != inputs.size())
               throw nb::type_error("GraphCell: the loaded model takes fewer inputs than given");
             auto outs = b.Inline(graph.module(), "graphcell_", params, Loc(file, line, col));
             return nb::make_tuple(ToHandles(outs), TreeToSpec(sig.outputs));
           })
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
      .def("set_signature",
           [](GraphBuilder& b, const std::vector<int>& weights, nb::handle outputs) {
             b.module().set_signature(
                 ir::EntrySignature(b.module(), weights, ToOutputTree(outputs)));
           })
      .def("text", [](GraphBuilder& b) { return ir::Print(b.module()); })
      .def("export",
           [](GraphBuilder& b, const std::string& path, nb::sequence weights,
              const std::string& producer_version, int64_t external_data_threshold,
              const std::string& file_format) {
             if (file_format == "ONNX") {
               engine::SaveOnnx(b.module(), ToTensors(weights, "weights"), path, producer_version);
               return;
             }
             engine::SaveOptions options;
             options.producer_version = producer_version;
             options.external_data_threshold = external_data_threshold;
             engine::SaveModel(b.module(), ToTensors(weights, "weights"), path, options);
           })
      .def("finish", [](GraphBuilder& b, const std::string& level) {
        engine::CompileOptions options;
        options.level = level;
        return new Executable(engine::Compile(std::move(b.module()), options));
      });

  // A model file (engine/model_file.h): its compiled graph, its weights in signature order,
  // and (name, dtype, shape) of each user input.
  m.def("load_model", [](const std::string& path, const std::string& level) {
    engine::SavedModel saved = engine::LoadModel(path);
    nb::list inputs;
    for (const auto& in : saved.module.signature()->inputs)
      if (in.role == ir::InputRole::Input)
        inputs.append(nb::make_tuple(in.name, in.dtype, in.shape));
    nb::list weights;
    for (auto& w : saved.weights) weights.append(Wrap(std::move(w)));
    const auto& sig = *saved.module.signature();
    nb::list weight_names;
    for (const auto& in : sig.inputs)
      if (in.role == ir::InputRole::Weight) weight_names.append(in.name);
    engine::CompileOptions options;
    options.level = level;
    auto* exe = new Executable(engine::Compile(std::move(saved.module), options));
    return nb::make_tuple(nb::cast(exe, nb::rv_policy::take_ownership), weights, weight_names,
                          inputs);
  });

  nb::class_<Executable>(m, "Executable")
      .def("run", &Executable::Run, nb::arg("args"), nb::arg("free_dead_values") = true,
           nb::arg("profile") = false)
      .def("call", &Executable::Call, nb::arg("inputs"), nb::arg("weights"), nb::arg("opaque"))
      .def_prop_ro("last_profile",
                   [](const Executable& e) {
                     nb::list out;  // (what the node is, seconds) for each entry node
                     for (const auto& n : e.last_profile)
                       out.append(nb::make_tuple(n.what, n.seconds));
                     return out;
                   })
      .def_prop_ro("last_peak_bytes", [](const Executable& e) { return e.last_peak_bytes; })
      .def("text", [](const Executable& e) { return e.graph.Text(); })
      .def_prop_ro("num_nodes", [](const Executable& e) { return e.graph.NumNodes(); });
}

}  // namespace kiln::bind
