// tensor.cc - storage ownership and the metadata-only view functions of Tensor.
#include "core/tensor.h"

#include <algorithm>
#include <cstdint>

#include "core/allocator.h"
#include "core/error.h"

namespace kiln {

namespace {

// The product of `shape`'s dims (zero dims counted as `zero_as`); false when it overflows int64.
bool CheckedProduct(const Shape& shape, int64_t zero_as, int64_t* product) {
  int64_t n = 1;
  bool unknown = false;
  for (int64_t d : shape) {
    if (d < 0) {
      unknown = true;  // -1: unknown until run time; the count is meaningless but harmless
      continue;
    }
    if (__builtin_mul_overflow(n, d == 0 ? zero_as : d, &n)) return false;
  }
  *product = unknown ? -n : n;
  return true;
}

[[noreturn]] void ThrowTooLarge(const char* op, const Shape& shape, const char* what) {
  Throw(ErrorKind::Value, op, op[0] ? ": " : "", "a tensor of shape ", ShapeStr(shape),
        " has too many ", what, " (more than 2**63 - 1)");
}

}  // namespace

int64_t NumElements(const Shape& shape) {
  int64_t n = 0;
  if (!CheckedProduct(shape, 0, &n)) ThrowTooLarge("", shape, "elements");
  return n;
}

size_t ByteCount(const Shape& shape, DType dtype) {
  int64_t bytes = 0;
  if (__builtin_mul_overflow(NumElements(shape), static_cast<int64_t>(ItemSize(dtype)), &bytes))
    ThrowTooLarge("", shape, "bytes");
  return static_cast<size_t>(bytes);
}

void CheckShapeSize(const char* op, const Shape& shape, DType dtype) {
  int64_t n = 0, bytes = 0;
  // Zero dims count as one: strides of an empty tensor are still computed from the other dims.
  if (!CheckedProduct(shape, 1, &n)) ThrowTooLarge(op, shape, "elements");
  if (__builtin_mul_overflow(n < 0 ? -n : n, static_cast<int64_t>(ItemSize(dtype)), &bytes))
    ThrowTooLarge(op, shape, "bytes");
}

Shape ContiguousStrides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = stride;
    // Only an empty tensor (a zero dim elsewhere) can get here with a product past int64;
    // its strides are never used to address memory, so saturating is safe.
    if (__builtin_mul_overflow(stride, std::max<int64_t>(shape[i], 1), &stride)) stride = INT64_MAX;
  }
  return strides;
}

int64_t NormalizeAxis(int64_t axis, int64_t ndim, const char* op) {
  int64_t bound = std::max<int64_t>(ndim, 1);
  KILN_CHECK(axis >= -bound && axis < bound, Axis, op, ": axis ", axis,
             " is out of range for a tensor of rank ", ndim);
  return axis < 0 ? axis + bound : axis;
}

std::shared_ptr<Storage> Storage::Allocate(size_t nbytes) {
  std::shared_ptr<Storage> storage(new Storage());
  storage->data_ = AllocateBytes(nbytes, &storage->rounded_size_);
  storage->nbytes_ = nbytes;
  return storage;
}

std::shared_ptr<Storage> Storage::Borrow(void* data, size_t nbytes, std::function<void()> release) {
  std::shared_ptr<Storage> storage(new Storage());
  storage->data_ = data;
  storage->nbytes_ = nbytes;
  storage->release_ = std::move(release);
  return storage;
}

Storage::~Storage() {
  if (rounded_size_ != 0) FreeBytes(data_, rounded_size_);
  if (release_) release_();
}

Tensor Tensor::Empty(const Shape& shape, DType dtype) {
  for (int64_t d : shape)
    KILN_CHECK(d >= 0, Value, "shape dimensions must be non-negative, got ", d);
  auto storage = Storage::Allocate(ByteCount(shape, dtype));
  return FromStorage(std::move(storage), shape, ContiguousStrides(shape), 0, dtype);
}

