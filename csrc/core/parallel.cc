// parallel.cc - ParallelFor and the thread count over oneTBB.
#include "core/parallel.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_scheduler_observer.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "core/contended_pool.h"
#include "core/contention.h"
#include "core/error.h"
#include "core/thread_slice.h"

namespace kiln {

namespace {

// Gives each oneTBB worker the short scheduler slice (thread_slice.h) as it joins an arena.
class WorkerObserver : public tbb::task_scheduler_observer {
 public:
  WorkerObserver() { observe(true); }  // the implicit arena of the thread that makes it
  explicit WorkerObserver(tbb::task_arena& arena) : tbb::task_scheduler_observer(arena) {
    observe(true);
  }
  ~WorkerObserver() override { observe(false); }
  void on_scheduler_entry(bool) override { RequestShortSlice(); }
};

// An arena of a set thread count, observed as the implicit one is. Arenas live as long as the
// process (one per count ever set): oneTBB's workers keep a reference to the last observer they
// notified, and an observer that stops observing while one does is left to a cleanup that never
// runs, so it leaked.
struct Arena {
  explicit Arena(int threads) : arena(threads) {}
  tbb::task_arena arena;
  WorkerObserver observer{arena};
};

// The calling thread, and the workers of its implicit arena (the first caller's: in a Python
// program, the main thread, whose arena every worker serves sooner or later), get the slice.
void ObserveKernelThreads() {
  RequestShortSlice();
  static WorkerObserver* implicit = ShortSliceMicros() > 0 ? new WorkerObserver() : nullptr;
  (void)implicit;  // never destroyed, as the pool: kernels may run during static teardown
}

// Fewer threads than the default run in an arena of that many slots; the default runs in
// oneTBB's implicit arena, which costs nothing to enter. An arena, not a global_control limit,
// because oneDNN sizes its work split from the arena it runs in.
struct Pool {
  std::atomic<int> threads{0};         // 0: the default (kernels read this on every call)
  std::atomic<Arena*> arena{nullptr};  // the set count's arena; nullptr: the implicit one
  std::mutex mutex;                    // guards arenas, and orders the writes above
  std::map<int, Arena*> arenas;        // never destroyed, as the pool
};

Pool& ThePool() {
  static Pool* pool = new Pool();  // never destroyed: kernels may run during static teardown
  return *pool;
}

int DefaultThreads() {
  static const int threads = std::max(1, tbb::info::default_concurrency());
  return threads;
}

}  // namespace

int GetNumThreads() {
  int n = ThePool().threads.load(std::memory_order_relaxed);
  return n > 0 ? n : DefaultThreads();
}

void SetNumThreads(int n) {
  KILN_CHECK(n >= 1, Value, "set_num_threads: expected a positive count, got ", n);
  Pool& pool = ThePool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  if (n == GetNumThreads()) return;
  Arena* arena = nullptr;
  if (n != DefaultThreads()) {
    Arena*& slot = pool.arenas[n];
    if (slot == nullptr) slot = new Arena(n);
    arena = slot;
  }
  pool.arena.store(arena, std::memory_order_release);
  pool.threads.store(n, std::memory_order_relaxed);
}

// One slot: oneDNN plans a single-threaded split in it (the contended state). One per thread:
// the row blocks of a product split over kiln's helpers (SplitWhileContended in ops/linalg.cc)
// each run oneDNN in their own thread's arena, where one shared slot would make them take turns.
static tbb::task_arena& SerialArena() {
  thread_local tbb::task_arena arena(1);
  return arena;
}

namespace {

// fn in the arena of the set thread count (oneTBB's implicit one for the default).
void RunInArena(const std::function<void()>& fn) {
  Pool& pool = ThePool();
  const int threads = pool.threads.load(std::memory_order_relaxed);
  if (threads == 1) return SerialArena().execute(fn);  // runs fn directly when already in it
  Arena* arena = threads <= 0 ? nullptr : pool.arena.load(std::memory_order_acquire);
  if (arena == nullptr) return fn();
  arena->arena.execute(fn);  // runs fn directly when this thread is already in the arena
}

// fn over [0, n) in blocks of `grain` items on the pool (n >= 2 * grain).
void SplitOnPool(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  // Whole blocks of `grain` items (the last takes the remainder), so no call gets less; oneTBB's
  // partitioner groups blocks into tasks and idle threads steal them.
  const int64_t blocks = n / grain;
  RunInArena([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, blocks),
                      [&](const tbb::blocked_range<int64_t>& r) {
                        fn(r.begin() * grain, r.end() == blocks ? n : r.end() * grain);
                      });
  });
}

}  // namespace

void RunInPool(const std::function<void()>& fn) {
  ObserveKernelThreads();
  // A busy machine: oneDNN plans a single-threaded split in the one-slot arena and runs it on
  // this thread (its primitives parallelize through oneTBB only, not the contended pool).
  if (GetNumThreads() > 1 && MachineContended()) return SerialArena().execute(fn);
  RunInArena(fn);
}

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  ObserveKernelThreads();
  grain = std::max<int64_t>(grain, 1);
  if (n < 2 * grain || GetNumThreads() <= 1) {
    fn(0, n);
    return;
  }
  if (MachineContended()) return RunOnContendedPool(n, grain, GetNumThreads(), fn);
  SplitOnPool(n, grain, fn);
}

}  // namespace kiln
