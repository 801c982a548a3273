// tape.h - reverse-mode autodiff for eager (PyNative) execution.
//
// A Tape watches tensors; while it is active, every op with a watched input is recorded in
// execution order with the tensors it used, and its differentiable outputs become watched.
// Gradient() sweeps the records backwards, calling each op's registry gradient rule with an
// eager GradBuilder, and sums the contributions per value. Tapes nest: ops run while one tape
// computes gradients are recorded by the tapes outside it, which gives higher-order gradients.
#pragma once

#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ops/registry.h"

namespace kiln {

class Tape {
 public:
  // Tracks t: gradients can be asked for it, and ops using it are recorded.
  void Watch(const Tensor& t);
  bool IsWatched(const Tensor& t) const;

  // d(sum_i <targets[i], sens[i]>)/d(source) for each source; zeros for unreached sources.
  // An undefined sens means ones. Throws if a saved tensor was modified in place.
  std::vector<Tensor> Gradient(const std::vector<Tensor>& targets, const std::vector<Tensor>& sens,
                               const std::vector<Tensor>& sources);

  // Called by eager dispatch after each op runs.
  void Record(const OpDef& def, const std::vector<Tensor>& inputs, const Attrs& attrs,
              const std::vector<Tensor>& outputs);

  // Called by eager dispatch before an op writes `target` in place: recorded tensors that
  // share its storage (and whose values a gradient rule may read) are replaced by copies of
  // their current values, so the write cannot change what the backward sweep sees.
  void PreserveBeforeWrite(const Tensor& target);

  // Called by eager dispatch after an op wrote `written` in place: every other tensor the tape
  // tracks in the same storage changed too (the base of a written view, or a view of a written
  // base). One that holds all of written's elements gets a record of written's values put into
  // it (index_put), one inside written a record of being read from it (advanced_index), so
  // gradients follow the write; one that overlaps it partly can no longer be differentiated.
  void RebaseAfterWrite(const Tensor& written);

  size_t num_records() const { return records_.size(); }

 private:
  struct OpRecord {
    OpKind kind;
    Attrs attrs;
    std::vector<Tensor> inputs;
    std::vector<Tensor> outputs;
    std::vector<int> input_ids;   // value ids on this tape; -1 for untracked inputs
    std::vector<int> output_ids;  // -1 for outputs that carry no gradient
    std::vector<uint64_t> input_versions;
  };
  int IdOf(const Tensor& t) const;
  int NewId(const Tensor& t);
  std::vector<std::vector<size_t>> ReadyAfter(const std::vector<int>& source_ids) const;
  void Notify(const std::vector<size_t>& ready, const std::vector<Tensor>& sources,
              const std::vector<int>& source_ids,
              const std::unordered_map<int, Tensor>& grads) const;

  // A tracked tensor's id, and the tensor itself weakly: the tape does not keep a value alive
  // that no record needs, and an expired entry tells a reused address from the tensor it had.
  struct Tracked {
    int id;
    std::weak_ptr<TensorImpl> tensor;
  };
  std::unordered_map<const TensorImpl*, Tracked> ids_;
  std::vector<OpRecord> records_;
  std::unordered_set<const TensorImpl*> stale_;  // changed by a write autodiff cannot follow
  int next_id_ = 0;
};

// Told each source's gradient as soon as Tape::Gradient has finished it (the sweep passed the
// source's earliest use), while the sweep goes on: data-parallel training starts a gradient
// bucket's all-reduce then (runtime/grad_buckets.h), overlapping it with the rest of backward.
class GradientListener {
 public:
  virtual ~GradientListener() = default;
  virtual void Ready(const Tensor& source, const Tensor& grad) = 0;
};
// This thread's listener (null: none); returns the previous one.
GradientListener* SetGradientListener(GradientListener* listener);

// Values a rule does not read are dropped from records only when their storage has at least
// this many bytes (16 KiB by default). The test suite sets 0, so that every test checks the
// ops' grad_reads declarations.
void SetTapeHollowFromBytes(size_t bytes);

// The stack of active tapes on this thread (innermost last).
void PushTape(Tape* tape);
void PopTape(Tape* tape);
bool AnyTapeActive();
// Records an op on every active tape that watches one of its inputs.
void RecordOnTapes(const OpDef& def, const std::vector<Tensor>& inputs, const Attrs& attrs,
                   const std::vector<Tensor>& outputs);
// Before `def` runs: Tape::PreserveBeforeWrite on every active tape for each input it writes.
void PreserveWrittenInputs(const OpDef& def, const std::vector<Tensor>& inputs);
// After `def` ran: Tape::RebaseAfterWrite on every active tape for each input it wrote.
void RebaseWrittenInputs(const OpDef& def, const std::vector<Tensor>& inputs);

}  // namespace kiln
