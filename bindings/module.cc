// module.cc - the kiln._C extension module: error mapping, dtypes, the op table and runtime knobs.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "core/allocator.h"
#include "core/contended_pool.h"
#include "core/contention.h"
#include "core/error.h"
#include "core/feed_queue.h"
#include "core/interrupt.h"
#include "core/parallel.h"
#include "core/random.h"
#include "core/thread_slice.h"
#include "kernels/cpu/derived_cache.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/panel_gemm.h"
#include "runtime/eager.h"
#include "runtime/executor.h"
#include "runtime/tape.h"

namespace kiln::bind {

void BindTensor(nb::module_& m);
void BindAutodiff(nb::module_& m);
void BindIR(nb::module_& m);
void BindJit(nb::module_& m);
void BindDispatch(nb::module_& m);
void BindDataset(nb::module_& m);
void BindCheckpoint(nb::module_& m);
void BindComm(nb::module_& m);

namespace {

// numpy.exceptions.AxisError (a ValueError and an IndexError), looked up at module init.
PyObject* g_axis_error = nullptr;

// The Python exception class of each ErrorKind, in the enum's order (core/error.h).
PyObject* PythonException(ErrorKind kind) {
  PyObject* const by_kind[] = {PyExc_ValueError,    PyExc_TypeError,           PyExc_IndexError,
                               PyExc_RuntimeError,  PyExc_NotImplementedError, PyExc_MemoryError,
                               PyExc_OverflowError, PyExc_KeyboardInterrupt,   PyExc_RecursionError,
                               g_axis_error};
  static_assert(static_cast<int>(ErrorKind::Axis) == 9, "one exception per ErrorKind");
  return by_kind[static_cast<int>(kind)];
}

// kiln._C.GraphRaise: a RuntimeError for `raise` of a class that is not a builtin exception;
// its `type_name` says which, and kiln.jit turns it back into that class.
PyObject* g_graph_raise = nullptr;

void SetRaised(const RaisedError& e) {
  // A builtin exception class raises as itself; any other name (kiln.jit writes a user class
  // as "module.QualName", which no builtin matches) as GraphRaise carrying the name.
  nb::object builtins = nb::module_::import_("builtins");
  const char* name = e.type_name().c_str();
  if (nb::hasattr(builtins, name)) {
    nb::object cls = builtins.attr(name);
    if (PyType_Check(cls.ptr()) &&
        PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls.ptr()),
                         reinterpret_cast<PyTypeObject*>(PyExc_Exception))) {
      PyErr_SetString(cls.ptr(), e.what());
      return;
    }
  }
  nb::object exc = nb::steal(PyObject_CallFunction(g_graph_raise, "s", e.what()));
  if (!exc.is_valid()) return;  // the call set its own error
  if (PyObject_SetAttrString(exc.ptr(), "type_name", nb::str(name).ptr()) != 0) return;
  PyErr_SetObject(g_graph_raise, exc.ptr());
}

void TranslateErrors(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const RaisedError& e) {
    SetRaised(e);
  } catch (const Error& e) {
    PyErr_SetString(PythonException(e.kind()), e.what());
  }
}

nb::dict OpSchema(int kind) {
  const OpDef& def = GetOpDef(static_cast<OpKind>(kind));
  nb::dict d;
  d["name"] = def.name;
  nb::list inputs, attrs;
  for (const char* name : def.inputs) inputs.append(name);
  for (const auto& spec : def.attrs)
    attrs.append(nb::make_tuple(spec.name, AttrToString(spec.default_value)));
  d["inputs"] = inputs;
  d["attrs"] = attrs;
  d["has_infer"] = def.infer != nullptr;
  d["has_kernel"] = def.kernel != nullptr;
  d["has_grad"] = def.grad != nullptr;
  d["is_view"] = def.is_view;
  d["mutates"] = def.mutated_inputs;
  d["is_random"] = def.is_random;
  return d;
}

// Ctrl-C while a graph runs (the GIL is held, so Python's handler has not run yet): let Python
// run its signal handlers now and carry their exception (KeyboardInterrupt) out of the engine.
// A graph with collectives runs without the GIL (bindings/jit.cc): it is not checked then
// (taking the GIL between nodes would wait on the other threads), and the signal is handled
// when the run returns; its collectives end by themselves within KILN_COMM_TIMEOUT.
void CheckPythonSignals() {
  if (PyGILState_Check() && PyErr_CheckSignals() != 0) throw nb::python_error();
}

// A wait for another thread inside the engine (core/interrupt.h): without the GIL, which that
// thread may need (the sink mode's feeder is a Python thread).
void RunWithoutGil(const std::function<void()>& wait) {
  if (PyGILState_Check()) {
    nb::gil_scoped_release release;
    wait();
  } else {
    wait();
  }
}

}  // namespace

