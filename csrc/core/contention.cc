// contention.cc - the run-queue wait monitor behind MachineContended().
#include "core/contention.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>

namespace kiln {

int OthersRunnableIn(const char* loadavg) {
  const char* field = loadavg;  // "0.52 0.58 0.59 3/345 12345": the fourth field's first number
  for (int spaces = 0; *field != '\0' && spaces < 3; ++field)
    if (*field == ' ') ++spaces;
  if (*field < '0' || *field > '9') return -1;
  char* end = nullptr;
  const long running = std::strtol(field, &end, 10);
  // "3/345": the count ends at the slash; a bigger count than a thread table holds is garbage.
  if (*end != '/' || running < 1 || running > (1 << 22)) return -1;
  return static_cast<int>(running - 1);
}

namespace {

constexpr int64_t kIntervalNs = 10'000'000;  // a reading per 10 ms of a thread's kernel calls
constexpr int64_t kStaleNs = 1'000'000'000;  // a longer gap says nothing about now
constexpr int64_t kHoldNs = 100'000'000;     // one contended reading holds for 100 ms
// Waiting fractions measured over 1 s beside 0 / 1 / 2 / 3 busy processes on 2 cores, 2
// threads: 0.00 / 0.02-0.03 / 0.27-0.43 / 0.54-0.58; on 1 thread beside 2, 0.32-0.36 (so the
// state holds once entered) and beside 1, 0.00 (so it ends when the load does). Single 10 ms
// readings jump past the threshold now and then where splitting still pays, so the decision is
// taken on a moving average, each reading weighing 10%. Beside a busy process at nice 19 the
// encoder block's forward read 0.03 on average but single readings up to 0.67; at a weight of
// 30% those spikes held the contended state half the time and its worst 1 s median went from
// 9.0 to 14.6-18.2 ms (the split kernels run 9.3 there). Beside 2 and 3 busy processes
// (0.38 and more on average) the state holds at either weight, with the same step times.
constexpr double kContendedFraction = 0.2;
constexpr double kReadingWeight = 0.1;

// Crowded: the other runnable threads alone outnumber the cores by this much (a moving average,
// each reading weighing as above). On 2 cores: beside 3 busy processes about 3.3 (kiln's helper
// is runnable part of the time), beside 2 about 2.5, beside 1 about 1.5.
constexpr double kCrowdedMargin = 0.75;

std::atomic<int> g_override{-1};
std::atomic<int64_t> g_contended_until{0}, g_crowded_until{0};
std::atomic<int64_t> g_checks{0}, g_contended_checks{0};
std::atomic<double> g_last_fraction{0};
std::atomic<bool> g_available{true};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One thread's schedstat file, opened on first use and re-read in place.
class RunDelayProbe {
 public:
  ~RunDelayProbe() {
    if (fd_ >= 0) close(fd_);
  }
  // The thread's total run-queue wait in ns; false when the kernel does not report it.
  bool Read(int64_t* delay_ns) {
    if (fd_ == kUnopened) fd_ = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return false;
    char buf[96];
    const ssize_t n = pread(fd_, buf, sizeof(buf) - 1, 0);
    if (n <= 0) return false;
    buf[n] = '\0';
    char* end = nullptr;
    std::strtoull(buf, &end, 10);  // "<time on a cpu> <time waiting> <timeslices>"
    *delay_ns = static_cast<int64_t>(std::strtoull(end, nullptr, 10));
    return true;
  }
  int64_t last_wall = 0, last_delay = 0;
  double average = 0;         // moving average of the waiting fraction
  double others_average = 0;  // moving average of the other runnable threads (OthersRunnable)

 private:
  static constexpr int kUnopened = -2;
  int fd_ = kUnopened;
};

// The runnable threads of the whole machine but the calling one (/proc/loadavg's "running"
// count, which includes it), or -1 where it cannot be read.
int OthersRunnable() {
  static const int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[128];
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  return OthersRunnableIn(buf);
}

// The cores this process may run on.
int UsableCores() {
  static const int cores = [] {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? static_cast<int>(online) : 1;
  }();
  return cores;
}

void NoteOthers(RunDelayProbe& probe, int64_t now) {
  const int others = OthersRunnable();
  if (others < 0) return;
  probe.others_average += kReadingWeight * (others - probe.others_average);
  if (probe.others_average >= UsableCores() + kCrowdedMargin)
    g_crowded_until.store(now + kHoldNs, std::memory_order_relaxed);
}

void TakeReading(RunDelayProbe& probe, int64_t now) {
  NoteOthers(probe, now);
  int64_t delay = 0;
  if (!probe.Read(&delay)) {
    g_available.store(false, std::memory_order_relaxed);
    probe.last_wall = now;
    return;
  }
  const int64_t wall = now - probe.last_wall;
  if (probe.last_wall != 0 && wall < kStaleNs) {
    const double fraction = static_cast<double>(delay - probe.last_delay) / wall;
    g_checks.fetch_add(1, std::memory_order_relaxed);
    g_last_fraction.store(fraction, std::memory_order_relaxed);
    probe.average += kReadingWeight * (fraction - probe.average);
    if (probe.average > kContendedFraction) {
      g_contended_checks.fetch_add(1, std::memory_order_relaxed);
      g_contended_until.store(now + kHoldNs, std::memory_order_relaxed);
    }
  }
  probe.last_wall = now;
  probe.last_delay = delay;
}

}  // namespace

namespace {

// Takes the calling thread's reading when one is due; returns the time now.
int64_t Observe() {
  thread_local RunDelayProbe probe;
  const int64_t now = NowNs();
  if (now - probe.last_wall >= kIntervalNs) TakeReading(probe, now);
  return now;
}

}  // namespace

bool MachineContended() {
  const int forced = g_override.load(std::memory_order_relaxed);
  if (forced >= 0) return forced == 1;
  return Observe() < g_contended_until.load(std::memory_order_relaxed);
}

bool MachineCrowded() {
  const int forced = g_override.load(std::memory_order_relaxed);
  if (forced >= 0) return forced == 1;
  const int64_t now = Observe();
  return now < g_contended_until.load(std::memory_order_relaxed) &&
         now < g_crowded_until.load(std::memory_order_relaxed);
}

ContentionStats GetContentionStats() {
  ContentionStats stats;
  stats.checks = g_checks.load(std::memory_order_relaxed);
  stats.contended_checks = g_contended_checks.load(std::memory_order_relaxed);
  stats.last_fraction = g_last_fraction.load(std::memory_order_relaxed);
  const int forced = g_override.load(std::memory_order_relaxed);
  stats.contended =
      forced >= 0 ? forced == 1 : NowNs() < g_contended_until.load(std::memory_order_relaxed);
  stats.crowded =
      forced >= 0 ? forced == 1
                  : NowNs() < g_crowded_until.load(std::memory_order_relaxed) && stats.contended;
  stats.available = g_available.load(std::memory_order_relaxed);
  return stats;
}

void SetContentionOverride(int state) {
  g_override.store(state < 0 ? -1 : (state > 0 ? 1 : 0), std::memory_order_relaxed);
}

}  // namespace kiln
