// queue.h - the bounded blocking queue that joins the stages of a data pipeline.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <utility>

namespace kiln::dataset {

// A FIFO of at most `capacity` items. Push blocks while it is full and Pop while it is empty,
// which is what bounds the memory a pipeline holds and lets a slow consumer hold back its
// producers. Close() wakes every waiter: afterwards Push refuses items and Pop refuses too, so a
// stage blocked on either returns at once — the pipeline's shutdown is Close() on every queue.
template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // False (and `item` untouched) when the queue is closed.
  bool Push(T&& item) {
    std::unique_lock<std::mutex> lock(mutex_);
    not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  // False when the queue is closed; a closed queue hands out nothing, so a stopped pipeline
  // never runs user code on rows still in flight.
  bool Pop(T* item) {
    std::unique_lock<std::mutex> lock(mutex_);
    not_empty_.wait(lock, [&] { return closed_ || !items_.empty(); });
    return TakeLocked(item);
  }

  enum class Status { kItem, kClosed, kTimeout };

  // Pop that gives up after `timeout`, so a waiting caller can check for Ctrl-C in between.
  Status PopFor(T* item, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!not_empty_.wait_for(lock, timeout, [&] { return closed_ || !items_.empty(); }))
      return Status::kTimeout;
    return TakeLocked(item) ? Status::kItem : Status::kClosed;
  }

  void Close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  // Takes every item out, so the caller decides where (and under which lock) they are freed.
  std::deque<T> Drain() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::deque<T> out;
    out.swap(items_);
    not_full_.notify_all();
    return out;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return items_.size();
  }
  size_t capacity() const { return capacity_; }

 private:
  bool TakeLocked(T* item) {
    if (closed_ || items_.empty()) return false;
    *item = std::move(items_.front());
    items_.pop_front();
    // A producer blocked on a full queue is woken once the queue is down to half, not at every
    // pop: it then refills several items in one go, and the consumer's pops (the training
    // loop's hand-off) seldom pay for a wake-up system call. No wake-up is lost: a producer
    // waits only on a full queue, which passes half before it can run dry.
    if (items_.size() <= capacity_ / 2) not_full_.notify_all();
    return true;
  }

  const size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable not_full_, not_empty_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace kiln::dataset
