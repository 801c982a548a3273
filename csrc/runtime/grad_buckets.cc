// grad_buckets.cc - gradient buckets all-reduced while the eager backward pass runs.
#include "runtime/grad_buckets.h"

#include <cstring>

#include "core/comm.h"
#include "core/error.h"

namespace kiln {

GradBuckets::GradBuckets(std::vector<Tensor> params, std::vector<std::vector<int>> buckets,
                         std::string group)
    : params_(std::move(params)), group_(std::move(group)) {
  for (auto& members : buckets) {
    Bucket b;
    b.params = std::move(members);
    b.grads.resize(b.params.size());
    b.missing = static_cast<int>(b.params.size());
    for (size_t k = 0; k < b.params.size(); ++k) {
      const int p = b.params[k];
      KILN_CHECK(p >= 0 && p < static_cast<int>(params_.size()), Value,
                 "DistributedGradReducer: bucket index ", p, " is outside the ", params_.size(),
                 " parameters");
      where_[params_[p].impl()] = {static_cast<int>(buckets_.size()), static_cast<int>(k)};
    }
    buckets_.push_back(std::move(b));
  }
}

void GradBuckets::Ready(const Tensor& source, const Tensor& grad) {
  auto it = where_.find(source.impl());
  if (it == where_.end()) return;  // not one of ours (another gradient of the same step)
  Bucket& b = buckets_[it->second.first];
  Tensor& slot = b.grads[it->second.second];
  if (b.handle >= 0 || slot.defined()) return;  // a second sweep of the step: Finish decides
  slot = grad;
  if (--b.missing == 0) {
    Start(b);  // which also moves the buckets started before on
    ++early_;
  } else if (!order_.empty()) {
    comm::Progress();
  }
}

// One flat tensor of the bucket's gradients (its dtype: the parameters'), all-reduce started.
void GradBuckets::Start(Bucket& b) {
  const DType dtype = params_[b.params[0]].dtype();
  int64_t total = 0;
  for (int p : b.params) total += params_[p].numel();
  Tensor flat = Tensor::Empty({total}, dtype);
  auto* dst = static_cast<char*>(flat.raw_data());
  for (size_t k = 0; k < b.params.size(); ++k) {
    const Tensor& param = params_[b.params[k]];
    const Tensor g = b.grads[k].To(dtype).Contiguous();
    KILN_CHECK(g.shape() == param.shape(), Value, "DistributedGradReducer: a gradient of shape ",
               ShapeStr(g.shape()), " for a parameter of shape ", ShapeStr(param.shape()));
    const size_t nbytes = static_cast<size_t>(g.numel()) * ItemSize(dtype);
    std::memcpy(dst, g.raw_data(), nbytes);
    dst += nbytes;
  }
  b.handle = comm::AllReduceStart(group_, flat, kKilnCommSum, "DistributedGradReducer");
  order_.push_back(static_cast<int>(&b - buckets_.data()));
}

// Waits for bucket i and puts its members' summed gradients into out.
void GradBuckets::Collect(int i, std::vector<Tensor>& out) {
  Bucket& b = buckets_[i];
  const Tensor flat = comm::AllReduceWait(b.handle, "DistributedGradReducer");
  b.handle = -1;
  const auto* src = static_cast<const char*>(flat.raw_data());
  for (int p : b.params) {
    Tensor g = Tensor::Empty(params_[p].shape(), flat.dtype());
    const size_t nbytes = static_cast<size_t>(g.numel()) * ItemSize(flat.dtype());
    std::memcpy(g.raw_data(), src, nbytes);
    src += nbytes;
    out[p] = std::move(g);
  }
}

std::vector<Tensor> GradBuckets::Finish(const std::vector<Tensor>& grads) {
  KILN_CHECK(grads.size() == params_.size(), Value, "DistributedGradReducer: ", grads.size(),
             " gradients for ", params_.size(), " parameters");
  started_early_ = early_;
  early_ = 0;
  // Buckets the sweep did not finish start now, in bucket order (the same on every rank).
  for (Bucket& b : buckets_) {
    if (b.handle >= 0) continue;
    for (size_t k = 0; k < b.params.size(); ++k) b.grads[k] = grads[b.params[k]];
    Start(b);
  }
  std::vector<Tensor> out(params_.size());
  std::vector<int> stale;  // started from tensors the step replaced afterwards
  const std::vector<int> order = std::move(order_);
  order_.clear();
  for (int i : order) {
    Bucket& b = buckets_[i];
    bool same = true;
    for (size_t k = 0; k < b.params.size(); ++k)
      same = same && b.grads[k].impl() == grads[b.params[k]].impl();
    Collect(i, out);
    if (!same) stale.push_back(i);
  }
  // Sent again from the step's final gradients, in the same order on every rank.
  for (int i : stale) {
    for (size_t k = 0; k < buckets_[i].params.size(); ++k)
      buckets_[i].grads[k] = grads[buckets_[i].params[k]];
    Start(buckets_[i]);
  }
  order_.clear();
  for (int i : stale) Collect(i, out);
  for (Bucket& b : buckets_) {
    b.missing = static_cast<int>(b.params.size());
    for (auto& g : b.grads) g = Tensor();
  }
  return out;
}

}  // namespace kiln