Tensor Tensor::FromStorage(std::shared_ptr<Storage> storage, const Shape& shape,
                           const Shape& strides, int64_t offset, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t i = ndim() - 1; i >= 0; --i) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

Tensor Tensor::AsStrided(const Shape& shape, const Shape& strides, int64_t offset) const {
  return FromStorage(storage(), shape, strides, offset, dtype());
}

Tensor Tensor::Permute(const std::vector<int64_t>& perm) const {
  KILN_CHECK(static_cast<int64_t>(perm.size()) == ndim(), Value,
             "transpose: permutation of length ", perm.size(), " does not match a tensor of rank ",
             ndim());
  std::vector<bool> seen(ndim(), false);
  Shape shape(ndim()), strides(ndim());
  for (int64_t i = 0; i < ndim(); ++i) {
    int64_t axis = NormalizeAxis(perm[i], ndim(), "transpose");
    KILN_CHECK(!seen[axis], Value, "transpose: axis ", axis, " repeats in the permutation");
    seen[axis] = true;
    shape[i] = this->shape()[axis];
    strides[i] = this->strides()[axis];
  }
  return AsStrided(shape, strides, offset());
}

Tensor Tensor::Slice(int64_t axis, int64_t start, int64_t stop, int64_t step) const {
  KILN_CHECK(step > 0, Value, "slice: step must be positive, got ", step);
  int64_t size = shape()[axis];
  start = std::clamp<int64_t>(start < 0 ? start + size : start, 0, size);
  stop = std::clamp<int64_t>(stop < 0 ? stop + size : stop, 0, size);
  int64_t length = stop > start ? (stop - start + step - 1) / step : 0;
  Shape shape = this->shape(), strides = this->strides();
  shape[axis] = length;
  strides[axis] *= step;
  return AsStrided(shape, strides, offset() + (length > 0 ? start * this->strides()[axis] : 0));
}

Tensor Tensor::Select(int64_t axis, int64_t index) const {
  int64_t size = shape()[axis];
  KILN_CHECK(index >= -size && index < size, Index, "index ", index, " is out of bounds for axis ",
             axis, " with size ", size);
  if (index < 0) index += size;
  Shape shape = this->shape(), strides = this->strides();
  shape.erase(shape.begin() + axis);
  strides.erase(strides.begin() + axis);
  return AsStrided(shape, strides, offset() + index * this->strides()[axis]);
}

Tensor Tensor::Expand(const Shape& target) const {
  int64_t extra = static_cast<int64_t>(target.size()) - ndim();
  KILN_CHECK(extra >= 0, Value, "broadcast_to: cannot broadcast shape ", ShapeStr(shape()), " to ",
             ShapeStr(target));
  Shape strides(target.size(), 0);
  for (int64_t i = 0; i < ndim(); ++i) {
    int64_t want = target[extra + i], have = shape()[i];
    KILN_CHECK(have == want || have == 1, Value, "broadcast_to: cannot broadcast shape ",
               ShapeStr(shape()), " to ", ShapeStr(target));
    strides[extra + i] = have == want ? this->strides()[i] : 0;
  }
  return AsStrided(target, strides, offset());
}

Tensor Tensor::Unsqueeze(int64_t axis) const {
  axis = NormalizeAxis(axis, ndim() + 1, "expand_dims");
  Shape shape = this->shape(), strides = this->strides();
  int64_t stride = axis < ndim() ? strides[axis] * shape[axis] : 1;
  shape.insert(shape.begin() + axis, 1);
  strides.insert(strides.begin() + axis, stride);
  return AsStrided(shape, strides, offset());
}

