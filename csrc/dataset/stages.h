// stages.h - the bodies of the pipeline's stages: each loops popping rows and pushing rows.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dataset/pipeline.h"

namespace kiln::dataset::stages {

using QueuePtr = std::shared_ptr<RowQueue>;
using Body = std::function<void()>;

Body Source(std::string name, ProducerFactory factory, int64_t passes, QueuePtr out);
// batch_size > 0: rows come out already batched (gathered from contiguous columns).
Body TensorSource(std::string name, std::vector<Tensor> columns, IndexFactory indices,
                  int64_t passes, int64_t batch_size, bool drop_remainder, QueuePtr out);
// A map stage is several bodies: a dispatcher, one per worker and a collector; with no worker
// queues, one body that maps each row itself.
std::vector<Body> Map(std::string name, MapFn fn, QueuePtr in, std::vector<QueuePtr> work,
                      std::vector<QueuePtr> done, QueuePtr out);
Body Take(int64_t count, QueuePtr in, QueuePtr out);
Body Skip(int64_t count, QueuePtr in, QueuePtr out);
Body Repeat(int64_t count, QueuePtr in, QueuePtr out);
Body Shuffle(int64_t buffer_size, uint64_t seed, QueuePtr in, QueuePtr out);
Body Project(std::vector<int> columns, QueuePtr in, QueuePtr out);
Body Batch(int64_t size, bool drop_remainder, QueuePtr in, QueuePtr out);
Body Zip(std::vector<QueuePtr> in, QueuePtr out);
Body Concat(std::vector<QueuePtr> in, QueuePtr out);

}  // namespace kiln::dataset::stages
