// parallel.cc - ParallelFor over OpenMP.
#include "core/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>

#include "core/error.h"

namespace kiln {

namespace {
std::atomic<int> g_num_threads{0};  // 0: never set, OpenMP's default (the cores)
thread_local int t_applied = 0;
}  // namespace

int GetNumThreads() {
  SyncThreadCount();
  return omp_get_max_threads();
}

void SetNumThreads(int n) {
  KILN_CHECK(n >= 1, Value, "set_num_threads: expected a positive count, got ", n);
  g_num_threads.store(n, std::memory_order_relaxed);
  SyncThreadCount();
}

void SyncThreadCount() {
  const int wanted = g_num_threads.load(std::memory_order_relaxed);
  if (wanted == t_applied) return;
  omp_set_num_threads(wanted);
  t_applied = wanted;
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
