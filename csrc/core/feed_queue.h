// feed_queue.h - bounded queues of batches that a compiled training loop pops (get_next).
//
// Dataset sink mode runs many training steps as one compiled loop; each iteration's get_next
// (ops/data.cc) pops the next batch from a queue a feeder thread fills from the dataset, so the
// loop never needs its batches gathered first. Queues are named by an id, which the op carries
// as an attribute.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace kiln {

class FeedQueue {
 public:
  explicit FeedQueue(size_t capacity) : capacity_(capacity ? capacity : 1) {}

  // Appends a batch, waiting while the queue is full; false (the batch dropped) once closed.
  bool Push(std::vector<Tensor> batch);
  // Takes the next batch, waiting for one (Ctrl-C is checked every 50 ms). `check` sees the
  // front batch first and may throw: the batch then stays queued. When the queue is closed and
  // empty, throws RuntimeError naming `op`: the end of the data, or the producer's error.
  std::vector<Tensor> Pop(const char* op,
                          const std::function<void(const std::vector<Tensor>&)>& check);
  // No more batches: `error` empty for the end of the data, else what went wrong. Wakes waiters.
  void Close(std::string error);
  int64_t pops() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::vector<Tensor>> items_;
  size_t capacity_;
  bool closed_ = false;
  std::string error_;
  int64_t pops_ = 0;
};

int64_t CreateFeedQueue(size_t capacity);
std::shared_ptr<FeedQueue> FindFeedQueue(int64_t id);  // null when there is no such queue
void DestroyFeedQueue(int64_t id);                     // closes it; waiters wake and throw

}  // namespace kiln
