// runtime.h - kiln's public C++ API: load an exported model and run it, without Python.
//
//   kiln::runtime::Model model = kiln::runtime::Model::Load("net.mindir");
//   kiln::runtime::Tensor x(kiln::runtime::DType::Float32, {1, 64});
//   std::fill_n(x.data<float>(), x.num_elements(), 0.5f);
//   std::vector<kiln::runtime::Tensor> y = model.Run({x});
//
// Link with libkiln (-lkiln). Errors are std::runtime_error with a message naming the file,
// the input and what was expected. A Model is immutable once loaded: Run may be called from
// several threads at once. This header is the whole public surface; it includes nothing of
// kiln's internals, so they may change without breaking programs built against it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::runtime {

enum class DType {
  Bool,
  UInt8,
  UInt16,
  UInt32,
  UInt64,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64
};
const char* DTypeName(DType dtype);  // "float32", as NumPy names it
size_t ItemSize(DType dtype);        // bytes per element

// A dense, C-ordered tensor that owns its memory (shared between copies of the handle).
class Tensor {
 public:
  Tensor();  // an empty handle: defined() is false
  // Zero-filled memory for `shape`; std::runtime_error if its byte count overflows.
  Tensor(DType dtype, const std::vector<int64_t>& shape);
  // A copy of `nbytes` bytes at `data` (nbytes must equal the shape's byte count).
  Tensor(DType dtype, const std::vector<int64_t>& shape, const void* data, size_t nbytes);

  bool defined() const;
  DType dtype() const;
  const std::vector<int64_t>& shape() const;
  int64_t num_elements() const;
  size_t nbytes() const;
  void* raw_data();
  const void* raw_data() const;
  template <typename T>
  T* data() {
    return static_cast<T*>(raw_data());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(raw_data());
  }

  struct Impl;  // kiln's internal tensor

 private:
  explicit Tensor(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
  friend class Model;
};

// A model input or output: its name, dtype and shape (-1 where any size is accepted).
struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

class Model {
 public:
  // Reads and compiles a model file written by kiln.export(..., file_format="MINDIR").
  static Model Load(const std::string& path);

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;  // the graph's results, flattened in order
  // Runs on one tensor per input; the outputs in order (a nested output tree is flattened, and
  // constant leaves are not tensors: see docs/export.md).
  std::vector<Tensor> Run(const std::vector<Tensor>& inputs) const;

  struct Impl;

 private:
  explicit Model(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace kiln::runtime
