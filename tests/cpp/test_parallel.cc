// test_parallel.cc - ParallelFor on the oneTBB pool and on the contended pool: coverage, nesting,
// errors and the thread count.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/contended_pool.h"
#include "core/contention.h"
#include "core/error.h"
#include "core/parallel.h"

namespace kiln {
namespace {

// Restores the process-wide thread count a test changes.
class ThreadCountGuard {
 public:
  ThreadCountGuard() : saved_(GetNumThreads()) {}
  ~ThreadCountGuard() { SetNumThreads(saved_); }

 private:
  int saved_;
};

// Restores the contention monitor's measuring state.
class ContentionOverride {
 public:
  explicit ContentionOverride(int state) { SetContentionOverride(state); }
  ~ContentionOverride() { SetContentionOverride(-1); }
};

std::vector<int> VisitCounts(int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
  ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
    ASSERT_LE(0, begin);
    ASSERT_LT(begin, end);
    ASSERT_LE(end, n);
    for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)]++;
  });
  std::vector<int> counts;
  for (auto& s : seen) counts.push_back(s.load());
  return counts;
}

TEST(Parallel, EveryIndexRunsExactlyOnce) {
  for (int64_t n : {0, 1, 2, 7, 1000, 100003})
    for (int64_t grain : {1, 3, 64, 1 << 20})
      EXPECT_EQ(VisitCounts(n, grain), std::vector<int>(static_cast<size_t>(n), 1))
          << "n=" << n << " grain=" << grain;
}

TEST(Parallel, ChunksAreAtLeastTheGrain) {
  std::mutex mutex;
  std::vector<int64_t> sizes;
  ParallelFor(4096, 100, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex);
    sizes.push_back(end - begin);
  });
  int64_t total = 0;
  for (int64_t s : sizes) {
    EXPECT_GE(s, 100);
    total += s;
  }
  EXPECT_EQ(total, 4096);
}

TEST(Parallel, NestedCallsComplete) {
  std::atomic<int64_t> sum{0};
  ParallelFor(64, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      ParallelFor(1000, 10, [&](int64_t b, int64_t e) { sum += e - b; });
  });
  EXPECT_EQ(sum.load(), 64 * 1000);
}

TEST(Parallel, OneThreadRunsOnTheCaller) {
  ThreadCountGuard guard;
  SetNumThreads(1);
  EXPECT_EQ(GetNumThreads(), 1);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  ParallelFor(1 << 16, 1, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() != caller) elsewhere++;
  });
  EXPECT_EQ(elsewhere.load(), 0);
}

TEST(Parallel, ThreadCountBoundsTheThreadsThatRun) {
  ThreadCountGuard guard;
  ContentionOverride quiet(0);  // a loaded machine would (rightly) keep the work on the caller
  const unsigned cores = std::max(2u, std::thread::hardware_concurrency());
  SetNumThreads(static_cast<int>(cores) + 2);  // more than the cores: an arena of that size
  EXPECT_EQ(GetNumThreads(), static_cast<int>(cores) + 2);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  for (int round = 0; round < 5; ++round)
    ParallelFor(1 << 12, 1, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      std::lock_guard<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
    });
  EXPECT_LE(threads.size(), cores + 2);
  EXPECT_GE(threads.size(), 2u);  // the pool really runs work on its workers
}

TEST(Parallel, ManyCallersShareThePool) {
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 8; ++t)
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round)
        ParallelFor(10000, 100, [&](int64_t b, int64_t e) { sum += e - b; });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(sum.load(), 8 * 50 * 10000);
}

// The threads that ran a contended loop of blocks that each take a while (so a woken helper
// finds some left), over five rounds.
std::set<std::thread::id> ThreadsOfContendedLoop() {
  std::mutex mutex;
  std::set<std::thread::id> threads;
  for (int round = 0; round < 5; ++round)
    ParallelFor(64, 1, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::lock_guard<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
    });
  return threads;
}

