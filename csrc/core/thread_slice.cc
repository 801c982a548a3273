// thread_slice.cc - the short scheduler slice of kernel threads (thread_slice.h).
#include "core/thread_slice.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kiln {

namespace {

std::atomic<int64_t> g_applied{0}, g_refused{0};

int64_t ReadSliceMicros(const char* variable, int64_t fallback) {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || value < 0) return fallback;  // unreadable: the default
  return value;
}

// The slice this thread has from kiln: 0 until it asked (or when the kernel refused).
thread_local int64_t t_applied_micros = 0;

#if defined(__linux__) && defined(SYS_sched_setattr) && defined(SYS_sched_getattr)
// The kernel's struct sched_attr (include/uapi/linux/sched/types.h), first version: glibc 2.36
// has no wrapper for these calls.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
  uint32_t sched_util_min;
  uint32_t sched_util_max;
};

constexpr uint32_t kSchedOther = 0, kSchedBatch = 3;

bool ApplySlice(int64_t micros) {
  SchedAttr attr;
  std::memset(&attr, 0, sizeof(attr));
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0) != 0) return false;
  // Only the fair classes take a slice; a thread the user made real-time keeps its policy.
  if (attr.sched_policy != kSchedOther && attr.sched_policy != kSchedBatch) return false;
  attr.size = sizeof(attr);
  attr.sched_flags = 0;
  attr.sched_runtime = static_cast<uint64_t>(micros) * 1000;  // nice and policy as they were
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}
#else
bool ApplySlice(int64_t) { return false; }
#endif

}  // namespace

int64_t ShortSliceMicros() {
  static const int64_t micros = ReadSliceMicros("KILN_THREAD_SLICE_US", 100);
  return micros;
}

int64_t CrowdedSliceMicros() {
  static const int64_t micros = ReadSliceMicros("KILN_CROWDED_SLICE_US", 3000);
  return micros;
}

void RequestShortSlice() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  const int64_t micros = ShortSliceMicros();
  if (micros == 0) return;
  const bool applied = ApplySlice(micros);
  (applied ? g_applied : g_refused).fetch_add(1, std::memory_order_relaxed);
  if (applied) t_applied_micros = micros;
}

void UseCrowdedSlice(bool crowded) {
  if (t_applied_micros == 0) return;
  const int64_t crowded_micros = CrowdedSliceMicros();
  const int64_t want = crowded && crowded_micros > 0 ? crowded_micros : ShortSliceMicros();
  if (want == t_applied_micros) return;
  if (ApplySlice(want)) t_applied_micros = want;
}

ThreadSliceStats GetThreadSliceStats() {
  return {g_applied.load(std::memory_order_relaxed), g_refused.load(std::memory_order_relaxed)};
}

}  // namespace kiln
