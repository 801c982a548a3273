// test_dataset.cc - the data pipeline's engine: the bounded queue, each stage, errors and stop.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dataset/pipeline.h"

namespace kiln::dataset {
namespace {

using std::chrono::milliseconds;

Value Int(int64_t v) { return Value(std::make_shared<int64_t>(v)); }
int64_t AsInt(const Value& v) { return *static_cast<int64_t*>(v.object.get()); }

// A source of the integers [0, n) as one-column rows, `passes` times.
int AddRange(Pipeline& p, int64_t n, int64_t passes = 1) {
  return p.AddSource(
      "range",
      [n](int64_t) {
        auto next = std::make_shared<int64_t>(0);
        return Producer([n, next](std::vector<Value>* cols) {
          if (*next >= n) return false;
          cols->push_back(Int((*next)++));
          return true;
        });
      },
      passes);
}

// Every epoch's rows (first column) until the end of the data.
std::vector<std::vector<int64_t>> ReadAll(Pipeline& p) {
  std::vector<std::vector<int64_t>> epochs(1);
  for (;;) {
    Row row;
    NextStatus s = p.GetNext(&row, milliseconds(5000));
    if (s == NextStatus::kRow) {
      epochs.back().push_back(AsInt(row.columns.at(0)));
    } else if (s == NextStatus::kEndOfEpoch) {
      epochs.emplace_back();
    } else if (s == NextStatus::kEndOfData) {
      epochs.pop_back();
      return epochs;
    } else {
      ADD_FAILURE() << "unexpected status " << static_cast<int>(s) << " " << row.where;
      return epochs;
    }
  }
}

std::vector<int64_t> Iota(int64_t begin, int64_t end) {
  std::vector<int64_t> v;
  for (int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

TEST(DatasetQueue, PushBlocksWhenFullUntilAPop) {
  BoundedQueue<int> q(2);
  ASSERT_TRUE(q.Push(1));
  ASSERT_TRUE(q.Push(2));
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    q.Push(3);
    pushed = true;
  });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(pushed.load());
  int v = 0;
  ASSERT_TRUE(q.Pop(&v));
  EXPECT_EQ(v, 1);
  producer.join();
  EXPECT_TRUE(pushed.load());
  EXPECT_EQ(q.size(), 2u);
}

TEST(DatasetQueue, CloseWakesBlockedPopAndPush) {
  BoundedQueue<int> empty(1), full(1);
  ASSERT_TRUE(full.Push(0));
  std::thread popper([&] {
    int v;
    EXPECT_FALSE(empty.Pop(&v));
  });
  std::thread pusher([&] { EXPECT_FALSE(full.Push(1)); });
  std::this_thread::sleep_for(milliseconds(20));
  empty.Close();
  full.Close();
  popper.join();
  pusher.join();
  int v;
  EXPECT_EQ(empty.PopFor(&v, milliseconds(1)), BoundedQueue<int>::Status::kClosed);
}

TEST(DatasetQueue, PopForTimesOut) {
  BoundedQueue<int> q(1);
  int v;
  EXPECT_EQ(q.PopFor(&v, milliseconds(5)), BoundedQueue<int>::Status::kTimeout);
}

TEST(DatasetPipeline, SourceEpochsAndEnd) {
  Pipeline p(4);
  p.Start(AddRange(p, 5, 2));
  EXPECT_EQ(ReadAll(p), (std::vector<std::vector<int64_t>>{Iota(0, 5), Iota(0, 5)}));
}

TEST(DatasetPipeline, MapKeepsOrderForAnyWorkerCount) {
  for (int workers : {1, 2, 5}) {
    Pipeline p(3);
    int src = AddRange(p, 50, 2);
    int m = p.AddMap(
        "double", src,
        [](Row* row) {
          int64_t v = AsInt(row->columns[0]);
          // Uneven costs, so a worker that finishes early must still wait its turn.
          std::this_thread::sleep_for(std::chrono::microseconds((v * 37) % 300));
          row->columns[0] = Int(v * 2 + row->epoch * 1000);
          return v % 7 != 3;  // drops some rows: a filter
        },
        workers);
    p.Start(m);
    std::vector<int64_t> expect0, expect1;
    for (int64_t v = 0; v < 50; ++v)
      if (v % 7 != 3) expect0.push_back(v * 2), expect1.push_back(v * 2 + 1000);
    EXPECT_EQ(ReadAll(p), (std::vector<std::vector<int64_t>>{expect0, expect1}))
        << workers << " workers";
  }
}

TEST(DatasetPipeline, TakeSkipRepeat) {
  Pipeline p(2);
  int src = AddRange(p, 10, 4);
  int skip = p.AddSkip(src, 2);
  int take = p.AddTake(skip, 3);
  int rep = p.AddRepeat(take, 2);
  p.Start(rep);
  // Each of the source's passes gives 2,3,4; repeat(2) makes two passes one epoch.
  std::vector<int64_t> twice = {2, 3, 4, 2, 3, 4};
  EXPECT_EQ(ReadAll(p), (std::vector<std::vector<int64_t>>{twice, twice}));
}

TEST(DatasetPipeline, TakeEndsASourceWithoutEnd) {
  Pipeline p(2);
  int take = p.AddTake(AddRange(p, 1 << 30, -1), 4);
  p.Start(take);
  Row row;
  std::vector<int64_t> got;
  while (p.GetNext(&row, milliseconds(5000)) == NextStatus::kRow)
    got.push_back(AsInt(row.columns[0]));
  EXPECT_EQ(got, Iota(0, 4));
  p.Stop();  // the source is still producing: Stop must end it
}

TEST(DatasetPipeline, ShuffleIsASeededPermutationPerPass) {
  auto run = [](uint64_t seed) {
    Pipeline p(4);
    int sh = p.AddShuffle(AddRange(p, 40, 2), 8, seed);
    p.Start(sh);
    return ReadAll(p);
  };
  auto a = run(7), b = run(7), c = run(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_NE(a[0], a[1]);  // each pass has its own order
  for (auto epoch : a) {
    EXPECT_NE(epoch, Iota(0, 40));
    std::sort(epoch.begin(), epoch.end());
    EXPECT_EQ(epoch, Iota(0, 40));
  }
}

TEST(DatasetPipeline, BatchGroupsRowsAndFlushesAtTheEndOfAPass) {
  for (bool drop : {false, true}) {
    Pipeline p(2);
    int b = p.AddBatch(AddRange(p, 7, 1), 3, drop);
    int m = p.AddMap(
        "sum", b,
        [](Row* row) {
          int64_t sum = 0;
          for (auto& part : row->parts) sum += AsInt(part.columns[0]);
          row->columns = {Int(sum)};
          return true;
        },
        2);
    p.Start(m);
    auto expect = drop ? std::vector<int64_t>{3, 12} : std::vector<int64_t>{3, 12, 6};
    EXPECT_EQ(ReadAll(p), (std::vector<std::vector<int64_t>>{expect}));
  }
}

TEST(DatasetPipeline, ZipStopsAtTheShortestAndConcatJoinsPasses) {
  Pipeline p(2);
  int zip = p.AddZip({AddRange(p, 3, 2), AddRange(p, 5, 2)});
  int project = p.AddProject(zip, {1});
  p.Start(project);
  EXPECT_EQ(ReadAll(p), (std::vector<std::vector<int64_t>>{Iota(0, 3), Iota(0, 3)}));

  Pipeline q(2);
  int cat = q.AddConcat({AddRange(q, 2, 2), AddRange(q, 3, 2)});
  q.Start(cat);
  std::vector<int64_t> joined = {0, 1, 0, 1, 2};
  EXPECT_EQ(ReadAll(q), (std::vector<std::vector<int64_t>>{joined, joined}));
}

TEST(DatasetPipeline, AMapFailureArrivesInOrderWithItsRow) {
  Pipeline p(4);
  int m = p.AddMap(
      "check", AddRange(p, 100, 1),
      [](Row* row) {
        if (AsInt(row->columns[0]) == 5) throw std::invalid_argument("bad value 5");
        return true;
      },
      3);
  p.Start(m);
  Row row;
  for (int64_t i = 0; i < 5; ++i) {
    ASSERT_EQ(p.GetNext(&row, milliseconds(5000)), NextStatus::kRow);
    EXPECT_EQ(AsInt(row.columns[0]), i);
  }
  ASSERT_EQ(p.GetNext(&row, milliseconds(5000)), NextStatus::kFailure);
  EXPECT_EQ(row.where, "check row 5 of epoch 0");
  EXPECT_THROW(std::rethrow_exception(row.error), std::invalid_argument);
  EXPECT_EQ(p.GetNext(&row, milliseconds(1)), NextStatus::kEndOfData);
}

TEST(DatasetPipeline, ASourceFailureNamesItsRow) {
  Pipeline p(2);
  int src = p.AddSource(
      "gen",
      [](int64_t) {
        auto next = std::make_shared<int64_t>(0);
        return Producer([next](std::vector<Value>* cols) {
          if (*next == 2) throw std::runtime_error("broken");
          cols->push_back(Int((*next)++));
          return true;
        });
      },
      1);
  p.Start(src);
  Row row;
  ASSERT_EQ(p.GetNext(&row, milliseconds(5000)), NextStatus::kRow);
  ASSERT_EQ(p.GetNext(&row, milliseconds(5000)), NextStatus::kRow);
  ASSERT_EQ(p.GetNext(&row, milliseconds(5000)), NextStatus::kFailure);
  EXPECT_EQ(row.where, "gen row 2 of epoch 0");
}

TEST(DatasetPipeline, StopEndsBlockedStagesAndFreesQueuedRows) {
  auto alive = std::make_shared<std::atomic<int>>(0);
  {
    Pipeline p(2);
    int src = p.AddSource(
        "counted",
        [alive](int64_t) {
          return Producer([alive](std::vector<Value>* cols) {
            ++*alive;
            cols->push_back(Value(std::shared_ptr<void>(new int64_t(0), [alive](void* v) {
              --*alive;
              delete static_cast<int64_t*>(v);
            })));
            return true;
          });
        },
        -1);
    int m = p.AddMap("id", src, [](Row*) { return true; }, 4);
    p.Start(m);
    Row row;
    ASSERT_EQ(p.GetNext(&row, milliseconds(5000)), NextStatus::kRow);
    std::this_thread::sleep_for(milliseconds(20));  // every queue fills and every stage blocks
    p.Stop();
    EXPECT_EQ(p.GetNext(&row, milliseconds(1)), NextStatus::kEndOfData);
  }
  EXPECT_EQ(alive->load(), 0);
}

TEST(DatasetPipeline, TensorSourceAndStackingNeedNoCallbacks) {
  Tensor data = Tensor::Empty({5, 2}, DType::Int32);
  for (int i = 0; i < 10; ++i) data.data<int32_t>()[i] = i;
  Pipeline p(2);
  int src = p.AddTensorSource(
      "slices", {data}, [](int64_t pass) { return std::vector<int64_t>{4, 0, 2, 1, 3}; }, 1);
  int batch = p.AddBatch(src, 2, false);
  int stacked = p.AddMap(
      "stack", batch, [](Row* row) { return StackTensorColumns(row->parts, &row->columns); }, 2);
  p.Start(stacked);
  std::vector<std::vector<int32_t>> got;
  Row row;
  while (p.GetNext(&row, milliseconds(5000)) == NextStatus::kRow) {
    const Tensor& t = row.columns.at(0).tensor;
    ASSERT_EQ(t.shape()[1], 2);
    got.emplace_back(t.data<int32_t>(), t.data<int32_t>() + t.numel());
  }
  EXPECT_EQ(got, (std::vector<std::vector<int32_t>>{{8, 9, 0, 1}, {4, 5, 2, 3}, {6, 7}}));
}

TEST(DatasetPipeline, ATensorSourceCanBatchItself) {
  Tensor data = Tensor::Empty({5, 2}, DType::Int32);
  for (int i = 0; i < 10; ++i) data.data<int32_t>()[i] = i;
  for (bool drop : {false, true}) {
    Pipeline p(2);
    int src = p.AddTensorSource(
        "slices", {data}, [](int64_t) { return std::vector<int64_t>{4, 0, 2, 1, 3}; }, 2, 2, drop);
    p.Start(src);
    std::vector<std::vector<int32_t>> got;
    int epochs = 0;
    Row row;
    for (NextStatus s; (s = p.GetNext(&row, milliseconds(5000))) != NextStatus::kEndOfData;) {
      if (s == NextStatus::kEndOfEpoch) {
        ++epochs;
        continue;
      }
      ASSERT_EQ(s, NextStatus::kRow);
      const Tensor& t = row.columns.at(0).tensor;
      got.emplace_back(t.data<int32_t>(), t.data<int32_t>() + t.numel());
    }
    std::vector<std::vector<int32_t>> one = {{8, 9, 0, 1}, {4, 5, 2, 3}};
    if (!drop) one.push_back({6, 7});
    std::vector<std::vector<int32_t>> both = one;
    both.insert(both.end(), one.begin(), one.end());
    EXPECT_EQ(got, both);
    EXPECT_EQ(epochs, 2);
  }
}

TEST(DatasetPipeline, StackingDeclinesMixedColumns) {
  Row a, b;
  a.columns.emplace_back(Tensor::Empty({2}, DType::Float32));
  b.columns.emplace_back(Tensor::Empty({3}, DType::Float32));  // another shape
  std::vector<Value> out;
  EXPECT_FALSE(StackTensorColumns({a, b}, &out));
  b.columns[0] = Int(1);  // an object
  EXPECT_FALSE(StackTensorColumns({a, b}, &out));
  EXPECT_TRUE(out.empty());
}

TEST(DatasetPipeline, ATensorSourceIndexOutOfRangeFails) {
  Pipeline p(2);
  int src = p.AddTensorSource(
      "slices", {Tensor::Empty({3}, DType::Int64)},
      [](int64_t) { return std::vector<int64_t>{0, 7}; }, 1);
  p.Start(src);
  Row row;  // the pass's indices are checked before its first row goes out
  ASSERT_EQ(p.GetNext(&row, milliseconds(5000)), NextStatus::kFailure);
  EXPECT_EQ(row.where, "slices row 1 of epoch 0");
  EXPECT_THROW(std::rethrow_exception(row.error), Error);
}

TEST(DatasetPipeline, RejectsBadGraphs) {
  Pipeline p(2);
  int src = AddRange(p, 3);
  EXPECT_THROW(p.AddBatch(src, 0, false), Error);
  int take = p.AddTake(src, 1);
  EXPECT_THROW(p.AddTake(src, 1), Error);  // src already feeds take
  EXPECT_THROW(p.AddMap("m", take, [](Row*) { return true; }, 0), Error);
  int orphan = AddRange(p, 3);
  (void)orphan;
  EXPECT_THROW(p.Start(take), Error);  // orphan feeds nothing
}

}  // namespace
}  // namespace kiln::dataset