void InitModule(nb::module_& m) {
  m.doc() = "kiln's C++ engine";
  // kiln.Tensor is held for the life of the process and tensors may still borrow NumPy memory at
  // interpreter exit; nanobind's leak report at shutdown would only be noise.
  nb::set_leak_warnings(false);
  g_graph_raise = PyErr_NewException("kiln._C.GraphRaise", PyExc_RuntimeError, nullptr);
  m.attr("GraphRaise") = nb::handle(g_graph_raise);
  // Held for the life of the process, as the builtin exception classes are. NumPy 1.24 has it
  // at the top level only, NumPy 2 in numpy.exceptions only.
  nb::object numpy = nb::module_::import_("numpy");
  nb::object axis_error = nb::hasattr(numpy, "exceptions")
                              ? numpy.attr("exceptions").attr("AxisError")
                              : numpy.attr("AxisError");
  g_axis_error = axis_error.release().ptr();
  nb::register_exception_translator(&TranslateErrors);
  SetInterruptCheck(&CheckPythonSignals);
  SetBlockingRunner(&RunWithoutGil);

  nb::enum_<DType> dtype(m, "DType");
#define KILN_BIND_DTYPE(e, t, n) dtype.value(n, DType::e);
  KILN_FORALL_DTYPES(KILN_BIND_DTYPE)
#undef KILN_BIND_DTYPE
  m.def("itemsize", &ItemSize);
  m.def("promote_types", &PromoteTypes);
  m.def("promote_with_scalar", &PromoteWithScalar);

  BindDispatch(m);
  BindTensor(m);
  BindAutodiff(m);
  BindIR(m);
  BindJit(m);
  BindDataset(m);
  BindCheckpoint(m);
  BindComm(m);
  m.def("_set_tensor_class", &SetTensorClass);

  m.def("weak_scalar", [](nb::handle h) {
    Tensor t;
    if (!ToOperand(h, &t) || !t.defined()) throw nb::type_error("weak_scalar: expected a number");
    return Wrap(t);
  });
  m.def("op_names", [] {
    std::vector<std::string> names;
    for (int i = 0; i < kNumOps; ++i) names.push_back(OpName(static_cast<OpKind>(i)));
    return names;
  });
  m.def("is_registered", [](int kind) { return IsRegistered(static_cast<OpKind>(kind)); });
  m.def("op_schema", &OpSchema);

  m.def("get_num_threads", &GetNumThreads);
  m.def("set_num_threads", &SetNumThreads);
  m.def("contention_stats", [] {
    ContentionStats s = GetContentionStats();
    nb::dict d;
    d["checks"] = s.checks;
    d["contended_checks"] = s.contended_checks;
    d["last_fraction"] = s.last_fraction;
    d["contended"] = s.contended;
    d["crowded"] = s.crowded;
    d["available"] = s.available;
    return d;
  });
  m.def("set_contention_override", &SetContentionOverride);
  m.def("set_tape_hollow_from_bytes", &SetTapeHollowFromBytes);
  m.def("set_team_runs", &SetTeamRuns);
  m.def("contended_pool_stats", [] {
    ContendedPoolStats s = GetContendedPoolStats();
    nb::dict d;
    d["loops"] = s.loops;
    d["helper_blocks"] = s.helper_blocks;
    d["teams"] = s.teams;
    d["helper_tasks"] = s.helper_tasks;
    return d;
  });
  m.def("thread_slice_stats", [] {
    ThreadSliceStats s = GetThreadSliceStats();
    nb::dict d;
    d["slice_us"] = ShortSliceMicros();
    d["crowded_slice_us"] = CrowdedSliceMicros();
    d["applied"] = s.applied;
    d["refused"] = s.refused;
    return d;
  });
  m.def("set_seed", &SetGlobalSeed);
  m.def("empty_cache", &EmptyCache);
  m.def("allocator_stats", [] {
    AllocatorStats s = GetAllocatorStats();
    nb::dict d;
    d["allocated_bytes"] = s.allocated_bytes;
    d["cached_bytes"] = s.cached_bytes;
    d["peak_allocated_bytes"] = s.peak_allocated_bytes;
    d["peak_reserved_bytes"] = s.peak_reserved_bytes;
    d["system_allocations"] = s.system_allocations;
    return d;
  });
  m.def("reset_peak_allocated", &ResetPeakAllocated);
  m.def("reset_peak_reserved", &ResetPeakReserved);
  // Dataset queues of sink mode (core/feed_queue.h): the feeder thread pushes, get_next pops.
  m.def("feed_queue_create", [](size_t capacity) { return CreateFeedQueue(capacity); });
  m.def("feed_queue_push", [](int64_t id, nb::list batch) {
    std::vector<Tensor> tensors;
    for (nb::handle h : batch) {
      if (!nb::isinstance<Tensor>(h)) throw nb::type_error("feed_queue_push: expected Tensors");
      tensors.push_back(nb::cast<const Tensor&>(h).Contiguous());
    }
    std::shared_ptr<FeedQueue> queue = FindFeedQueue(id);
    if (!queue) return false;
    nb::gil_scoped_release release;  // waits while the queue is full
    return queue->Push(std::move(tensors));
  });
  m.def("feed_queue_close", [](int64_t id, std::string error) {
    if (std::shared_ptr<FeedQueue> queue = FindFeedQueue(id)) queue->Close(std::move(error));
  });
  m.def("feed_queue_pops", [](int64_t id) -> int64_t {
    std::shared_ptr<FeedQueue> queue = FindFeedQueue(id);
    return queue ? queue->pops() : -1;
  });
  m.def("feed_queue_destroy", [](int64_t id) { DestroyFeedQueue(id); });
  m.def("onednn_blocks_matmul_weights", &cpu::OnednnBlocksMatMulWeights, nb::arg("m"), nb::arg("k"),
        nb::arg("n"));
  m.def("panel_gemm_available", &cpu::PanelGemmAvailable);
  m.def("packed_weight_stats", [] {
    cpu::DerivedCacheStats s = cpu::GetDerivedCacheStats();
    nb::dict d;
    d["hits"] = s.hits;
    d["packs"] = s.makes;
    d["skips"] = s.skips;
    d["forgotten"] = s.forgotten;
    return d;
  });
}

}  // namespace kiln::bind

NB_MODULE(_C, m) { kiln::bind::InitModule(m); }