Tensor Tensor::Squeeze(const std::vector<int64_t>& axes) const {
  std::vector<bool> drop(ndim(), false);
  if (axes.empty()) {
    for (int64_t i = 0; i < ndim(); ++i) drop[i] = shape()[i] == 1;
  }
  for (int64_t axis : axes) {
    axis = NormalizeAxis(axis, ndim(), "squeeze");
    KILN_CHECK(shape()[axis] == 1, Value, "squeeze: axis ", axis, " of shape ", ShapeStr(shape()),
               " has size ", shape()[axis], ", not 1");
    drop[axis] = true;
  }
  Shape shape, strides;
  for (int64_t i = 0; i < ndim(); ++i) {
    if (drop[i]) continue;
    shape.push_back(this->shape()[i]);
    strides.push_back(this->strides()[i]);
  }
  return AsStrided(shape, strides, offset());
}

// Walks the old and new shapes in groups of dimensions with equal element counts; a group can be
// viewed when its old dimensions are laid out like one contiguous run.
std::optional<Tensor> Tensor::ViewAs(const Shape& target) const {
  if (numel() == 0 || is_contiguous())
    return AsStrided(target, ContiguousStrides(target), offset());
  Shape new_strides(target.size(), 0);
  int64_t old_i = 0, new_i = 0, old_n = ndim(), new_n = target.size();
  while (old_i < old_n || new_i < new_n) {
    // Size-1 dimensions carry no layout; skip them on both sides.
    if (old_i < old_n && shape()[old_i] == 1) {
      ++old_i;
      continue;
    }
    if (new_i < new_n && target[new_i] == 1) {
      new_strides[new_i++] = 1;
      continue;
    }
    if (old_i >= old_n || new_i >= new_n) return std::nullopt;
    int64_t old_start = old_i, new_start = new_i;
    int64_t old_count = shape()[old_i++], new_count = target[new_i++];
    while (old_count != new_count) {
      if (old_count < new_count) {
        if (old_i >= old_n) return std::nullopt;
        old_count *= shape()[old_i++];
      } else {
        if (new_i >= new_n) return std::nullopt;
        new_count *= target[new_i++];
      }
    }
    for (int64_t i = old_start; i + 1 < old_i; ++i) {
      if (shape()[i + 1] == 1) continue;
      int64_t next = i + 1;
      if (strides()[i] != strides()[next] * shape()[next]) return std::nullopt;
    }
    int64_t stride = strides()[old_i - 1];
    for (int64_t i = new_i - 1; i >= new_start; --i) {
      new_strides[i] = stride;
      stride *= target[i];
    }
  }
  return AsStrided(target, new_strides, offset());
}

void CheckWeakScalarFits(const char* op, const Tensor& t, DType target) {
  if (!t.defined() || !t.impl()->wrapped_number) return;
  if (t.dtype() == DType::Int64) CheckWeakIntFits(op, *t.data<int64_t>(), target);
  if (t.dtype() == DType::UInt64) CheckWeakUIntFits(op, *t.data<uint64_t>(), target);
}

Shape InferReshape(const Shape& input_shape, Shape shape, const char* op) {
  CheckShapeSize(op, shape, DType::Bool);  // `known` below cannot overflow after this
  int64_t known = 1, unknown_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      KILN_CHECK(unknown_at < 0, Value, op, ": only one dimension can be -1, got ",
                 ShapeStr(shape));
      unknown_at = static_cast<int64_t>(i);
      continue;
    }
    KILN_CHECK(shape[i] >= 0, Value, op, ": invalid dimension ", shape[i], " in ", ShapeStr(shape));
    known *= shape[i];
  }
  int64_t total = NumElements(input_shape);
  if (unknown_at >= 0) {
    KILN_CHECK(known != 0 && total % known == 0, Value, op, ": cannot reshape ",
               ShapeStr(input_shape), " to ", ShapeStr(shape));
    shape[unknown_at] = total / known;
  }
  KILN_CHECK(NumElements(shape) == total, Value, op, ": cannot reshape a tensor of shape ",
             ShapeStr(input_shape), " (", total, " elements) to ", ShapeStr(shape));
  return shape;
}

}  // namespace kiln
