// parallel.h - the intra-op thread pool: oneTBB's, shared with oneDNN so the two never compete.
//
// kiln's own kernels and oneDNN's primitives run on one oneTBB pool. oneTBB is work-stealing and
// the calling thread takes part: when a worker is descheduled (a busy machine), the caller runs
// the work that worker has not started instead of waiting for it, so a loaded machine slows kiln
// down by about its fair share rather than by scheduler ticks (OpenMP's end-of-region barrier
// waits for every team member; docs/architecture.md, "Threading"). Nested calls are fine.
// While other processes keep the cores busy (contention.h), oneTBB's idle workers yield-spin
// and come late to each loop, so kiln's loops split over its own helpers that sleep between
// loops instead (contended_pool.h), and oneDNN's primitives run on the calling thread.
#pragma once

#include <cstdint>
#include <functional>

namespace kiln {

// The number of threads kiln's kernels use (the default: the cores this process may run on).
int GetNumThreads();
// Sets that number for every thread of the process; n >= 1.
void SetNumThreads(int n);

// Runs fn(begin, end) over [0, n) in chunks of at least `grain` items, in parallel when n is
// large enough to pay for waking the pool: on oneTBB's pool, or while the machine is contended
// (contention.h) on kiln's own sleeping helpers (contended_pool.h).
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// Runs fn inside kiln's pool: oneDNN primitives and anything else that parallelizes through
// oneTBB itself go through here so that they honour SetNumThreads.
void RunInPool(const std::function<void()>& fn);

}  // namespace kiln
