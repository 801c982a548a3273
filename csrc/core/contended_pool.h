// contended_pool.h - kiln's own helper threads for loops split while the machine is busy.
//
// Beside busy processes, oneTBB's idle workers keep yield-spinning: always runnable, they get a
// small share of their core (measured: a quarter, beside 2 busy processes on 2 cores) and come
// late to each split loop, so splitting through oneTBB there made kiln slower than running on
// one thread. These helpers sleep on a condition variable between loops instead; a woken thread
// keeps its scheduler lag, so it runs promptly and takes its fair share of a core. The caller
// claims blocks alongside them and sleeps, not spins, while a helper finishes its last block
// (docs/architecture.md, "Threading").
#pragma once

#include <cstdint>
#include <functional>

namespace kiln {

// Runs fn(begin, end) over [0, n) in blocks of at least `grain` items on the calling thread and
// up to `threads - 1` helpers, each claiming the next unclaimed block until none is left; returns
// once every block is done, rethrowing the first exception a block threw. Helpers that are busy
// elsewhere (a nested or concurrent loop) are simply not waited for: the caller can finish alone.
void RunOnContendedPool(int64_t n, int64_t grain, int threads,
                        const std::function<void(int64_t, int64_t)>& fn);

struct ContendedPoolStats {
  int64_t loops = 0;          // loops run through the pool
  int64_t helper_blocks = 0;  // blocks the helpers ran (the rest ran on callers)
};
ContendedPoolStats GetContendedPoolStats();

}  // namespace kiln
