// dataset.cc - kiln._C.DatasetPipeline: Python sources and callables as the engine's stages.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstring>
#include <memory>

#include "convert.h"
#include "core/error.h"
#include "dataset/pipeline.h"
#include "dataset/vision_ops.h"

namespace kiln::bind {

namespace nb = nanobind;
using dataset::NextStatus;
using dataset::Pipeline;
using dataset::Row;
using dataset::Value;

namespace {

// An engine thread calls into Python for many rows. Python gives a thread without a thread
// state a new one for each GIL acquisition and destroys it after; this keeps one per engine
// thread from its first call until the thread ends (the pipeline's Stop, which runs without
// the GIL), so each row's acquisition is only the GIL's.
class EngineThreadState {
 public:
  EngineThreadState() {
    if (PyGILState_GetThisThreadState() != nullptr) return;  // a Python thread already
    outer_ = PyGILState_Ensure();
    saved_ = PyEval_SaveThread();
    owned_ = true;
  }
  ~EngineThreadState() {
    if (!owned_ || !Py_IsInitialized()) return;
    PyEval_RestoreThread(saved_);
    PyGILState_Release(outer_);
  }

 private:
  PyGILState_STATE outer_{};
  PyThreadState* saved_ = nullptr;
  bool owned_ = false;
};

// The GIL for one call from an engine thread (or any thread), held only for that moment and
// never while a stage waits on a queue.
struct KeepThreadState {
  KeepThreadState() {
    thread_local EngineThreadState state;  // made before the GIL is first taken
    (void)state;
  }
};

class Gil : private KeepThreadState {
  nb::gil_scoped_acquire gil_;  // a member: taken after the base made the thread state
};

// The engine frees values on its own threads: a Python reference is let go under the GIL.
void DecRef(void* object) {
  if (!Py_IsInitialized()) return;  // the interpreter is gone; so is the object
  Gil gil;
  Py_DECREF(static_cast<PyObject*>(object));
}

std::shared_ptr<void> HoldObject(nb::handle h) {
  return std::shared_ptr<void>(h.inc_ref().ptr(), DecRef);
}
Value Hold(nb::handle h) { return Value(HoldObject(h)); }
nb::handle Get(const std::shared_ptr<void>& object) {
  return nb::handle(static_cast<PyObject*>(object.get()));
}

// A row's tensor that views part of a source's data (a row of a dataset held in memory) is
// copied before it reaches the user, so writing to it cannot change the dataset (MindSpore's
// iterators copy too). Batches own their memory and pass as they are.
Tensor Detached(const Tensor& t) {
  const size_t bytes = t.numel() * t.itemsize();
  if (!t.is_contiguous() || t.storage()->nbytes() == bytes) return t;
  Tensor out = Tensor::Empty(t.shape(), t.dtype());
  if (bytes) std::memcpy(out.raw_data(), t.raw_data(), bytes);
  return out;
}

// A row for Python code: tensor values as NumPy arrays for user functions (MindSpore hands
// them NumPy), or as kiln.Tensors for the iterator.
nb::tuple Columns(const std::vector<Value>& columns, bool tensors_as_numpy) {
  nb::list out;
  for (const Value& v : columns) {
    if (!v.is_tensor()) {
      out.append(Get(v.object));
    } else if (tensors_as_numpy) {
      // A copy for user code, which may change its arguments in place.
      out.append(Wrap(v.tensor).attr("asnumpy")().attr("copy")());
    } else {
      out.append(Wrap(Detached(v.tensor)));
    }
  }
  return nb::tuple(out);
}

// A row's columns from what a Python callable returned: a tuple of its column values. kiln
// Tensors become tensor values, which later stages (batch) handle without the GIL.
std::vector<Value> ToColumns(nb::handle result, const char* what) {
  if (!nb::isinstance<nb::tuple>(result))
    throw nb::type_error((std::string(what) + " must return a tuple of columns").c_str());
  std::vector<Value> columns;
  for (nb::handle v : nb::borrow<nb::tuple>(result)) {
    if (nb::isinstance<Tensor>(v))
      columns.emplace_back(nb::cast<Tensor>(v));
    else
      columns.push_back(Hold(v));
  }
  return columns;
}

// The Python exception a failed stage carries: the one the user's code raised, or one made
// from the engine's own error.
nb::object ExceptionOf(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (nb::python_error& e) {
    return nb::borrow(e.value());
  } catch (const Error& e) {
    PyObject* type = e.kind() == ErrorKind::Value   ? PyExc_ValueError
                     : e.kind() == ErrorKind::Type  ? PyExc_TypeError
                     : e.kind() == ErrorKind::Index ? PyExc_IndexError
                                                    : PyExc_RuntimeError;
    return nb::handle(type)(e.what());
  } catch (const std::exception& e) {
    return nb::handle(PyExc_RuntimeError)(e.what());
  } catch (...) {
    return nb::handle(PyExc_RuntimeError)("unknown error");
  }
}

// A Python object holding an encoded image (a 1-D uint8 NumPy array or bytes, as a Python
// source yields them) copied into a tensor, so the native ops can take it without the GIL;
// an undefined tensor for anything else.
Tensor EncodedBytes(const Value& value) {
  Gil gil;
  PyObject* object = Get(value.object).ptr();
  if (!PyObject_CheckBuffer(object)) return Tensor();
  Py_buffer view;
  if (PyObject_GetBuffer(object, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
    PyErr_Clear();
    return Tensor();
  }
  Tensor out;
  const bool bytes = view.ndim == 1 && view.itemsize == 1 && view.format != nullptr &&
                     std::strcmp(view.format, "B") == 0;
  if (bytes && view.len > 0) {
    out = Tensor::Empty({static_cast<int64_t>(view.len)}, DType::UInt8);
    std::memcpy(out.raw_data(), view.buf, static_cast<size_t>(view.len));
  }
  PyBuffer_Release(&view);
  return out;
}

using SpecTuple = std::tuple<std::string, std::vector<int64_t>, std::vector<double>>;

std::vector<dataset::vision::OpSpec> ToSpecs(const std::vector<SpecTuple>& specs) {
  using dataset::vision::OpKind;
  static const OpKind kinds[] = {
      OpKind::kDecode,     OpKind::kResize,         OpKind::kRandomResizedCrop, OpKind::kCenterCrop,
      OpKind::kRandomCrop, OpKind::kHorizontalFlip, OpKind::kVerticalFlip,      OpKind::kRescale,
      OpKind::kNormalize,  OpKind::kHWC2CHW};
  std::vector<dataset::vision::OpSpec> out;
  for (const auto& [name, ints, reals] : specs) {
    const OpKind* kind = nullptr;
    for (const OpKind& k : kinds)
      if (name == dataset::vision::OpName(k)) kind = &k;
    KILN_CHECK(kind != nullptr, Value, "native vision chain: no op ", name);
    out.push_back({*kind, ints, reals});
  }
  return out;
}

// Owns the pipeline and stops it without the GIL: its threads may be waiting for the GIL to
// finish a Python call, and joining them while holding it would never end.
class PyPipeline {
 public:
  explicit PyPipeline(size_t capacity) : pipeline_(capacity) {}
  ~PyPipeline() { Stop(); }

  int AddSource(const std::string& name, nb::callable factory, int64_t passes) {
    auto held = HoldObject(factory);
    return pipeline_.AddSource(
        name,
        [held](int64_t pass) {
          Gil gil;
          auto iterator = HoldObject(nb::iter(Get(held)(pass)));
          return dataset::Producer([iterator](std::vector<Value>* columns) {
            Gil gil;
            PyObject* item = PyIter_Next(Get(iterator).ptr());
            if (item == nullptr) {
              if (PyErr_Occurred()) throw nb::python_error();
              return false;
            }
            *columns = ToColumns(nb::steal(item), "a dataset source");
            return true;
          });
        },
        passes);
  }

  // Rows of `columns` (kiln Tensors) at the indices index_factory(pass) returns.
  int AddTensorSource(const std::string& name, const std::vector<Tensor>& columns,
                      nb::callable index_factory, int64_t passes, int64_t batch_size,
                      bool drop_remainder) {
    auto held = HoldObject(index_factory);
    return pipeline_.AddTensorSource(
        name, columns,
        [held](int64_t pass) {
          Gil gil;
          return nb::cast<std::vector<int64_t>>(Get(held)(pass));
        },
        passes, batch_size, drop_remainder);
  }

  // fn(columns, epoch, index) -> tuple of columns, or None to drop the row; for a batch,
  // `columns` is the list of its rows' column tuples. `stack_tensors`: a batch whose columns
  // are all tensors is stacked in C++, without the GIL, and fn only combines the others.
  int AddMap(const std::string& name, int child, nb::callable fn, int workers, bool stack_tensors) {
    auto held = HoldObject(fn);
    return pipeline_.AddMap(
        name, child,
        [held, name, stack_tensors](Row* row) {
          if (stack_tensors && dataset::StackTensorColumns(row->parts, &row->columns)) return true;
          Gil gil;
          nb::object input;
          if (!row->parts.empty()) {
            nb::list parts;
            for (const Row& part : row->parts) parts.append(Columns(part.columns, true));
            input = parts;
          } else {
            input = Columns(row->columns, true);
          }
          nb::object result = Get(held)(input, row->epoch, row->index);
          if (result.is_none()) return false;
          row->columns = ToColumns(result, name.c_str());
          return true;
        },
        workers);
  }

  // Column `column` of each row through the native vision chain `specs` ((op name, ints,
  // reals) each), without the GIL; a row the chain does not take (not a JPEG) goes to
  // `fallback`, called like add_map's fn. Random ops draw from `seed` and the row's place.
  // `batch_size` > 0: the stage feeds a batch of that size directly, and writes each output
  // into its place in the batch's buffer (vision::BatchSlots), which the batch then takes as is.
  int AddVisionMap(const std::string& name, int child, const std::vector<SpecTuple>& specs,
                   int column, uint64_t seed, nb::callable fallback, int workers,
                   int64_t batch_size) {
    using dataset::vision::BatchSlots;
    auto chain = std::make_shared<const dataset::vision::Chain>(ToSpecs(specs));
    auto held = HoldObject(fallback);
    auto slots = batch_size > 0 ? std::make_shared<BatchSlots>(batch_size) : nullptr;
    return pipeline_.AddMap(
        name, child,
        [chain, held, column, seed, slots](Row* row) {
          KILN_CHECK(column >= 0 && column < static_cast<int>(row->columns.size()), Index,
                     "the row has no column ", column);
          Value& value = row->columns[column];
          const int64_t epoch = row->epoch, index = row->index;
          bool placed = false;
          dataset::vision::Allocate allocate;
          if (slots)
            allocate = [&](const Shape& shape, DType dtype) {
              placed = true;
              return slots->Slot(epoch, index, shape, dtype);
            };
          const Tensor input = value.is_tensor() ? value.tensor : EncodedBytes(value);
          if (input.defined()) {
            try {
              dataset::vision::RowRandom random(seed, epoch, index);
              value = Value(chain->Apply(input, random, allocate));
              if (slots && !placed) slots->Skip(epoch, index);
              return true;
            } catch (const dataset::vision::NotNative&) {
              // left to the Python transforms below
            }
          }
          if (slots) slots->Skip(epoch, index);
          Gil gil;
          nb::object result = Get(held)(Columns(row->columns, true), row->epoch, row->index);
          if (result.is_none()) return false;
          row->columns = ToColumns(result, "map");
          return true;
        },
        workers);
  }

  Pipeline& pipeline() { return pipeline_; }

  // (0, columns) a row, (1, None) the end of an epoch, (2, None) the end of the data,
  // (3, (where, exception)) a failure. Waits without the GIL, checking for Ctrl-C in between.
  nb::tuple Next() {
    Row row;
    // A row already queued (the usual case when loading keeps ahead) is taken without letting
    // go of the GIL: releasing and retaking it costs more than the pop. Stages never wait for
    // the GIL while they hold a queue's lock, so this cannot block them.
    NextStatus status = pipeline_.GetNext(&row, std::chrono::milliseconds(0));
    while (status == NextStatus::kTimeout) {
      {
        nb::gil_scoped_release release;
        status = pipeline_.GetNext(&row, std::chrono::milliseconds(50));
      }
      if (status == NextStatus::kTimeout && PyErr_CheckSignals() != 0) throw nb::python_error();
    }
    switch (status) {
      case NextStatus::kRow:
        return nb::make_tuple(0, Columns(row.columns, false));
      case NextStatus::kEndOfEpoch:
        return nb::make_tuple(1, nb::none());
      case NextStatus::kFailure:
        return nb::make_tuple(3, nb::make_tuple(row.where, ExceptionOf(row.error)));
      default:
        return nb::make_tuple(2, nb::none());
    }
  }

  void Stop() {
    nb::gil_scoped_release release;
    pipeline_.Stop();
  }

 private:
  Pipeline pipeline_;
};

}  // namespace

void BindDataset(nb::module_& m) {
  nb::class_<PyPipeline>(m, "DatasetPipeline")
      .def(nb::init<size_t>(), nb::arg("queue_capacity"))
      .def("add_source", &PyPipeline::AddSource)
      .def("add_tensor_source", &PyPipeline::AddTensorSource, nb::arg("name"), nb::arg("columns"),
           nb::arg("index_factory"), nb::arg("passes"), nb::arg("batch_size") = 0,
           nb::arg("drop_remainder") = false)
      .def("add_map", &PyPipeline::AddMap, nb::arg("name"), nb::arg("child"), nb::arg("fn"),
           nb::arg("workers"), nb::arg("stack_tensors") = false)
      .def("add_vision_map", &PyPipeline::AddVisionMap, nb::arg("name"), nb::arg("child"),
           nb::arg("specs"), nb::arg("column"), nb::arg("seed"), nb::arg("fallback"),
           nb::arg("workers"), nb::arg("batch_size") = 0)
      .def("add_take", [](PyPipeline& p, int c, int64_t n) { return p.pipeline().AddTake(c, n); })
      .def("add_skip", [](PyPipeline& p, int c, int64_t n) { return p.pipeline().AddSkip(c, n); })
      .def("add_repeat",
           [](PyPipeline& p, int c, int64_t n) { return p.pipeline().AddRepeat(c, n); })
      .def("add_shuffle", [](PyPipeline& p, int c, int64_t size,
                             uint64_t seed) { return p.pipeline().AddShuffle(c, size, seed); })
      .def("add_project",
           [](PyPipeline& p, int c, std::vector<int> cols) {
             return p.pipeline().AddProject(c, std::move(cols));
           })
      .def("add_batch", [](PyPipeline& p, int c, int64_t size,
                           bool drop) { return p.pipeline().AddBatch(c, size, drop); })
      .def("add_zip",
           [](PyPipeline& p, const std::vector<int>& c) { return p.pipeline().AddZip(c); })
      .def("add_concat",
           [](PyPipeline& p, const std::vector<int>& c) { return p.pipeline().AddConcat(c); })
      .def("start", [](PyPipeline& p, int root) { p.pipeline().Start(root); })
      .def("next", &PyPipeline::Next)
      .def("stop", &PyPipeline::Stop)
      .def_prop_ro("num_threads", [](PyPipeline& p) { return p.pipeline().num_threads(); });
}

}  // namespace kiln::bind
