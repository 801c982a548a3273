// parallel.cc - ParallelFor over OpenMP.
#include "core/parallel.h"

#include <omp.h>

#include <algorithm>

#include "core/error.h"

namespace kiln {

int GetNumThreads() { return omp_get_max_threads(); }

void SetNumThreads(int n) {
  KILN_CHECK(n >= 1, Value, "set_num_threads: expected a positive count, got ", n);
  omp_set_num_threads(n);
}

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  int threads = static_cast<int>(std::min<int64_t>(GetNumThreads(), max_chunks));
  if (threads <= 1 || omp_in_parallel()) {
    fn(0, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int64_t id = omp_get_thread_num(), count = omp_get_num_threads();
    int64_t begin = n * id / count, end = n * (id + 1) / count;
    if (begin < end) fn(begin, end);
  }
}

}  // namespace kiln
