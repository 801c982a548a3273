// tensor.cc - the TensorBase class: metadata, NumPy exchange, views and Python operators.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "dispatch.h"
#include "runtime/eager.h"

namespace kiln::bind {

namespace {

nb::dlpack::dtype ToDlpack(DType d) {
  using Code = nb::dlpack::dtype_code;
  auto make = [](Code code, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  };
  switch (d) {
    case DType::Bool:
      return make(Code::Bool, 8);
    case DType::UInt8:
      return make(Code::UInt, 8);
    case DType::UInt16:
      return make(Code::UInt, 16);
    case DType::UInt32:
      return make(Code::UInt, 32);
    case DType::UInt64:
      return make(Code::UInt, 64);
    case DType::Int8:
      return make(Code::Int, 8);
    case DType::Int16:
      return make(Code::Int, 16);
    case DType::Int32:
      return make(Code::Int, 32);
    case DType::Int64:
      return make(Code::Int, 64);
    case DType::Float16:
      return make(Code::Float, 16);
    case DType::BFloat16:
      return make(Code::Bfloat, 16);
    case DType::Float32:
      return make(Code::Float, 32);
    case DType::Float64:
      return make(Code::Float, 64);
  }
  return make(Code::Float, 32);
}

DType FromDlpack(nb::dlpack::dtype d) {
  using Code = nb::dlpack::dtype_code;
  auto code = static_cast<Code>(d.code);
  if (d.lanes == 1) {
    if (code == Code::Bool) return DType::Bool;
    if (code == Code::UInt && d.bits == 8) return DType::UInt8;
    if (code == Code::UInt && d.bits == 16) return DType::UInt16;
    if (code == Code::UInt && d.bits == 32) return DType::UInt32;
    if (code == Code::UInt && d.bits == 64) return DType::UInt64;
    if (code == Code::Int && d.bits == 8) return DType::Int8;
    if (code == Code::Int && d.bits == 16) return DType::Int16;
    if (code == Code::Int && d.bits == 32) return DType::Int32;
    if (code == Code::Int && d.bits == 64) return DType::Int64;
    if (code == Code::Float && d.bits == 16) return DType::Float16;
    if (code == Code::Bfloat && d.bits == 16) return DType::BFloat16;
    if (code == Code::Float && d.bits == 32) return DType::Float32;
    if (code == Code::Float && d.bits == 64) return DType::Float64;
  }
  throw nb::type_error("Tensor: unsupported array element type");
}

// Shares the array's memory; the array stays alive while any view of it does.
Tensor FromArray(nb::ndarray<nb::ro, nb::device::cpu> array) {
  DType dtype = FromDlpack(array.dtype());
  Shape shape(array.ndim()), strides(array.ndim());
  int64_t extent = 1;
  for (size_t i = 0; i < array.ndim(); ++i) {
    shape[i] = array.shape(i);
    strides[i] = array.stride(i);
    if (strides[i] < 0) throw nb::value_error("Tensor: negative strides need a copy first");
    if (shape[i] == 0) extent = 0;
    if (extent) extent += (shape[i] - 1) * strides[i];
  }
  // The ndarray handle keeps the NumPy array alive; it is dropped with the GIL held.
  auto* keep = new nb::ndarray<nb::ro, nb::device::cpu>(array);
  auto storage = Storage::Borrow(const_cast<void*>(array.data()), extent * ItemSize(dtype), [keep] {
    nb::gil_scoped_acquire gil;
    delete keep;
  });
  storage->SetBorrowedFromNumpy();  // the caller may still write through the array
  return Tensor::FromStorage(std::move(storage), shape, strides, 0, dtype);
}

void InitFromArray(Tensor* self, nb::ndarray<nb::ro, nb::device::cpu> array) {
  new (self) Tensor(FromArray(array));
}

// A NumPy array over the tensor's own memory (no copy); bfloat16 has no NumPy type. A writable
// one marks the storage as aliased (see Storage::numpy_alias); kiln's own readers (printing,
// item(), saving) take a read-only one, which leaves it unmarked.
nb::object ToNumpy(const Tensor& t, bool writable) {
  if (t.dtype() == DType::BFloat16)
    throw nb::type_error("asnumpy: NumPy has no bfloat16; cast to float32 first");
  auto* keep = new std::shared_ptr<Storage>(t.storage());
  nb::capsule owner = writable
                          ? nb::capsule(keep,
                                        [](void* p) noexcept {
                                          auto* storage = static_cast<std::shared_ptr<Storage>*>(p);
                                          (*storage)->ReleaseNumpyView();
                                          delete storage;
                                        })
                          : nb::capsule(keep, [](void* p) noexcept {
                              delete static_cast<std::shared_ptr<Storage>*>(p);
                            });
  if (writable) t.storage()->AddNumpyView();
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  nb::ndarray<nb::numpy> array(t.raw_data(), t.ndim(), shape.data(), owner, strides.data(),
                               ToDlpack(t.dtype()), nb::device::cpu::value);
  nb::object result = nb::cast(array, nb::rv_policy::reference);
  if (!writable) result.attr("flags").attr("writeable") = false;
  return result;
}

// `param * 0.9` on an eager tensor (a Parameter, a constant) while this thread compiles: a node
// of the graph, never a value baked in now. An operand that is neither a number nor tensor-like
// (with a shape) gets NotImplemented, as in eager mode.
nb::object BinaryToGraph(PyObject* graph, OpKind kind, const Tensor& self, nb::handle other,
                         bool swap) {
  bool number = PyLong_Check(other.ptr()) || PyFloat_Check(other.ptr());  // bool is an int
  nb::object operand = nb::borrow(other);
  Tensor sequence;
  if ((kind == OpKind::Add || kind == OpKind::Sub) && SequenceOperand(other, &sequence))
    operand = Wrap(std::move(sequence));  // a list of numbers: a constant of the graph
  else if (!number && !nb::hasattr(other, "shape"))
    return nb::borrow(Py_NotImplemented);
  nb::handle me = nb::find(&self);
  return EmitToGraph(graph, kind, swap ? nb::make_tuple(operand, me) : nb::make_tuple(me, operand),
                     nb::tuple());
}

// Binary operator: Tensor op (Tensor | scalar), reflected when `swap`; NotImplemented otherwise.
template <OpKind kKind, bool kSwap>
nb::object BinaryOperator(const Tensor& self, nb::handle other) {
  if (PyObject* graph = GraphTarget()) return BinaryToGraph(graph, kKind, self, other, kSwap);
  Tensor rhs;
  if (!ToOperand(other, &rhs) || !rhs.defined()) {
    // only + and - take a list of numbers (converted on this slow path, never the common one)
    constexpr bool kSequences = kKind == OpKind::Add || kKind == OpKind::Sub;
    if (!kSequences || !SequenceOperand(other, &rhs)) return nb::borrow(Py_NotImplemented);
  }
  if constexpr (kSwap) return Wrap(CallOp1(kKind, {rhs, self}));
  return Wrap(CallOp1(kKind, {self, rhs}));
}

template <OpKind kKind>
nb::object UnaryOperator(const Tensor& self) {
  if (PyObject* graph = GraphTarget()) {
    return EmitToGraph(graph, kKind, nb::make_tuple(nb::find(&self)), nb::tuple());
  }
  return Wrap(CallOp1(kKind, {self}));
}

// A raw strided view for tests and indexing internals; checked to stay inside the storage.
Tensor AsStridedChecked(const Tensor& t, const Shape& shape, const Shape& strides, int64_t offset) {
  if (shape.size() != strides.size())
    throw nb::value_error("_as_strided: shape/strides rank differ");
  int64_t last = offset;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0 || strides[i] < 0)
      throw nb::value_error("_as_strided: negative size or stride");
    if (shape[i] == 0) return t.AsStrided(shape, strides, offset);
    last += (shape[i] - 1) * strides[i];
  }
  if (offset < 0 ||
      (last + 1) * static_cast<int64_t>(t.itemsize()) > static_cast<int64_t>(t.storage()->nbytes()))
    throw nb::index_error("_as_strided: view reaches outside the tensor's storage");
  return t.AsStrided(shape, strides, offset);
}

}  // namespace

