// parallel.h - the intra-op thread pool: OpenMP's, shared with oneDNN so the two never compete.
//
// kiln's own kernels and oneDNN's primitives run on the same OpenMP team; a second pool would
// oversubscribe the cores whenever both are busy. Nested calls run serially.
#pragma once

#include <cstdint>
#include <functional>

namespace kiln {

int GetNumThreads();
// Sets the number of intra-op threads for every thread of the process (the default is the
// number of cores); n >= 1. OpenMP's own setting is per thread, so each thread adopts this one
// the next time it runs a parallel kernel (SyncThreadCount).
void SetNumThreads(int n);
// Makes the calling thread's OpenMP setting match SetNumThreads (a thread-local compare when it
// already does). Called before every parallel region kiln or oneDNN starts.
void SyncThreadCount();

// Runs fn(begin, end) over [0, n) in chunks of at least `grain` items, in parallel when n is
// large enough to pay for waking the team.
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace kiln
