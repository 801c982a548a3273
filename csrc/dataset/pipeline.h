// pipeline.h - a data pipeline: a tree of stages on their own threads, joined by bounded queues.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dataset/row.h"

namespace kiln::dataset {

// A source's rows for one pass: fills `columns` and returns true, or returns false at the end.
using Producer = std::function<bool(std::vector<Value>* columns)>;
// Starts pass `pass` (0, 1, ...) of a source.
using ProducerFactory = std::function<Producer(int64_t pass)>;
// The row indices pass `pass` of a tensor source reads, in order.
using IndexFactory = std::function<std::vector<int64_t>(int64_t pass)>;
// Transforms a row in place (its columns, or for a batch its parts into columns); false drops
// it. Runs on a map stage's workers, several at once.
using MapFn = std::function<bool(Row* row)>;

enum class NextStatus { kRow, kEndOfEpoch, kEndOfData, kFailure, kTimeout };

// A batch's columns stacked along a new first axis, when every part's column is a contiguous
// tensor of one dtype and shape; false (and `columns` untouched) otherwise, for the embedding
// to combine them.
bool StackTensorColumns(const std::vector<Row>& parts, std::vector<Value>* columns);

// Built bottom-up (each Add* returns a node id to use as a later node's child), then started
// once. Every stage is one thread (a map stage: a dispatcher, its workers and a collector) that
// pops from its children's queues and pushes to its own; each queue holds at most
// `queue_capacity` rows, which is the prefetch depth. Map stages keep the input order, so the
// output never depends on the number of workers.
class Pipeline {
 public:
  explicit Pipeline(size_t queue_capacity);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // `passes` passes of the source, each followed by an end-of-epoch; -1 for no end.
  int AddSource(const std::string& name, ProducerFactory factory, int64_t passes);
  // Rows of `columns` (equally long along axis 0) at the indices `indices(pass)` gives: views,
  // made on the stage's thread without calling back into the embedding. With `batch_size` > 0
  // the stage is also the batch after it: each row it sends is `batch_size` rows gathered (the
  // last of a pass shorter, or dropped with `drop_remainder`); the columns must be contiguous.
  int AddTensorSource(const std::string& name, std::vector<Tensor> columns, IndexFactory indices,
                      int64_t passes, int64_t batch_size = 0, bool drop_remainder = false);
  int AddMap(const std::string& name, int child, MapFn fn, int workers);
  int AddTake(int child, int64_t count);
  int AddSkip(int child, int64_t count);
  // Passes on every `count`-th end-of-epoch of its child (-1: none), so the stages above see
  // `count` of its child's passes as one.
  int AddRepeat(int child, int64_t count);
  int AddShuffle(int child, int64_t buffer_size, uint64_t seed);
  int AddProject(int child, std::vector<int> columns);
  // Groups rows into one whose parts are `size` rows (fewer at the end of a pass unless
  // `drop_remainder`); a map stage after it makes the batch's columns.
  int AddBatch(int child, int64_t size, bool drop_remainder);
  // One row of each child side by side; ends with the shortest child's pass.
  int AddZip(const std::vector<int>& children);
  // Each child's pass in turn, as one pass.
  int AddConcat(const std::vector<int>& children);

  void Start(int root);
  // The next row of the root (waiting at most `timeout`). kFailure: `row` holds the error.
  NextStatus GetNext(Row* row, std::chrono::milliseconds timeout);
  // Closes every queue, so each stage returns at its next push or pop, and joins the threads.
  // A stage inside a user function finishes that call first. Idempotent.
  void Stop();

  bool started() const { return started_; }
  size_t num_threads() const { return threads_.size(); }

 private:
  int AddNode(std::shared_ptr<RowQueue> output, std::function<void()> body,
              const std::string& name);
  std::shared_ptr<RowQueue> NewQueue(size_t capacity);
  std::shared_ptr<RowQueue> InputOf(int child);
  void CheckNotStarted() const;

  size_t capacity_;
  std::vector<std::shared_ptr<RowQueue>> queues_;           // every queue, for Stop
  std::vector<std::shared_ptr<RowQueue>> outputs_;          // by node id
  std::vector<std::vector<std::function<void()>>> bodies_;  // by node id
  std::vector<bool> consumed_;                              // each output has one reader
  std::vector<std::thread> threads_;
  std::shared_ptr<RowQueue> root_;
  std::mutex stop_mutex_;
  bool started_ = false;
  bool finished_ = false;
  bool stopped_ = false;
};

}  // namespace kiln::dataset
