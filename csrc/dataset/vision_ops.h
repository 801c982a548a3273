// vision_ops.h - native image transforms: a chain of vision ops applied to one row, no Python.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace kiln::dataset::vision {

// The ops of mindspore.dataset.vision the engine runs itself. Parameters, by op:
//   Resize            ints {height, width, keep_ratio (0/1), interpolation (OpenCV's code)}
//   RandomResizedCrop ints {height, width, max_attempts, interpolation}
//                     reals {scale min, scale max, ratio min, ratio max}
//   CenterCrop, RandomCrop  ints {height, width}
//   Horizontal/VerticalFlip reals {prob}
//   Rescale           reals {rescale, shift}
//   Normalize         reals {mean..., std...} (as many of each)
enum class OpKind {
  kDecode,
  kResize,
  kRandomResizedCrop,
  kCenterCrop,
  kRandomCrop,
  kHorizontalFlip,
  kVerticalFlip,
  kRescale,
  kNormalize,
  kHWC2CHW
};

struct OpSpec {
  OpKind kind;
  std::vector<int64_t> ints;
  std::vector<double> reals;
};

// Thrown when a row's input is not one the native chain handles (not a JPEG, or a CMYK one):
// the embedding then runs the same ops its own way (kiln: the Python transforms).
class NotNative : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A row's random numbers: a counter-free generator (splitmix64) seeded from the stage's seed
// and the row's place, so a row's draws never depend on which worker runs it.
class RowRandom {
 public:
  RowRandom(uint64_t stage_seed, int64_t epoch, int64_t index);
  uint64_t Next();
  double Uniform(double low, double high);     // [low, high)
  int64_t Integer(int64_t low, int64_t high);  // [low, high]

 private:
  uint64_t state_;
};

// Makes the tensor a chain writes its output into (shape and dtype of the output).
using Allocate = std::function<Tensor(const Shape& shape, DType dtype)>;

// The buffers of the batches a map stage right before a batch fills: row `index` of pass
// `epoch` is written into slot index % batch_size of batch index / batch_size, so the batch
// stage finds its rows side by side in one tensor and takes them without copying
// (StackTensorColumns). Every row of the map claims its place once (Slot, or Skip for a row
// written elsewhere); a batch's entry goes once all its rows have, and the entries of passes
// two behind the newest (a last, shorter batch) are dropped.
class BatchSlots {
 public:
  explicit BatchSlots(int64_t batch_size) : batch_size_(batch_size) {}
  // A view of the row's slot when `shape` and `dtype` are those of the batch's first row, else
  // a new tensor.
  Tensor Slot(int64_t epoch, int64_t index, const Shape& shape, DType dtype);
  void Skip(int64_t epoch, int64_t index);
  size_t live() const;

 private:
  struct Entry {
    Tensor buffer;
    int64_t claimed = 0;
  };
  Entry& Claim(int64_t epoch, int64_t index);  // under mutex_
  void Done(int64_t epoch, int64_t index);     // under mutex_

  const int64_t batch_size_;
  mutable std::mutex mutex_;
  std::map<std::pair<int64_t, int64_t>, Entry> entries_;
  int64_t newest_epoch_ = 0;
};

// The ops of one map, in order. Checked when made: Decode first (so every later op's input
// type is known), HWC2CHW only last, and each op's parameters.
class Chain {
 public:
  explicit Chain(std::vector<OpSpec> ops);
  // The output of the chain for an encoded image (a 1-D uint8 tensor); throws NotNative for
  // an input the chain leaves to the embedding, RuntimeError for a bad one.
  // `allocate` (optional) makes the output tensor.
  Tensor Apply(const Tensor& encoded, RowRandom& random, const Allocate& allocate = nullptr) const;
  const std::vector<OpSpec>& ops() const { return ops_; }

 private:
  std::vector<OpSpec> ops_;
};

// The name MindSpore gives op `kind` (for messages).
const char* OpName(OpKind kind);

}  // namespace kiln::dataset::vision
