// stages.cc - the stages: a source, parallel map, and the serial operations on rows and markers.
#include "dataset/stages.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>

#include "core/error.h"

namespace kiln::dataset::stages {
namespace {

bool IsEnd(const Row& row) {
  return row.kind == RowKind::kEndOfData || row.kind == RowKind::kFailure;
}

// Runs a stage's body; anything it throws leaves as a Failure row, so a bug in a stage ends the
// stream with an error instead of a silent stop.
Body Guarded(std::string name, QueuePtr out, std::function<void()> body) {
  return [name = std::move(name), out = std::move(out), body = std::move(body)] {
    try {
      body();
    } catch (...) {
      out->Push(Row::Failure(name, std::current_exception()));
    }
  };
}

std::string RowPlace(const std::string& name, int64_t index, int64_t epoch) {
  return name + " row " + std::to_string(index) + " of epoch " + std::to_string(epoch);
}

// A generator for shuffle pass `pass`: the seed's stream, decorrelated by splitmix64.
uint64_t PassSeed(uint64_t seed, int64_t pass) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(pass + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

Body Source(std::string name, ProducerFactory factory, int64_t passes, QueuePtr out) {
  return Guarded(name, out, [=] {
    for (int64_t pass = 0; passes < 0 || pass < passes; ++pass) {
      int64_t index = 0;
      try {
        Producer produce = factory(pass);
        for (;; ++index) {
          Row row;
          if (!produce(&row.columns)) break;
          if (!out->Push(std::move(row))) return;
        }
      } catch (...) {
        out->Push(Row::Failure(RowPlace(name, index, pass), std::current_exception()));
        return;
      }
      if (!out->Push(Row::Marker(RowKind::kEndOfEpoch))) return;
    }
    out->Push(Row::Marker(RowKind::kEndOfData));
  });
}

namespace {

// Rows `rows[0..count)` of a contiguous tensor, gathered into a new one.
Tensor GatherRows(const Tensor& column, const int64_t* rows, int64_t count) {
  Shape shape = column.shape();
  const size_t row_bytes = column.dim(0) ? column.numel() / column.dim(0) * column.itemsize() : 0;
  shape[0] = count;
  Tensor out = Tensor::Empty(shape, column.dtype());
  const char* src = static_cast<const char*>(column.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t k = 0; k < count && row_bytes; ++k)
    std::memcpy(dst + k * row_bytes, src + rows[k] * row_bytes, row_bytes);
  return out;
}

}  // namespace

Body TensorSource(std::string name, std::vector<Tensor> columns, IndexFactory indices,
                  int64_t passes, int64_t batch_size, bool drop_remainder, QueuePtr out) {
  return Guarded(name, out, [=] {
    const int64_t length = columns[0].dim(0);
    for (int64_t pass = 0; passes < 0 || pass < passes; ++pass) {
      int64_t index = 0;
      try {
        const std::vector<int64_t> order = indices(pass);
        for (; index < static_cast<int64_t>(order.size()); ++index)
          if (order[index] < 0 || order[index] >= length)
            Throw(ErrorKind::Index, "index ", order[index], " is out of range for ", length,
                  " rows");
        const int64_t total = static_cast<int64_t>(order.size());
        const int64_t step = batch_size > 0 ? batch_size : 1;
        for (index = 0; index < total; index += step) {
          const int64_t count = std::min(step, total - index);
          if (batch_size > 0 && count < batch_size && drop_remainder) break;
          Row row;
          for (const Tensor& column : columns)
            row.columns.emplace_back(batch_size > 0
                                         ? GatherRows(column, order.data() + index, count)
                                         : column.Select(0, order[index]));
          if (!out->Push(std::move(row))) return;
        }
      } catch (...) {
        out->Push(Row::Failure(RowPlace(name, index, pass), std::current_exception()));
        return;
      }
      if (!out->Push(Row::Marker(RowKind::kEndOfEpoch))) return;
    }
    out->Push(Row::Marker(RowKind::kEndOfData));
  });
}

namespace {

// Applies `fn` to a data row in place; what it throws becomes the row's failure.
void ApplyMap(const std::string& name, const MapFn& fn, Row& row) {
  try {
    if (!fn(&row)) row = Row::Marker(RowKind::kDropped);
    row.parts.clear();
  } catch (...) {
    row = Row::Failure(RowPlace(name, row.index, row.epoch), std::current_exception());
  }
}

// One worker: the stage is a single thread, with no hand-offs between threads for a row.
Body InlineMap(std::string name, MapFn fn, QueuePtr in, QueuePtr out) {
  return Guarded(name, out, [=] {
    int64_t epoch = 0, index = 0;
    for (;;) {
      Row row;
      if (!in->Pop(&row)) return;
      if (row.kind == RowKind::kData) {
        row.epoch = epoch;
        row.index = index++;
        ApplyMap(name, fn, row);
        if (row.kind == RowKind::kDropped) continue;
      } else if (row.kind == RowKind::kEndOfEpoch) {
        ++epoch, index = 0;
      }
      const bool end = IsEnd(row);
      if (!out->Push(std::move(row)) || end) return;
    }
  });
}

}  // namespace

std::vector<Body> Map(std::string name, MapFn fn, QueuePtr in, std::vector<QueuePtr> work,
                      std::vector<QueuePtr> done, QueuePtr out) {
  const size_t n = work.size();
  if (n == 0) return {InlineMap(std::move(name), std::move(fn), std::move(in), std::move(out))};
  std::vector<Body> bodies;
  // The dispatcher deals rows to the workers in turn and the collector reads their results in
  // the same turn, so rows leave in the order they came whatever each one costs.
  bodies.push_back(Guarded(name, out, [=] {
    int64_t epoch = 0, index = 0;
    for (size_t turn = 0;; turn = (turn + 1) % n) {
      Row row;
      if (!in->Pop(&row)) return;
      row.epoch = epoch;
      row.index = index++;
      if (row.kind == RowKind::kEndOfEpoch) ++epoch, index = 0;
      if (IsEnd(row)) {
        // Every worker gets an end so all of them return; the collector reads this one first.
        for (size_t k = 1; k < n; ++k) work[(turn + k) % n]->Push(Row::Marker(RowKind::kEndOfData));
        work[turn]->Push(std::move(row));
        return;
      }
      if (!work[turn]->Push(std::move(row))) return;
    }
  }));
  for (size_t w = 0; w < n; ++w) {
    bodies.push_back([=] {
      for (;;) {
        Row row;
        if (!work[w]->Pop(&row)) return;
        const bool end = IsEnd(row);
        if (row.kind == RowKind::kData) ApplyMap(name, fn, row);
        if (!done[w]->Push(std::move(row)) || end) return;
      }
    });
  }
  bodies.push_back(Guarded(name, out, [=] {
    for (size_t turn = 0;; turn = (turn + 1) % n) {
      Row row;
      if (!done[turn]->Pop(&row)) return;
      if (row.kind == RowKind::kDropped) continue;
      const bool end = IsEnd(row);
      if (!out->Push(std::move(row)) || end) return;
    }
  }));
  return bodies;
}

// The loop of a one-input stage: `on_row` handles each data row and `on_epoch` each
// end-of-epoch; both return false once the output is closed. Ends are passed on.
template <typename OnRow, typename OnEpoch>
void SerialLoop(const QueuePtr& in, const QueuePtr& out, OnRow on_row, OnEpoch on_epoch) {
  for (;;) {
    Row row;
    if (!in->Pop(&row)) return;
    if (IsEnd(row)) {
      out->Push(std::move(row));
      return;
    }
    const bool open = row.kind == RowKind::kEndOfEpoch ? on_epoch() : on_row(std::move(row));
    if (!open) return;
  }
}

Body Take(int64_t count, QueuePtr in, QueuePtr out) {
  return Guarded("take", out, [=] {
    // The end of the epoch goes out as soon as `count` rows have, so take() ends even a
    // source without end; the rest of the child's pass is read and dropped.
    int64_t taken = 0;
    bool ended = false;
    auto end_epoch = [&] {
      ended = true;
      return out->Push(Row::Marker(RowKind::kEndOfEpoch));
    };
    SerialLoop(
        in, out,
        [&](Row row) {
          if (ended) return true;
          if (!out->Push(std::move(row))) return false;
          return ++taken < count || end_epoch();
        },
        [&] {
          const bool open = ended || end_epoch();
          taken = 0;
          ended = false;
          return open;
        });
  });
}

Body Skip(int64_t count, QueuePtr in, QueuePtr out) {
  return Guarded("skip", out, [=] {
    int64_t seen = 0;
    SerialLoop(
        in, out, [&](Row row) { return seen++ < count || out->Push(std::move(row)); },
        [&] {
          seen = 0;
          return out->Push(Row::Marker(RowKind::kEndOfEpoch));
        });
  });
}

Body Repeat(int64_t count, QueuePtr in, QueuePtr out) {
  return Guarded("repeat", out, [=] {
    int64_t ends = 0;
    SerialLoop(
        in, out, [&](Row row) { return out->Push(std::move(row)); },
        [&] {
          ++ends;
          return count < 0 || ends % count != 0 || out->Push(Row::Marker(RowKind::kEndOfEpoch));
        });
  });
}

Body Shuffle(int64_t buffer_size, uint64_t seed, QueuePtr in, QueuePtr out) {
  return Guarded("shuffle", out, [=] {
    // A buffer of `buffer_size` rows: once full, each new row takes the place of a random one,
    // which goes out; at the end of the pass the rest leave in random order. Each pass has its
    // own generator, so an epoch's order does not depend on how the previous one ended.
    int64_t pass = 0;
    std::mt19937_64 rng(PassSeed(seed, pass));
    std::vector<Row> buffer;
    SerialLoop(
        in, out,
        [&](Row row) {
          if (static_cast<int64_t>(buffer.size()) < buffer_size) {
            buffer.push_back(std::move(row));
            return true;
          }
          std::swap(buffer[rng() % buffer.size()], row);
          return out->Push(std::move(row));
        },
        [&] {
          for (size_t i = buffer.size(); i > 1; --i) std::swap(buffer[i - 1], buffer[rng() % i]);
          for (auto& row : buffer)
            if (!out->Push(std::move(row))) return false;
          buffer.clear();
          rng.seed(PassSeed(seed, ++pass));
          return out->Push(Row::Marker(RowKind::kEndOfEpoch));
        });
  });
}

Body Project(std::vector<int> columns, QueuePtr in, QueuePtr out) {
  return Guarded("project", out, [=] {
    SerialLoop(
        in, out,
        [&](Row row) {
          std::vector<Value> picked;
          for (int c : columns) {
            if (c < 0 || c >= static_cast<int>(row.columns.size()))
              throw std::out_of_range("project: the row has " + std::to_string(row.columns.size()) +
                                      " columns, not " + std::to_string(c + 1));
            picked.push_back(row.columns[c]);
          }
          row.columns = std::move(picked);
          return out->Push(std::move(row));
        },
        [&] { return out->Push(Row::Marker(RowKind::kEndOfEpoch)); });
  });
}

Body Batch(int64_t size, bool drop_remainder, QueuePtr in, QueuePtr out) {
  return Guarded("batch", out, [=] {
    Row batch;
    SerialLoop(
        in, out,
        [&](Row row) {
          batch.parts.push_back(std::move(row));
          if (static_cast<int64_t>(batch.parts.size()) < size) return true;
          return out->Push(std::exchange(batch, Row()));
        },
        [&] {
          Row rest = std::exchange(batch, Row());
          if (!rest.parts.empty() && !drop_remainder && !out->Push(std::move(rest))) return false;
          return out->Push(Row::Marker(RowKind::kEndOfEpoch));
        });
  });
}

namespace {

// Reads `in` up to its end of epoch, dropping rows. False (and `end` set) at an end instead.
bool DrainEpoch(const QueuePtr& in, Row* end) {
  for (;;) {
    Row row;
    if (!in->Pop(&row)) {
      *end = Row::Marker(RowKind::kEndOfData);
      return false;
    }
    if (row.kind == RowKind::kEndOfEpoch) return true;
    if (IsEnd(row)) {
      *end = std::move(row);
      return false;
    }
  }
}

}  // namespace

Body Zip(std::vector<QueuePtr> in, QueuePtr out) {
  return Guarded("zip", out, [=] {
    for (;;) {
      std::vector<Row> rows(in.size());
      for (size_t i = 0; i < in.size(); ++i)
        if (!in[i]->Pop(&rows[i])) return;
      for (auto& row : rows)
        if (IsEnd(row)) {
          out->Push(std::move(row));
          return;
        }
      bool epoch_over = false;
      for (auto& row : rows) epoch_over = epoch_over || row.kind == RowKind::kEndOfEpoch;
      if (epoch_over) {
        // The shortest child decides: the others' rest of the pass is dropped.
        for (size_t i = 0; i < in.size(); ++i) {
          Row end;
          if (rows[i].kind != RowKind::kEndOfEpoch && !DrainEpoch(in[i], &end)) {
            out->Push(std::move(end));
            return;
          }
        }
        if (!out->Push(Row::Marker(RowKind::kEndOfEpoch))) return;
        continue;
      }
      Row zipped;
      for (auto& row : rows)
        for (auto& v : row.columns) zipped.columns.push_back(std::move(v));
      if (!out->Push(std::move(zipped))) return;
    }
  });
}

Body Concat(std::vector<QueuePtr> in, QueuePtr out) {
  return Guarded("concat", out, [=] {
    for (;;) {
      for (size_t i = 0; i < in.size(); ++i) {
        for (;;) {
          Row row;
          if (!in[i]->Pop(&row)) return;
          if (row.kind == RowKind::kEndOfEpoch) break;
          const bool end = IsEnd(row);
          if (!out->Push(std::move(row)) || end) return;
        }
      }
      if (!out->Push(Row::Marker(RowKind::kEndOfEpoch))) return;
    }
  });
}

}  // namespace kiln::dataset::stages
