// test_contended_pool.cc - kiln's sleeping helpers on their own: coverage, errors, concurrent and
// nested callers. Also built alone under ThreadSanitizer (`make tsan-contended-pool`).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/contended_pool.h"

namespace kiln {
namespace {

// How often each index of [0, n) ran, and the smallest chunk seen.
struct Visits {
  std::vector<int> counts;
  int64_t smallest_chunk;
};

Visits Visit(int64_t n, int64_t grain, int threads) {
  std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
  std::atomic<int64_t> smallest{n + 1};
  RunOnContendedPool(n, grain, threads, [&](int64_t begin, int64_t end) {
    int64_t now = smallest.load();
    while (end - begin < now && !smallest.compare_exchange_weak(now, end - begin)) {
    }
    for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)]++;
  });
  Visits v{{}, smallest.load()};
  for (auto& s : seen) v.counts.push_back(s.load());
  return v;
}

TEST(ContendedPool, EveryIndexOnceInChunksOfAtLeastTheGrain) {
  for (int threads : {1, 2, 4})
    for (int64_t n : {1, 2, 7, 64, 1000, 100003})
      for (int64_t grain : {1, 3, 1000}) {
        const Visits v = Visit(n, grain, threads);
        for (size_t i = 0; i < v.counts.size(); ++i)
          ASSERT_EQ(v.counts[i], 1) << "n=" << n << " grain=" << grain << " threads=" << threads;
        // Only a range shorter than the grain is one shorter chunk.
        EXPECT_GE(v.smallest_chunk, std::min<int64_t>(grain, n)) << "n=" << n;
      }
}

TEST(ContendedPool, NothingToDoCallsNothing) {
  bool called = false;
  RunOnContendedPool(0, 1, 2, [&](int64_t, int64_t) { called = true; });
  EXPECT_FALSE(called);
}

TEST(ContendedPool, HelpersTakeBlocks) {
  const ContendedPoolStats before = GetContendedPoolStats();
  for (int round = 0; round < 5; ++round)
    RunOnContendedPool(32, 1, 2, [](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    });
  const ContendedPoolStats after = GetContendedPoolStats();
  EXPECT_EQ(after.loops - before.loops, 5);
  EXPECT_GT(after.helper_blocks, before.helper_blocks);
}

TEST(ContendedPool, TheFirstErrorIsRethrownOnceEveryBlockIsDone) {
  std::atomic<int> done{0};
  const auto caller = std::this_thread::get_id();
  try {
    RunOnContendedPool(48, 1, 2, [&](int64_t begin, int64_t) {
      // A helper's blocks take longest, so one is still running when the caller runs out.
      const bool helper = std::this_thread::get_id() != caller;
      std::this_thread::sleep_for(std::chrono::microseconds(helper ? 3000 : 100));
      done++;
      if (begin % 16 == 5) throw std::runtime_error("block failed");
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "block failed");
  }
  EXPECT_EQ(done.load(), 48);
}

TEST(ContendedPool, ConcurrentCallersEachGetTheirOwnLoopDone) {
  std::vector<std::thread> callers;
  std::vector<int64_t> sums(4, 0);
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        std::atomic<int64_t> sum{0};
        RunOnContendedPool(1000, 7, 3, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) sum += i;
        });
        sums[t] += sum.load();
      }
    });
  for (auto& c : callers) c.join();
  for (int64_t s : sums) EXPECT_EQ(s, 50 * (999 * 1000 / 2));
}

TEST(ContendedPool, NestedLoopsFinish) {
  std::atomic<int64_t> total{0};
  RunOnContendedPool(16, 1, 2, [&](int64_t, int64_t) {
    RunOnContendedPool(100, 3, 2, [&](int64_t begin, int64_t end) { total += end - begin; });
  });
  EXPECT_EQ(total.load(), 16 * 100);
}

}  // namespace
}  // namespace kiln
