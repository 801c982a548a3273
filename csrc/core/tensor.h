// tensor.h - Storage (shared bytes) and Tensor (a strided view of a Storage with a dtype).
//
// A Tensor is a cheap handle: copying it shares the TensorImpl. Views (permute, slice, expand,
// squeeze, reshape where the layout allows) make a new TensorImpl over the same Storage.
// Strides and offsets count elements, not bytes; strides may be zero (broadcast) but never
// negative.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/dtype.h"

namespace kiln {

using Shape = std::vector<int64_t>;

// The element count of `shape`; ValueError when it does not fit int64 (checked arithmetic:
// a wrapped count would allocate too little and let kernels write past the buffer). Unknown
// dims (-1, Graph mode's analysis) give a negative count, as before.
int64_t NumElements(const Shape& shape);
// The bytes a contiguous tensor of `shape` and `dtype` needs; ValueError on int64 overflow.
size_t ByteCount(const Shape& shape, DType dtype);
// Throws ValueError naming `op` when a result shape has more elements or bytes than int64 holds.
// Called on every inferred output shape (eager and graph), before anything is allocated.
void CheckShapeSize(const char* op, const Shape& shape, DType dtype);
Shape ContiguousStrides(const Shape& shape);
// Wraps a possibly negative axis into [0, ndim); throws IndexError naming `op` when out of range.
int64_t NormalizeAxis(int64_t axis, int64_t ndim, const char* op);

// Values computed from a Storage's bytes (packed weights); kernels/cpu/derived_cache.cc keeps
// them. The storage owns them, so they die with the bytes.
class DerivedValues {
 public:
  virtual ~DerivedValues() = default;
  // The bytes now have write version `version`: values made from older bytes are freed at once,
  // not at their next request, which a weight being trained may never make (its inference
  // packs would stay for the whole training run).
  virtual void DropStale(uint64_t version) = 0;
};

class Storage {
 public:
  // Memory from the caching allocator, 64-byte aligned.
  static std::shared_ptr<Storage> Allocate(size_t nbytes);
  // Memory owned by someone else (a NumPy array); `release` runs when the last view dies.
  static std::shared_ptr<Storage> Borrow(void* data, size_t nbytes, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }

  // Counts writes to these bytes through any view (MarkWritten), so values derived from them
  // (a packed copy of a weight) can tell when they are stale.
  uint64_t write_version() const { return write_version_.load(std::memory_order_relaxed); }
  void NoteWrite() {
    const uint64_t version = write_version_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (DerivedValues* values = derived_values_.load(std::memory_order_acquire))
      values->DropStale(version);
  }
  // True while a writable NumPy array may alias these bytes: borrowed from one (for good), or
  // exported by asnumpy() and not yet garbage-collected. NumPy writes bypass write_version, so
  // nothing derived from the bytes may be cached meanwhile.
  bool numpy_alias() const { return borrowed_from_numpy_ || numpy_views_ > 0; }
  void SetBorrowedFromNumpy() { borrowed_from_numpy_ = true; }
  void AddNumpyView() { ++numpy_views_; }
  // The array is gone; whatever it wrote counts as one write.
  void ReleaseNumpyView() {
    --numpy_views_;
    NoteWrite();
  }
  // Values computed from these bytes (packed weights), owned here so they die with the bytes.
  // Only kernels/cpu/derived_cache.cc touches them, under its lock; set once, then kept.
  DerivedValues* derived() const { return derived_values_.load(std::memory_order_acquire); }
  void SetDerived(std::unique_ptr<DerivedValues> values) {
    derived_ = std::move(values);
    derived_values_.store(derived_.get(), std::memory_order_release);
  }

 private:
  Storage() = default;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  std::atomic<uint64_t> write_version_{0};
  std::atomic<int> numpy_views_{0};
  bool borrowed_from_numpy_ = false;
  std::unique_ptr<DerivedValues> derived_;
  std::atomic<DerivedValues*> derived_values_{nullptr};  // derived_, readable without a lock
  size_t rounded_size_ = 0;        // nonzero when owned by the caching allocator
  std::function<void()> release_;  // set when borrowed
};

struct AutogradMeta;  // defined by the autodiff layer; null for tensors outside any tape

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  int64_t offset = 0;
  DType dtype = DType::Float32;
  // A Python scalar turned into a 0-d tensor: it takes part in promotion by category only.
  bool wrapped_number = false;
  std::shared_ptr<AutogradMeta> autograd;
  uint64_t version = 0;  // bumped by in-place writes, so saved tensors can detect them
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  static Tensor Empty(const Shape& shape, DType dtype);
  static Tensor FromStorage(std::shared_ptr<Storage> storage, const Shape& shape,
                            const Shape& strides, int64_t offset, DType dtype);

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  const Shape& shape() const { return impl_->shape; }
  const Shape& strides() const { return impl_->strides; }
  int64_t offset() const { return impl_->offset; }
  DType dtype() const { return impl_->dtype; }
  int64_t ndim() const { return static_cast<int64_t>(impl_->shape.size()); }
  int64_t numel() const { return NumElements(impl_->shape); }
  int64_t dim(int64_t i) const { return impl_->shape[i]; }
  size_t itemsize() const { return ItemSize(impl_->dtype); }
  const std::shared_ptr<Storage>& storage() const { return impl_->storage; }
  bool is_contiguous() const;
  bool same_storage(const Tensor& other) const { return storage() == other.storage(); }

  void* raw_data() const {
    return static_cast<char*>(impl_->storage->data()) + impl_->offset * itemsize();
  }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }

  // Views: no data is copied.
  Tensor AsStrided(const Shape& shape, const Shape& strides, int64_t offset) const;
  Tensor Permute(const std::vector<int64_t>& perm) const;
  Tensor Slice(int64_t axis, int64_t start, int64_t stop, int64_t step) const;
  Tensor Select(int64_t axis, int64_t index) const;  // drops `axis`
  Tensor Expand(const Shape& shape) const;
  Tensor Unsqueeze(int64_t axis) const;
  Tensor Squeeze(const std::vector<int64_t>& axes) const;
  // A view with the new shape when the strides allow one; std::nullopt when a copy is needed.
  std::optional<Tensor> ViewAs(const Shape& shape) const;

  // Copies: these need kernels (kernels/cpu/copy.cc).
  Tensor Contiguous() const;
  Tensor Reshape(const Shape& shape) const;  // a view when possible, else a contiguous copy
  Tensor Clone() const;
  Tensor To(DType dtype) const;  // same tensor when the dtype already matches

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Records an in-place write to `t`: its own version (the tape's check) and its storage's.
inline void MarkWritten(const Tensor& t) {
  t.impl()->version++;
  t.storage()->NoteWrite();
}

// CheckWeakIntFits for a weak Python-int tensor `t` (int64, or uint64 past int64) about to be
// cast to `target`; nothing for strong tensors, floats and bools.
void CheckWeakScalarFits(const char* op, const Tensor& t, DType target);

// Fills in one -1 in `shape` from the element count; checks the counts agree (ValueError).
Shape InferReshape(const Shape& input_shape, Shape shape, const char* op);

}  // namespace kiln
