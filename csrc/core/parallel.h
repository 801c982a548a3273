// parallel.h - the intra-op thread pool: oneTBB's, shared with oneDNN so the two never compete.
//
// kiln's own kernels and oneDNN's primitives run on one oneTBB pool. oneTBB is work-stealing and
// the calling thread takes part: when a worker is descheduled (a busy machine), the caller runs
// the work that worker has not started instead of waiting for it, so a loaded machine slows kiln
// down by about its fair share rather than by scheduler ticks (OpenMP's end-of-region barrier
// waits for every team member; docs/architecture.md, "Threading"). Nested calls are fine.
#pragma once

#include <cstdint>
#include <functional>

namespace kiln {

// The number of threads kiln's kernels use (the default: the cores this process may run on).
int GetNumThreads();
// Sets that number for every thread of the process; n >= 1.
void SetNumThreads(int n);

// Runs fn(begin, end) over [0, n) in chunks of at least `grain` items, in parallel when n is
// large enough to pay for waking the pool.
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// ParallelFor for a loop of `flops` floating-point operations in all (a large product). While
// the machine is contended, ParallelFor runs on the calling thread alone; this one still splits
// loops of kContendedSplitFlops (about a millisecond on one core) or more: a join's wait for a
// descheduled worker then costs less than the second thread's share of a core brings. Measured
// (2 cores, encoder block forward, median of 1.5 s): beside 2 busy processes 33-42 -> 32 ms,
// beside 3 44-46 -> 36-40 ms; splitting from 3e7 instead made the seed training step (products
// of 0.2-0.3 ms) 2.3x slower beside 2.
constexpr double kContendedSplitFlops = 1e8;
void ParallelForFlops(int64_t n, int64_t grain, double flops,
                      const std::function<void(int64_t, int64_t)>& fn);

// Runs fn inside kiln's pool: oneDNN primitives and anything else that parallelizes through
// oneTBB itself go through here so that they honour SetNumThreads.
void RunInPool(const std::function<void()>& fn);

}  // namespace kiln
