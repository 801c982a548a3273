// contended_pool.cc - the sleeping helpers of contended_pool.h.
#include "core/contended_pool.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include "core/thread_slice.h"

namespace kiln {
namespace {

// At most this many blocks per thread: claiming a block is one atomic add, and blocks much
// smaller than a scheduler slice add nothing to the balance.
constexpr int64_t kBlocksPerThread = 32;

std::atomic<int64_t> g_loops{0}, g_helper_blocks{0};

// One loop. Helpers hold it by shared_ptr: one may pick it up after the caller has returned
// (it then finds no block left); fn is only called for claimed blocks, all done before that.
struct Loop {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, block = 1, blocks = 0;
  std::atomic<int64_t> next{0}, finished{0};
  std::mutex mutex;
  std::condition_variable all_done;
  std::exception_ptr error;

  // Claims and runs blocks until none is left; returns how many it ran.
  int64_t Work() {
    int64_t ran = 0;
    for (int64_t b = next.fetch_add(1); b < blocks; b = next.fetch_add(1), ++ran) {
      const int64_t begin = b * block, end = b + 1 == blocks ? n : begin + block;  // last: the rest
      try {
        (*fn)(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
      }
      if (finished.fetch_add(1) + 1 == blocks) {
        std::lock_guard<std::mutex> lock(mutex);  // the caller checks under it before sleeping
        all_done.notify_all();
      }
    }
    return ran;
  }
};

class Pool {
 public:
  // The pool of this process. A child made by fork() (a data-loading worker) has none of its
  // parent's helper threads, and its copy of the mutex may be locked by one of them: it starts a
  // pool of its own. Pools are never destroyed: their helpers sleep in them until the process ends.
  static Pool& Get() {
    static std::atomic<Pool*> current{nullptr};
    Pool* pool = current.load(std::memory_order_acquire);
    const pid_t pid = getpid();
    if (pool != nullptr && pool->pid_ == pid) return *pool;
    Pool* fresh = new Pool(pid);
    if (current.compare_exchange_strong(pool, fresh, std::memory_order_acq_rel)) return *fresh;
    delete fresh;  // another thread of this process made one first
    return *pool;
  }

  // Publishes `loop` and wakes up to `helpers` sleeping helpers.
  void Offer(const std::shared_ptr<Loop>& loop, int helpers) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (; started_ < helpers; ++started_) {
        try {
          std::thread([this] { Serve(); }).detach();
        } catch (const std::system_error&) {
          break;  // no thread to be had (a process limit): the callers do the work
        }
      }
      loop_ = loop;
      ++generation_;
    }
    for (int h = 0; h < helpers; ++h) wake_.notify_one();
  }

 private:
  explicit Pool(pid_t pid) : pid_(pid) {}

  void Serve() {
    RequestShortSlice();
    int64_t seen = 0;
    for (;;) {
      std::shared_ptr<Loop> loop;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        loop = loop_;
      }
      g_helper_blocks.fetch_add(loop->Work(), std::memory_order_relaxed);
    }
  }

  const pid_t pid_;
  std::mutex mutex_;
  std::condition_variable wake_;
  int started_ = 0;  // helper threads started (detached: they serve until the process ends)
  std::shared_ptr<Loop> loop_;  // the latest loop offered
  int64_t generation_ = 0;
};

}  // namespace

void RunOnContendedPool(int64_t n, int64_t grain, int threads,
                        const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  auto loop = std::make_shared<Loop>();
  loop->fn = &fn;
  loop->n = n;
  const int64_t max_blocks = std::max<int64_t>(1, kBlocksPerThread * threads);
  loop->block = std::max<int64_t>(std::max<int64_t>(grain, 1), (n + max_blocks - 1) / max_blocks);
  loop->blocks = std::max<int64_t>(1, n / loop->block);  // whole blocks: none gets less
  g_loops.fetch_add(1, std::memory_order_relaxed);
  const int helpers = static_cast<int>(std::min<int64_t>(threads, loop->blocks) - 1);
  if (helpers > 0) Pool::Get().Offer(loop, helpers);
  loop->Work();
  std::unique_lock<std::mutex> lock(loop->mutex);
  loop->all_done.wait(lock, [&] { return loop->finished.load() == loop->blocks; });
  if (loop->error) std::rethrow_exception(loop->error);
}

ContendedPoolStats GetContendedPoolStats() {
  ContendedPoolStats stats;
  stats.loops = g_loops.load(std::memory_order_relaxed);
  stats.helper_blocks = g_helper_blocks.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace kiln
