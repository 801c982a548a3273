// convert.cc - Python object <-> Tensor/attribute conversions.
#include "convert.h"

#include <nanobind/stl/string.h>

#include "runtime/eager.h"

namespace kiln::bind {

namespace {
nb::handle g_tensor_class;
}

void SetTensorClass(nb::handle cls) { g_tensor_class = cls.inc_ref(); }

namespace {

bool NumbersOnly(nb::handle h, int depth) {
  if (depth > 64) return false;
  if (!PyList_CheckExact(h.ptr()) && !PyTuple_CheckExact(h.ptr()))
    return PyLong_Check(h.ptr()) || PyFloat_Check(h.ptr());  // bool is an int
  for (nb::handle item : h)
    if (!NumbersOnly(item, depth + 1)) return false;
  return true;
}

}  // namespace

bool SequenceOperand(nb::handle h, Tensor* out) {
  if (!PyList_CheckExact(h.ptr()) && !PyTuple_CheckExact(h.ptr())) return false;
  if (!NumbersOnly(h, 0) || !g_tensor_class.is_valid()) return false;
  nb::object tensor = g_tensor_class(h);  // Tensor(list): NumPy's rules for the dtype
  *out = nb::cast<const Tensor&>(tensor);
  return true;
}

// OverflowError for a Python int past int64 (NumPy 2 raises the same); never std::bad_cast.
nb::python_error OverflowFor(nb::handle value, const char* what) {
  std::string text = nb::cast<std::string>(nb::repr(value));
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  PyErr_SetString(PyExc_OverflowError,
                  ("Python integer " + text + " is out of bounds for " + what).c_str());
  return nb::python_error();
}

int64_t ToInt64(nb::handle h, const char* what) {
  int overflow = 0;
  long long value = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  if (overflow != 0) throw OverflowFor(h, what);
  if (value == -1 && PyErr_Occurred()) throw nb::python_error();
  return value;
}

nb::object Wrap(Tensor t) {
  nb::handle cls = g_tensor_class.is_valid() ? g_tensor_class : nb::type<Tensor>();
  nb::object obj = nb::inst_alloc(cls);
  new (nb::inst_ptr<Tensor>(obj)) Tensor(std::move(t));
  nb::inst_mark_ready(obj);
  return obj;
}

nb::object WrapOutputs(std::vector<Tensor> outputs) {
  if (outputs.size() == 1) return Wrap(std::move(outputs[0]));
  nb::list items;
  for (auto& t : outputs) items.append(Wrap(std::move(t)));
  return nb::tuple(items);
}

namespace {

// A Python int as a weak 0-d tensor: int64, or uint64 for [2**63, 2**64) so that uint64 tensors
// take every value they hold (NumPy 2 too); anything else is an OverflowError.
Tensor WeakInt(nb::handle h) {
  int overflow = 0;
  long long value = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  if (overflow > 0) {
    unsigned long long big = PyLong_AsUnsignedLongLong(h.ptr());
    if (!PyErr_Occurred()) {
      Tensor t = Tensor::Empty({}, DType::UInt64);
      *t.data<uint64_t>() = big;
      t.impl()->wrapped_number = true;
      return t;
    }
  }
  if (overflow != 0 || (value == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    throw OverflowFor(h, "an int64 or uint64 tensor");
  }
  Tensor t = Tensor::Empty({}, DType::Int64);
  *t.data<int64_t>() = value;
  t.impl()->wrapped_number = true;
  return t;
}

}  // namespace

bool ToOperand(nb::handle h, Tensor* out) {
  if (nb::isinstance<Tensor>(h)) {
    *out = nb::cast<const Tensor&>(h);
    return true;
  }
  if (h.is_none()) {
    *out = Tensor();
    return true;
  }
  if (PyBool_Check(h.ptr())) {
    *out = ScalarTensor(h.ptr() == Py_True ? 1.0 : 0.0, DType::Bool);
    return true;
  }
  if (PyLong_Check(h.ptr())) {
    *out = WeakInt(h);
    return true;
  }
  if (PyFloat_Check(h.ptr())) {
    *out = ScalarTensor(PyFloat_AsDouble(h.ptr()), DType::Float64);
    return true;
  }
  return false;
}

AttrValue ToAttr(nb::handle h) {
  if (h.is_none()) return std::monostate{};
  if (PyBool_Check(h.ptr())) return h.ptr() == Py_True;
  if (PyLong_Check(h.ptr())) return ToInt64(h, "an int64 attribute");
  if (PyFloat_Check(h.ptr())) return nb::cast<double>(h);
  if (nb::isinstance<nb::str>(h)) return nb::cast<std::string>(h);
  if (nb::isinstance<DType>(h)) return nb::cast<DType>(h);
  if (nb::isinstance<nb::tuple>(h) || nb::isinstance<nb::list>(h)) return ToShape(h);
  throw nb::type_error(
      ("unsupported attribute value of type " + nb::cast<std::string>(nb::str(h.type()))).c_str());
}

Shape ToShape(nb::handle h) {
  Shape shape;
  for (nb::handle item : h) {
    if (!PyLong_Check(item.ptr()) || PyBool_Check(item.ptr()))
      throw nb::type_error("expected a tuple of ints");
    shape.push_back(ToInt64(item, "a shape or axis (int64)"));
  }
  return shape;
}

}  // namespace kiln::bind