TEST(Parallel, AContendedMachineSplitsLoopsOnItsOwnHelpers) {
  ThreadCountGuard guard;
  SetNumThreads(static_cast<int>(std::max(2u, std::thread::hardware_concurrency())));
  ContentionOverride contended(1);
  EXPECT_TRUE(MachineContended());
  EXPECT_TRUE(GetContentionStats().contended);
  const ContendedPoolStats before = GetContendedPoolStats();
  EXPECT_GE(ThreadsOfContendedLoop().size(), 2u);
  const ContendedPoolStats after = GetContendedPoolStats();
  EXPECT_EQ(after.loops - before.loops, 5);
  EXPECT_GT(after.helper_blocks, before.helper_blocks);
  // Every index exactly once, as on the quiet path (the chunking itself: test_contended_pool.cc).
  for (int64_t grain : {1, 7, 1000}) {
    const std::vector<int> counts = VisitCounts(100003, grain);
    for (size_t i = 0; i < counts.size(); ++i) ASSERT_EQ(counts[i], 1) << "grain " << grain;
  }
  EXPECT_EQ(GetNumThreads(), static_cast<int>(std::max(2u, std::thread::hardware_concurrency())));
}

TEST(Parallel, AContendedLoopRethrowsABlocksErrorAfterEveryBlockIsDone) {
  ThreadCountGuard guard;
  SetNumThreads(static_cast<int>(std::max(2u, std::thread::hardware_concurrency())));
  ContentionOverride contended(1);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> done{0};
  EXPECT_THROW(
      ParallelFor(64, 1,
                  [&](int64_t begin, int64_t) {
                    // Helpers' blocks take longest: one still holds a block when the
                    // caller runs out of blocks to claim.
                    const bool helper = std::this_thread::get_id() != caller;
                    std::this_thread::sleep_for(std::chrono::microseconds(helper ? 5000 : 100));
                    done++;
                    if (begin == 10) KILN_CHECK(false, Value, "block ", begin, " failed");
                  }),
      Error);
  EXPECT_EQ(done.load(), 64);  // no block still running once the caller has the error
}

TEST(Parallel, NestedContendedLoopsFinish) {
  ThreadCountGuard guard;
  SetNumThreads(static_cast<int>(std::max(2u, std::thread::hardware_concurrency())));
  ContentionOverride contended(1);
  std::atomic<int64_t> sum{0};
  ParallelFor(16, 1, [&](int64_t, int64_t) {
    ParallelFor(1000, 10, [&](int64_t begin, int64_t end) { sum += end - begin; });
  });
  EXPECT_EQ(sum.load(), 16 * 1000);
}

TEST(Parallel, AQuietMachineSplitsKernels) {
  ContentionOverride quiet(0);
  EXPECT_FALSE(MachineContended());
  std::atomic<int> calls{0};
  ParallelFor(1 << 16, 1, [&](int64_t, int64_t) { calls++; });
  if (GetNumThreads() > 1) {
    EXPECT_GT(calls.load(), 1);
  }
}

TEST(Parallel, TheMonitorReadsThisThreadsRunQueueWait) {
  // Linux reports schedstat for every thread; the monitor takes a reading per 10 ms of use.
  const ContentionStats before = GetContentionStats();
  for (int i = 0; i < 3; ++i) {
    MachineContended();
    std::this_thread::sleep_for(std::chrono::milliseconds(12));
  }
  MachineContended();
  const ContentionStats after = GetContentionStats();
  ASSERT_TRUE(after.available) << "no /proc/thread-self/schedstat";
  EXPECT_GT(after.checks, before.checks);
  EXPECT_GE(after.last_fraction, 0.0);
  EXPECT_LE(after.last_fraction, 1.0);
}

TEST(Parallel, RejectsANonPositiveThreadCount) {
  EXPECT_THROW(SetNumThreads(0), Error);
  EXPECT_THROW(SetNumThreads(-3), Error);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(Contention, OthersRunnableReadsTheRunningCountOfLoadavg) {
  EXPECT_EQ(OthersRunnableIn("0.52 0.58 0.59 3/345 12345\n"), 2);
  EXPECT_EQ(OthersRunnableIn("4.10 3.00 2.50 1/900 77"), 0);  // only the reader runs
  EXPECT_EQ(OthersRunnableIn("0.00 0.00 0.00 17/1024 1"), 16);
}

TEST(Contention, OthersRunnableRefusesTextNotInLoadavgsForm) {
  for (const char* text : {"", "0.52 0.58 0.59", "0.52 0.58 0.59 ", "0.52 0.58 0.59 x/345 1",
                           "0.52 0.58 0.59 3 345", "0.52 0.58 0.59 0/345 1",
                           "0.52 0.58 0.59 -3/345 1", "0.52 0.58 0.59 99999999999999999999/3 1"})
    EXPECT_EQ(OthersRunnableIn(text), -1) << "'" << text << "'";
}

}  // namespace
}  // namespace kiln