void BindTensor(nb::module_& m) {
  // Code below the Python Tensor class (kiln.ops) makes its tensors here: an instance of the
  // registered class (kiln.Tensor), as every op result is.
  m.def(
      "tensor_from_array",
      [](nb::ndarray<nb::ro, nb::device::cpu> array) { return Wrap(FromArray(array)); },
      nb::arg("array"), "A kiln.Tensor sharing the array's memory (as Tensor(array) does).");
  nb::class_<Tensor>(m, "TensorBase")
      .def("__init__",
           [](Tensor* self, const Tensor& other) {
             new (self) Tensor(other.AsStrided(other.shape(), other.strides(), other.offset()));
           })
      .def("__init__", &InitFromArray, nb::arg("array"))
      .def_prop_ro("_shape", [](const Tensor& t) { return nb::tuple(nb::cast(t.shape())); })
      .def_prop_ro("_strides", [](const Tensor& t) { return t.strides(); })
      .def_prop_ro("_offset", &Tensor::offset)
      .def_prop_ro("_dtype", &Tensor::dtype)
      .def_prop_ro("ndim", &Tensor::ndim)
      .def_prop_ro("size", &Tensor::numel)
      .def_prop_ro("_version", [](const Tensor& t) { return t.impl()->version; })
      .def_prop_ro("_data_ptr",
                   [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()); })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("_shares_storage", &Tensor::same_storage)
      .def("_numpy", &ToNumpy, nb::arg("writable") = true)
      .def("_as_strided",
           [](const Tensor& t, const Shape& shape, const Shape& strides, int64_t offset) {
             return Wrap(AsStridedChecked(t, shape, strides, offset));
           })
      .def("contiguous", [](const Tensor& t) { return Wrap(t.Contiguous()); })
      .def("_clone", [](const Tensor& t) { return Wrap(t.Clone()); })
      .def("__add__", &BinaryOperator<OpKind::Add, false>)
      .def("__radd__", &BinaryOperator<OpKind::Add, true>)
      .def("__sub__", &BinaryOperator<OpKind::Sub, false>)
      .def("__rsub__", &BinaryOperator<OpKind::Sub, true>)
      .def("__mul__", &BinaryOperator<OpKind::Mul, false>)
      .def("__rmul__", &BinaryOperator<OpKind::Mul, true>)
      .def("__truediv__", &BinaryOperator<OpKind::Div, false>)
      .def("__rtruediv__", &BinaryOperator<OpKind::Div, true>)
      .def("__floordiv__", &BinaryOperator<OpKind::FloorDiv, false>)
      .def("__rfloordiv__", &BinaryOperator<OpKind::FloorDiv, true>)
      .def("__mod__", &BinaryOperator<OpKind::Mod, false>)
      .def("__rmod__", &BinaryOperator<OpKind::Mod, true>)
      .def("__pow__", &BinaryOperator<OpKind::Pow, false>)
      .def("__rpow__", &BinaryOperator<OpKind::Pow, true>)
      .def("__matmul__", &BinaryOperator<OpKind::MatMul, false>)
      .def("__rmatmul__", &BinaryOperator<OpKind::MatMul, true>)
      .def("__eq__", &BinaryOperator<OpKind::Equal, false>)
      .def("__ne__", &BinaryOperator<OpKind::NotEqual, false>)
      .def("__lt__", &BinaryOperator<OpKind::Less, false>)
      .def("__le__", &BinaryOperator<OpKind::LessEqual, false>)
      .def("__gt__", &BinaryOperator<OpKind::Greater, false>)
      .def("__ge__", &BinaryOperator<OpKind::GreaterEqual, false>)
      .def("__and__", &BinaryOperator<OpKind::BitwiseAnd, false>)
      .def("__rand__", &BinaryOperator<OpKind::BitwiseAnd, true>)
      .def("__or__", &BinaryOperator<OpKind::BitwiseOr, false>)
      .def("__ror__", &BinaryOperator<OpKind::BitwiseOr, true>)
      .def("__xor__", &BinaryOperator<OpKind::BitwiseXor, false>)
      .def("__rxor__", &BinaryOperator<OpKind::BitwiseXor, true>)
      .def("__neg__", &UnaryOperator<OpKind::Neg>)
      .def("__abs__", &UnaryOperator<OpKind::Abs>)
      .def("__lshift__", &BinaryOperator<OpKind::LeftShift, false>)
      .def("__rlshift__", &BinaryOperator<OpKind::LeftShift, true>)
      .def("__rshift__", &BinaryOperator<OpKind::RightShift, false>)
      .def("__rrshift__", &BinaryOperator<OpKind::RightShift, true>)
      .def("__invert__", &UnaryOperator<OpKind::BitwiseNot>)  // logical for bools
      .def("__hash__", [](nb::handle self) { return reinterpret_cast<intptr_t>(self.ptr()); });
}

}  // namespace kiln::bind
