// pipeline.cc - building, starting, reading and stopping a pipeline of stages.
#include "dataset/pipeline.h"

#include <cstring>

#include "core/error.h"
#include "dataset/stages.h"

namespace kiln::dataset {

Pipeline::Pipeline(size_t queue_capacity) : capacity_(queue_capacity < 1 ? 1 : queue_capacity) {}

Pipeline::~Pipeline() { Stop(); }

std::shared_ptr<RowQueue> Pipeline::NewQueue(size_t capacity) {
  queues_.push_back(std::make_shared<RowQueue>(capacity));
  return queues_.back();
}

void Pipeline::CheckNotStarted() const {
  KILN_CHECK(!started_, Runtime, "dataset pipeline: cannot add a stage after Start");
}

std::shared_ptr<RowQueue> Pipeline::InputOf(int child) {
  KILN_CHECK(child >= 0 && child < static_cast<int>(outputs_.size()), Value,
             "dataset pipeline: no stage ", child);
  KILN_CHECK(!consumed_[child], Value, "dataset pipeline: stage ", child,
             " already feeds another stage");
  consumed_[child] = true;
  return outputs_[child];
}

int Pipeline::AddNode(std::shared_ptr<RowQueue> output, std::function<void()> body,
                      const std::string& name) {
  outputs_.push_back(std::move(output));
  bodies_.push_back({std::move(body)});
  consumed_.push_back(false);
  return static_cast<int>(outputs_.size()) - 1;
}

int Pipeline::AddSource(const std::string& name, ProducerFactory factory, int64_t passes) {
  CheckNotStarted();
  auto out = NewQueue(capacity_);
  return AddNode(out, stages::Source(name, std::move(factory), passes, out), name);
}

int Pipeline::AddTensorSource(const std::string& name, std::vector<Tensor> columns,
                              IndexFactory indices, int64_t passes, int64_t batch_size,
                              bool drop_remainder) {
  CheckNotStarted();
  KILN_CHECK(!columns.empty(), Value, name, ": a tensor source needs a column");
  for (const Tensor& c : columns) {
    KILN_CHECK(c.defined() && c.ndim() >= 1 && c.dim(0) == columns[0].dim(0), Value, name,
               ": columns must be tensors of one length along axis 0");
    KILN_CHECK(batch_size <= 0 || c.is_contiguous(), Value, name,
               ": batching in the source needs contiguous columns");
  }
  auto out = NewQueue(capacity_);
  return AddNode(out,
                 stages::TensorSource(name, std::move(columns), std::move(indices), passes,
                                      batch_size, drop_remainder, out),
                 name);
}

namespace {

// The parts' tensors of column `c` as one batch without copying, when they are the first rows
// of one buffer in order (a map before the batch wrote them into dataset::vision::BatchSlots).
bool ViewOfSlots(const std::vector<Row>& parts, size_t c, Tensor* out) {
  const Tensor& first = parts[0].columns[c].tensor;
  if (first.offset() != 0 || !first.is_contiguous()) return false;
  const int64_t n = first.numel();
  for (size_t k = 0; k < parts.size(); ++k) {
    const Tensor& t = parts[k].columns[c].tensor;
    if (!t.same_storage(first) || t.offset() != static_cast<int64_t>(k) * n ||
        t.dtype() != first.dtype() || t.shape() != first.shape() || !t.is_contiguous())
      return false;
  }
  Shape shape = first.shape();
  shape.insert(shape.begin(), static_cast<int64_t>(parts.size()));
  *out = first.AsStrided(shape, ContiguousStrides(shape), 0);
  return true;
}

}  // namespace

bool StackTensorColumns(const std::vector<Row>& parts, std::vector<Value>* columns) {
  if (parts.empty()) return false;
  const size_t width = parts[0].columns.size();
  std::vector<Value> stacked;
  for (size_t c = 0; c < width; ++c) {
    const Tensor& first = parts[0].columns[c].tensor;
    if (!first.defined()) return false;
    for (const Row& part : parts) {
      if (part.columns.size() != width) return false;
      const Tensor& t = part.columns[c].tensor;
      if (!t.defined() || t.dtype() != first.dtype() || t.shape() != first.shape() ||
          !t.is_contiguous())
        return false;
    }
    Tensor view;
    if (ViewOfSlots(parts, c, &view)) {
      stacked.emplace_back(std::move(view));
      continue;
    }
    Shape shape = first.shape();
    shape.insert(shape.begin(), static_cast<int64_t>(parts.size()));
    Tensor out = Tensor::Empty(shape, first.dtype());
    const size_t bytes = first.numel() * first.itemsize();
    char* dst = static_cast<char*>(out.raw_data());
    for (size_t k = 0; k < parts.size(); ++k)
      if (bytes) std::memcpy(dst + k * bytes, parts[k].columns[c].tensor.raw_data(), bytes);
    stacked.emplace_back(std::move(out));
  }
  *columns = std::move(stacked);
  return true;
}

int Pipeline::AddMap(const std::string& name, int child, MapFn fn, int workers) {
  CheckNotStarted();
  KILN_CHECK(workers >= 1, Value, "dataset pipeline: ", name, ": workers must be >= 1, got ",
             workers);
  auto in = InputOf(child);
  // Each worker's queues hold a few rows: enough to keep it busy, while the stage's output
  // queue is the prefetch buffer.
  std::vector<std::shared_ptr<RowQueue>> work, done;
  for (int i = 0; i < workers && workers > 1; ++i) {
    work.push_back(NewQueue(2));
    done.push_back(NewQueue(2));
  }
  auto out = NewQueue(capacity_);
  outputs_.push_back(out);
  bodies_.push_back(stages::Map(name, std::move(fn), in, work, done, out));
  consumed_.push_back(false);
  return static_cast<int>(outputs_.size()) - 1;
}

int Pipeline::AddTake(int child, int64_t count) {
  CheckNotStarted();
  KILN_CHECK(count >= 1, Value, "dataset pipeline: take count must be >= 1");
  auto in = InputOf(child);
  auto out = NewQueue(capacity_);
  return AddNode(out, stages::Take(count, in, out), "take");
}

int Pipeline::AddSkip(int child, int64_t count) {
  CheckNotStarted();
  KILN_CHECK(count >= 0, Value, "dataset pipeline: skip count must be >= 0");
  auto in = InputOf(child);
  auto out = NewQueue(capacity_);
  return AddNode(out, stages::Skip(count, in, out), "skip");
}

int Pipeline::AddRepeat(int child, int64_t count) {
  CheckNotStarted();
  KILN_CHECK(count == -1 || count >= 1, Value, "dataset pipeline: repeat count must be -1 or >= 1");
  auto in = InputOf(child);
  auto out = NewQueue(capacity_);
  return AddNode(out, stages::Repeat(count, in, out), "repeat");
}

int Pipeline::AddShuffle(int child, int64_t buffer_size, uint64_t seed) {
  CheckNotStarted();
  KILN_CHECK(buffer_size >= 1, Value, "dataset pipeline: shuffle buffer must be >= 1");
  auto in = InputOf(child);
  auto out = NewQueue(capacity_);
  return AddNode(out, stages::Shuffle(buffer_size, seed, in, out), "shuffle");
}

int Pipeline::AddProject(int child, std::vector<int> columns) {
  CheckNotStarted();
  auto in = InputOf(child);
  auto out = NewQueue(capacity_);
  return AddNode(out, stages::Project(std::move(columns), in, out), "project");
}

int Pipeline::AddBatch(int child, int64_t size, bool drop_remainder) {
  CheckNotStarted();
  KILN_CHECK(size >= 1, Value, "dataset pipeline: batch size must be >= 1");
  auto in = InputOf(child);
  auto out = NewQueue(capacity_);
  return AddNode(out, stages::Batch(size, drop_remainder, in, out), "batch");
}

int Pipeline::AddZip(const std::vector<int>& children) {
  CheckNotStarted();
  KILN_CHECK(!children.empty(), Value, "dataset pipeline: zip needs a child");
  std::vector<std::shared_ptr<RowQueue>> in;
  for (int c : children) in.push_back(InputOf(c));
  auto out = NewQueue(capacity_);
  return AddNode(out, stages::Zip(in, out), "zip");
}

int Pipeline::AddConcat(const std::vector<int>& children) {
  CheckNotStarted();
  KILN_CHECK(!children.empty(), Value, "dataset pipeline: concat needs a child");
  std::vector<std::shared_ptr<RowQueue>> in;
  for (int c : children) in.push_back(InputOf(c));
  auto out = NewQueue(capacity_);
  return AddNode(out, stages::Concat(in, out), "concat");
}

void Pipeline::Start(int root) {
  CheckNotStarted();
  KILN_CHECK(root >= 0 && root < static_cast<int>(outputs_.size()), Value,
             "dataset pipeline: no stage ", root);
  for (size_t i = 0; i < outputs_.size(); ++i)
    KILN_CHECK(consumed_[i] || static_cast<int>(i) == root, Value, "dataset pipeline: stage ", i,
               " feeds nothing");
  root_ = outputs_[root];
  started_ = true;
  for (auto& bodies : bodies_)
    for (auto& body : bodies) threads_.emplace_back(std::move(body));
  bodies_.clear();
}

NextStatus Pipeline::GetNext(Row* row, std::chrono::milliseconds timeout) {
  KILN_CHECK(started_, Runtime, "dataset pipeline: GetNext before Start");
  if (finished_) return NextStatus::kEndOfData;
  switch (root_->PopFor(row, timeout)) {
    case RowQueue::Status::kTimeout:
      return NextStatus::kTimeout;
    case RowQueue::Status::kClosed:
      finished_ = true;
      return NextStatus::kEndOfData;
    case RowQueue::Status::kItem:
      break;
  }
  switch (row->kind) {
    case RowKind::kEndOfEpoch:
      return NextStatus::kEndOfEpoch;
    case RowKind::kEndOfData:
      finished_ = true;
      return NextStatus::kEndOfData;
    case RowKind::kFailure:
      finished_ = true;
      return NextStatus::kFailure;
    default:
      return NextStatus::kRow;
  }
}

void Pipeline::Stop() {
  std::lock_guard<std::mutex> lock(stop_mutex_);
  if (stopped_) return;
  stopped_ = true;
  finished_ = true;
  for (auto& q : queues_) q->Close();
  for (auto& t : threads_) {
    if (!t.joinable()) continue;
    // Stop called from one of the pipeline's own threads (its user code dropped the last
    // reference to the iterator): that thread cannot join itself. It returns at its next push
    // or pop, and what it uses (queues, functions) is shared with it, not owned here.
    if (t.get_id() == std::this_thread::get_id())
      t.detach();
    else
      t.join();
  }
  // Rows still queued are freed here, after every thread has ended.
  for (auto& q : queues_) q->Drain();
}

}  // namespace kiln::dataset
