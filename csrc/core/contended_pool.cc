// contended_pool.cc - the sleeping helpers of contended_pool.h, serving loops and teams.
#include "core/contended_pool.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "core/thread_slice.h"

namespace kiln {
namespace {

// At most this many blocks per thread: claiming a block is one atomic add, and blocks much
// smaller than a scheduler slice add nothing to the balance.
constexpr int64_t kBlocksPerThread = 32;

std::atomic<int64_t> g_loops{0}, g_helper_blocks{0}, g_teams{0}, g_helper_tasks{0};
// Teams running now: while there is one, the helpers take the crowded slice (thread_slice.h).
std::atomic<int> g_teams_running{0};

// Something the pool's threads take units of work from. Helper i (1, 2, ...) serves a job only
// when i < threads, so a job never runs on more threads than it was offered to.
struct Job {
  explicit Job(int threads) : threads(threads) {}
  virtual ~Job() = default;
  // Runs one unit if one is left now; false when none is.
  virtual bool RunOne() = 0;
  // No unit will be left again: the pool drops the job.
  virtual bool Exhausted() const = 0;
  virtual bool is_loop() const = 0;
  const int threads;
};

// One loop. The pool holds it by shared_ptr: a thread may look at it after the caller has
// returned (it then finds no block left); fn is only called for claimed blocks, all done before.
struct Loop final : Job {
  using Job::Job;
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, block = 1, blocks = 0;
  std::atomic<int64_t> next{0}, finished{0};
  std::mutex mutex;
  std::condition_variable all_done;
  std::exception_ptr error;

  bool RunOne() override {
    const int64_t b = next.fetch_add(1);
    if (b >= blocks) return false;
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
    return true;
  }
  bool Exhausted() const override { return next.load() >= blocks; }
  bool is_loop() const override { return true; }
};

struct Team final : Job {
  Team(int threads, std::shared_ptr<TaskSource> source) : Job(threads), source(std::move(source)) {}
  bool RunOne() override { return source->RunOne(); }
  bool Exhausted() const override { return source->Done(); }
  bool is_loop() const override { return false; }
  const std::shared_ptr<TaskSource> source;
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

  // Publishes `job`, starting helpers until there are job->threads - 1, and wakes them.
  void Add(const std::shared_ptr<Job>& job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (; started_ < job->threads - 1; ++started_) {
        try {
          const int index = started_ + 1;
          std::thread([this, index] { Serve(index); }).detach();
        } catch (const std::system_error&) {
          break;  // no thread to be had (a process limit): the callers do the work
        }
      }
      jobs_.push_back(job);
      ++epoch_;
    }
    wake_.notify_all();
  }

  void Remove(const Job* job) {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.erase(std::remove_if(jobs_.begin(), jobs_.end(), [&](auto& j) { return j.get() == job; }),
                jobs_.end());
  }

  // New work somewhere, or a job done: sleepers look again.
  void Changed() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++epoch_;
    }
    wake_.notify_all();
  }

  uint64_t Epoch() {
    std::lock_guard<std::mutex> lock(mutex_);
    return epoch_;
  }

  // Runs one unit of some job: blocks of loops first (a split node's owner waits for them),
  // the newest loop first, then team tasks. `helper` is the helper's index, 0 for a caller.
  bool RunAny(int helper) {
    thread_local std::vector<std::shared_ptr<Job>> jobs;
    jobs.clear();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.erase(
          std::remove_if(jobs_.begin(), jobs_.end(), [](auto& j) { return j->Exhausted(); }),
          jobs_.end());
      for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it)
        if ((*it)->is_loop() && helper < (*it)->threads) jobs.push_back(*it);
      for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
        if (!(*it)->is_loop() && helper < (*it)->threads) jobs.push_back(*it);
    }
    for (const auto& job : jobs) {
      if (!job->RunOne()) continue;
      if (helper > 0) (job->is_loop() ? g_helper_blocks : g_helper_tasks).fetch_add(1);
      jobs.clear();
      return true;
    }
    jobs.clear();  // no job kept alive by a sleeping thread
    return false;
  }

  // Sleeps until the epoch moves past `seen` or done() holds.
  template <typename Pred>
  void WaitPast(uint64_t seen, Pred done) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return epoch_ != seen || done(); });
  }

 private:
  explicit Pool(pid_t pid) : pid_(pid) {}

  void Serve(int index) {
    RequestShortSlice();
    for (;;) {
      const uint64_t seen = Epoch();
      UseCrowdedSlice(g_teams_running.load(std::memory_order_relaxed) > 0);
      if (RunAny(index)) continue;
      WaitPast(seen, [] { return false; });
    }
  }

  const pid_t pid_;
  std::mutex mutex_;
  std::condition_variable wake_;
  int started_ = 0;  // helper threads started (detached: they serve until the process ends)
  std::vector<std::shared_ptr<Job>> jobs_;  // offered and not yet exhausted
  uint64_t epoch_ = 0;                      // bumped whenever work appears or a team finishes
};

}  // namespace

void RunOnContendedPool(int64_t n, int64_t grain, int threads,
                        const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t max_blocks = std::max<int64_t>(1, kBlocksPerThread * threads);
  const int64_t block =
      std::max<int64_t>(std::max<int64_t>(grain, 1), (n + max_blocks - 1) / max_blocks);
  const int64_t blocks = std::max<int64_t>(1, n / block);  // whole blocks: none gets less
  auto loop = std::make_shared<Loop>(static_cast<int>(std::min<int64_t>(threads, blocks)));
  loop->fn = &fn;
  loop->n = n;
  loop->block = block;
  loop->blocks = blocks;
  g_loops.fetch_add(1, std::memory_order_relaxed);
  Pool* pool = loop->threads > 1 ? &Pool::Get() : nullptr;
  if (pool) pool->Add(loop);
  while (loop->RunOne()) {
  }
  if (pool) pool->Remove(loop.get());
  std::unique_lock<std::mutex> lock(loop->mutex);
  loop->all_done.wait(lock, [&] { return loop->finished.load() == loop->blocks; });
  if (loop->error) std::rethrow_exception(loop->error);
}

void RunTeam(const std::shared_ptr<TaskSource>& source, int threads) {
  g_teams.fetch_add(1, std::memory_order_relaxed);
  if (threads <= 1) {
    while (!source->Done())
      if (!source->RunOne()) break;  // one thread: nothing else can make a task ready
    return;
  }
  Pool& pool = Pool::Get();
  auto team = std::make_shared<Team>(threads, source);
  // The caller keeps the crowded slice after the team: the executor gives the short one back
  // when it next runs a graph in order.
  UseCrowdedSlice(true);
  g_teams_running.fetch_add(1, std::memory_order_relaxed);
  struct Running {
    ~Running() { g_teams_running.fetch_sub(1, std::memory_order_relaxed); }
  } running;
  pool.Add(team);
  while (!source->Done()) {
    const uint64_t seen = pool.Epoch();
    if (pool.RunAny(0)) continue;  // a split node's blocks first, then this team's tasks
    pool.WaitPast(seen, [&] { return source->Done(); });
  }
  pool.Remove(team.get());
}

void TeamWorkChanged() { Pool::Get().Changed(); }

ContendedPoolStats GetContendedPoolStats() {
  ContendedPoolStats stats;
  stats.loops = g_loops.load(std::memory_order_relaxed);
  stats.helper_blocks = g_helper_blocks.load(std::memory_order_relaxed);
  stats.teams = g_teams.load(std::memory_order_relaxed);
  stats.helper_tasks = g_helper_tasks.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace kiln
