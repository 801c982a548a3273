// test_contended_pool.cc - kiln's sleeping helpers on their own: coverage, errors, concurrent and
// nested callers, and teams running tasks that depend on each other. Also built alone under
// ThreadSanitizer (`make tsan-contended-pool`).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
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

// Tasks with predecessors, as a graph's nodes: a task is ready once all of them finished. Records
// the order tasks finished in and which threads ran them.
class TaskGraph final : public TaskSource {
 public:
  TaskGraph(std::vector<std::vector<int>> preds, std::function<void(int)> work)
      : preds_(std::move(preds)), work_(std::move(work)), finished_(preds_.size(), false) {}

  bool RunOne() override {
    int task = -1;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t t = 0; t < preds_.size() && task < 0; ++t)
        if (!claimed_[t] && Ready(t)) task = static_cast<int>(t);
      if (task < 0) return false;
      claimed_[task] = true;
    }
    work_(task);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int p : preds_[task]) order_ok_ = order_ok_ && finished_[p];
      finished_[task] = true;
      threads_.push_back(std::this_thread::get_id());
      if (threads_.size() == preds_.size()) done_ = true;
    }
    TeamWorkChanged();
    return true;
  }
  bool Done() const override { return done_.load(); }

  bool order_ok() const { return order_ok_; }
  size_t finished() const { return threads_.size(); }
  bool ran_on_another_thread(std::thread::id caller) const {
    for (auto id : threads_)
      if (id != caller) return true;
    return false;
  }

 private:
  bool Ready(size_t t) const {
    for (int p : preds_[t])
      if (!finished_[p]) return false;
    return true;
  }
  const std::vector<std::vector<int>> preds_;
  const std::function<void(int)> work_;
  std::mutex mutex_;
  std::vector<bool> finished_, claimed_ = std::vector<bool>(preds_.size(), false);
  std::vector<std::thread::id> threads_;
  bool order_ok_ = true;
  std::atomic<bool> done_{false};
};

// Two chains that meet, then a fan-out and a join: 0->1->2, 0->3->4, {2,4}->5, 5->6..9, all->10.
std::vector<std::vector<int>> Diamonds() {
  return {{}, {0}, {1}, {0}, {3}, {2, 4}, {5}, {5}, {5}, {5}, {6, 7, 8, 9}};
}

TEST(ContendedPoolTeam, EveryTaskOnceAfterItsPredecessorsOnBothThreads) {
  const ContendedPoolStats before = GetContendedPoolStats();
  std::vector<std::atomic<int>> runs(11);
  auto graph = std::make_shared<TaskGraph>(Diamonds(), [&](int t) {
    runs[t]++;
    std::this_thread::sleep_for(std::chrono::microseconds(2000));  // the other member wakes
  });
  RunTeam(graph, 2);
  EXPECT_TRUE(graph->Done());
  EXPECT_EQ(graph->finished(), 11u);
  EXPECT_TRUE(graph->order_ok());
  for (auto& r : runs) EXPECT_EQ(r.load(), 1);
  EXPECT_TRUE(graph->ran_on_another_thread(std::this_thread::get_id()));
  const ContendedPoolStats after = GetContendedPoolStats();
  EXPECT_EQ(after.teams - before.teams, 1);
  EXPECT_GT(after.helper_tasks, before.helper_tasks);
}

TEST(ContendedPoolTeam, OneThreadRunsEverythingOnTheCaller) {
  auto graph = std::make_shared<TaskGraph>(Diamonds(), [](int) {});
  RunTeam(graph, 1);
  EXPECT_EQ(graph->finished(), 11u);
  EXPECT_TRUE(graph->order_ok());
  EXPECT_FALSE(graph->ran_on_another_thread(std::this_thread::get_id()));
}

TEST(ContendedPoolTeam, TasksThatSplitLoopsFinish) {
  std::atomic<int64_t> total{0};
  auto graph = std::make_shared<TaskGraph>(Diamonds(), [&](int) {
    RunOnContendedPool(1000, 10, 2, [&](int64_t begin, int64_t end) { total += end - begin; });
  });
  RunTeam(graph, 2);
  EXPECT_EQ(total.load(), 11 * 1000);
  EXPECT_TRUE(graph->order_ok());
}

TEST(ContendedPoolTeam, ConcurrentTeamsAndLoopsEachFinish) {
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      for (int round = 0; round < 30; ++round) {
        std::atomic<int64_t> sum{0};
        auto graph = std::make_shared<TaskGraph>(Diamonds(), [&](int task) {
          if (t % 2 == 0) {
            sum += task;
            return;
          }
          RunOnContendedPool(64, 1, 3, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) sum += task;
          });
        });
        RunTeam(graph, 3);
        const int64_t want = (t % 2 == 0 ? 1 : 64) * 55;
        if (sum.load() != want || !graph->order_ok()) bad++;
      }
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace kiln
