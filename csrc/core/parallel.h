// parallel.h - the intra-op thread pool: OpenMP's, shared with oneDNN so the two never compete.
//
// kiln's own kernels and oneDNN's primitives run on the same OpenMP team; a second pool would
// oversubscribe the cores whenever both are busy. Nested calls run serially.
#pragma once

#include <cstdint>
#include <functional>

namespace kiln {

int GetNumThreads();
// Sets the number of intra-op threads (the default is the number of cores); n >= 1.
void SetNumThreads(int n);

// Runs fn(begin, end) over [0, n) in chunks of at least `grain` items, in parallel when n is
// large enough to pay for waking the team.
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace kiln
