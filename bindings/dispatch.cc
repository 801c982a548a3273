// dispatch.cc - each thread's graph under construction, and _C.call, which consults it.
#include "dispatch.h"

#include <nanobind/stl/string.h>

#include "runtime/eager.h"

namespace kiln::bind {

namespace {

// This thread's GraphEmitter while it compiles a function, else null. A strong reference kept by
// hand rather than an nb::object: a thread_local's destructor would release it without the GIL
// at thread exit. The compiler always restores the previous target (in a `finally`), so a
// thread never exits holding one.
thread_local PyObject* t_graph_target = nullptr;

// _C.set_graph_target(target): makes `target` (a GraphEmitter, or None for eager) this thread's
// graph under construction; returns the previous one, for the caller to restore.
nb::object SetGraphTarget(nb::handle target) {
  PyObject* previous = t_graph_target;
  PyObject* next = target.is_none() ? nullptr : target.ptr();
  Py_XINCREF(next);
  t_graph_target = next;
  return previous != nullptr ? nb::steal(previous) : nb::none();
}

nb::object CurrentGraphTarget() {
  return t_graph_target != nullptr ? nb::borrow(t_graph_target) : nb::none();
}

// _C.call(kind, inputs, attrs): one registry op, as a graph node while this thread compiles and
// run eagerly otherwise.
nb::object Call(int kind, nb::sequence inputs, nb::sequence attrs) {
  if (PyObject* graph = GraphTarget()) {
    return EmitToGraph(graph, static_cast<OpKind>(kind), inputs, attrs);
  }
  std::vector<Tensor> tensors;
  for (nb::handle h : inputs) {
    Tensor t;
    if (!ToOperand(h, &t)) {
      throw nb::type_error((std::string(OpName(static_cast<OpKind>(kind))) +
                            ": expected a Tensor or a number, got " +
                            nb::cast<std::string>(nb::str(h.type())))
                               .c_str());
    }
    tensors.push_back(std::move(t));
  }
  Attrs values;
  for (nb::handle h : attrs) values.push_back(ToAttr(h));
  const OpKind op = static_cast<OpKind>(kind);
  std::vector<Tensor> outputs;
  if (GetOpDef(op).communicates) {
    // A collective waits for the other ranks: other Python threads (dataset workers) run
    // meanwhile. Nothing below touches Python objects; the tensors are the C++ copies above.
    nb::gil_scoped_release release;
    outputs = CallOp(op, std::move(tensors), std::move(values));
  } else {
    outputs = CallOp(op, std::move(tensors), std::move(values));
  }
  return WrapOutputs(std::move(outputs));
}

}  // namespace

PyObject* GraphTarget() { return t_graph_target; }

nb::object EmitToGraph(PyObject* target, OpKind kind, nb::handle inputs, nb::handle attrs) {
  return nb::handle(target).attr("emit")(static_cast<int>(kind), inputs, attrs);
}

void BindDispatch(nb::module_& m) {
  m.def("call", &Call, nb::arg("kind"), nb::arg("inputs"), nb::arg("attrs"));
  m.def("set_graph_target", &SetGraphTarget, nb::arg("target").none(),
        "Makes target (a GraphEmitter, or None) this thread's graph under construction; returns "
        "the previous one.");
  m.def("graph_target", &CurrentGraphTarget,
        "This thread's graph under construction (a GraphEmitter), or None while it runs eagerly.");
}

}  // namespace kiln::bind
