// grad_buckets.h - data-parallel gradient buckets whose all-reduce starts during the eager
// backward pass, as soon as the tape has finished every gradient of the bucket.
//
// nn.DistributedGradReducer installs one as this thread's GradientListener (runtime/tape.h)
// around the step's gradient computation; Finish() then waits for the buckets and returns the
// summed gradients. A bucket's gradients travel as one flat tensor (one message per bucket).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/tape.h"

namespace kiln {

class GradBuckets : public GradientListener {
 public:
  // buckets: lists of indices into params, each of one dtype; group: the communication group.
  GradBuckets(std::vector<Tensor> params, std::vector<std::vector<int>> buckets, std::string group);

  // A parameter's finished gradient: kept, and its bucket's all-reduce started when complete.
  void Ready(const Tensor& source, const Tensor& grad) override;

  // The gradients summed over the ranks, in parameter order. `grads` are the gradients the
  // step computed: a bucket not started yet starts now from them, and a started bucket whose
  // gradients are not these tensors (the step changed them after the sweep) is waited for and
  // sent again from them, so the result is always the reduction of `grads`. Resets for the
  // next step.
  std::vector<Tensor> Finish(const std::vector<Tensor>& grads);

  // How many buckets started during the sweep of the last Finish()ed step (tests: that
  // overlap happened) and in total.
  int started_early() const { return started_early_; }
  int num_buckets() const { return static_cast<int>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<int> params;
    std::vector<Tensor> grads;  // per member, as they arrive
    int missing = 0;
    int64_t handle = -1;  // the started all-reduce; -1 until started
  };
  void Start(Bucket& b);
  void Collect(int i, std::vector<Tensor>& out);

  std::vector<Tensor> params_;
  std::vector<Bucket> buckets_;
  std::unordered_map<const TensorImpl*, std::pair<int, int>> where_;  // param -> (bucket, slot)
  std::string group_;
  std::vector<int> order_;  // buckets in the order they started
  int started_early_ = 0, early_ = 0;
};

}  // namespace kiln
