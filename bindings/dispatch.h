// dispatch.h - the one place that decides whether an op called from Python runs or is traced.
#pragma once

#include "convert.h"

namespace kiln::bind {

// The eager-versus-graph decision. Returns the GraphEmitter (python/kiln/jit/emitter.py) this
// thread is compiling into, or nullptr: the op runs eagerly now. Every op call from Python asks
// this and nothing else: `_C.call` (which ops._core.call is) and the Tensor operators
// (tensor.cc). The state is per thread, so a thread running eager ops while another compiles
// never has its ops sent into that graph.
PyObject* GraphTarget();

// Adds op `kind` on `inputs` (a sequence of tensors, graph values, numbers or None) with `attrs`
// to `target`'s graph; returns the graph value(s), as `target.emit(kind, inputs, attrs)` does.
nb::object EmitToGraph(PyObject* target, OpKind kind, nb::handle inputs, nb::handle attrs);

}  // namespace kiln::bind
