// row.h - what flows between the stages of a data pipeline: rows of opaque values and markers.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dataset/queue.h"

namespace kiln::dataset {

// One column's value: a tensor, which the engine can slice and batch itself without calling
// back into the embedding, or an opaque object (in kiln, a Python object) that it only moves;
// how an object is freed belongs to whoever made it, through its deleter.
struct Value {
  std::shared_ptr<void> object;
  Tensor tensor;

  Value() = default;
  Value(std::shared_ptr<void> o) : object(std::move(o)) {}  // NOLINT: an object is a value
  explicit Value(Tensor t) : tensor(std::move(t)) {}
  bool is_tensor() const { return tensor.defined(); }
};

// Data: a row. EndOfEpoch: one pass of the stream is over (a source emits one after each pass;
// repeat and the iterator count them, batch and shuffle flush on them). EndOfData: nothing
// follows. Failure: a stage failed at this point of the stream; rows before it were delivered,
// so the error surfaces where it happened. Dropped: a filtered row's place inside a map stage,
// which keeps its workers' round-robin order aligned; it never leaves the stage.
enum class RowKind { kData, kEndOfEpoch, kEndOfData, kFailure, kDropped };

struct Row {
  RowKind kind = RowKind::kData;
  std::vector<Value> columns;
  // A batch on its way from the batch stage to the map stage that combines it: its rows.
  std::vector<Row> parts;
  // Within a map stage: which pass and which row of it this is, so random transforms can draw
  // from a generator seeded by the row's place (results then never depend on the worker count).
  int64_t epoch = 0;
  int64_t index = 0;
  // Failure: what was thrown, and where ("map(op) row 3 of epoch 0").
  std::exception_ptr error;
  std::string where;

  static Row Marker(RowKind kind) {
    Row row;
    row.kind = kind;
    return row;
  }
  static Row Failure(std::string where, std::exception_ptr error) {
    Row row = Marker(RowKind::kFailure);
    row.where = std::move(where);
    row.error = std::move(error);
    return row;
  }
};

using RowQueue = BoundedQueue<Row>;

}  // namespace kiln::dataset
