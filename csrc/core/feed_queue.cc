// feed_queue.cc - FeedQueue and the process-wide table of queues by id.
#include "core/feed_queue.h"

#include <chrono>
#include <unordered_map>

#include "core/error.h"
#include "core/interrupt.h"

namespace kiln {

bool FeedQueue::Push(std::vector<Tensor> batch) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
  if (closed_) return false;
  items_.push_back(std::move(batch));
  changed_.notify_all();
  return true;
}

std::vector<Tensor> FeedQueue::Pop(const char* op,
                                   const std::function<void(const std::vector<Tensor>&)>& check) {
  const auto ready = [&] { return closed_ || !items_.empty(); };
  while (true) {
    RunBlocking([&] {  // without the GIL: the feeder may be a Python thread
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait_for(lock, std::chrono::milliseconds(50), ready);
    });
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (ready()) {
        if (items_.empty())
          Throw(ErrorKind::Runtime, op, ": ",
                error_.empty() ? std::string("the dataset has no more batches (end of data)")
                               : error_);
        check(items_.front());
        std::vector<Tensor> batch = std::move(items_.front());
        items_.pop_front();
        ++pops_;
        changed_.notify_all();
        return batch;
      }
    }
    CheckInterrupt();  // outside the lock: it may throw (Ctrl-C)
  }
}

void FeedQueue::Close(std::string error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!closed_) error_ = std::move(error);
  closed_ = true;
  changed_.notify_all();
}

int64_t FeedQueue::pops() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pops_;
}

namespace {

std::mutex g_mutex;
std::unordered_map<int64_t, std::shared_ptr<FeedQueue>> g_queues;
int64_t g_next_id = 1;

}  // namespace

int64_t CreateFeedQueue(size_t capacity) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const int64_t id = g_next_id++;
  g_queues[id] = std::make_shared<FeedQueue>(capacity);
  return id;
}

std::shared_ptr<FeedQueue> FindFeedQueue(int64_t id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_queues.find(id);
  return it == g_queues.end() ? nullptr : it->second;
}

void DestroyFeedQueue(int64_t id) {
  std::shared_ptr<FeedQueue> queue;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_queues.find(id);
    if (it == g_queues.end()) return;
    queue = std::move(it->second);
    g_queues.erase(it);
  }
  queue->Close("the dataset queue was closed (training stopped)");
}

}  // namespace kiln
