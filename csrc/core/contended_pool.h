// contended_pool.h - kiln's own helper threads for work split while the machine is busy.
//
// Beside busy processes, oneTBB's idle workers keep yield-spinning: always runnable, they get a
// small share of their core (measured: a quarter, beside 2 busy processes on 2 cores) and come
// late to each split loop, so splitting through oneTBB there made kiln slower than running on
// one thread. These helpers sleep on a condition variable while there is nothing to do instead;
// a woken thread keeps its scheduler lag, so it runs promptly and takes its fair share of a core.
// They serve two kinds of work: the blocks of split loops (the caller claims blocks alongside
// them and sleeps, not spins, while a helper finishes its last block), and teams, where the
// caller and the helpers run a task source together (a graph's nodes: whichever of kiln's
// threads has a core carries the graph forward; docs/architecture.md, "Threading").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace kiln {

// Runs fn(begin, end) over [0, n) in blocks of at least `grain` items on the calling thread and
// up to `threads - 1` helpers, each claiming the next unclaimed block until none is left; returns
// once every block is done, rethrowing the first exception a block threw. Helpers that are busy
// elsewhere (a nested or concurrent loop, a team's task) are simply not waited for: the caller
// can finish alone.
void RunOnContendedPool(int64_t n, int64_t grain, int threads,
                        const std::function<void(int64_t, int64_t)>& fn);

// Work a team runs: tasks that become ready as others finish. Members call RunOne from any
// thread, concurrently; the source does its own locking.
class TaskSource {
 public:
  virtual ~TaskSource() = default;
  // Runs one ready task and returns true, or returns false at once when none is ready now.
  virtual bool RunOne() = 0;
  // True once no task will ever be ready again and none is running (also after a failure).
  virtual bool Done() const = 0;
};

// Runs `source` on the calling thread and up to `threads - 1` helpers until source->Done().
// A member with nothing to do takes blocks of loops a task split (RunOnContendedPool), else
// sleeps until TeamWorkChanged. Helpers busy elsewhere join when they are free. The source must
// not throw from RunOne (a task's error is the source's to keep and report).
void RunTeam(const std::shared_ptr<TaskSource>& source, int threads);

// Called by a task source when tasks became ready or the source became done: wakes sleeping
// members.
void TeamWorkChanged();

struct ContendedPoolStats {
  int64_t loops = 0;          // loops run through the pool
  int64_t helper_blocks = 0;  // blocks the helpers ran (the rest ran on callers)
  int64_t teams = 0;          // teams run
  int64_t helper_tasks = 0;   // team tasks the helpers ran (the rest ran on callers)
};
ContendedPoolStats GetContendedPoolStats();

}  // namespace kiln
