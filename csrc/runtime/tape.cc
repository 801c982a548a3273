// tape.cc - recording ops and the backward sweep with an eager GradBuilder.
#include "runtime/tape.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <unordered_set>

#include "core/error.h"
#include "kernels/cpu/copy.h"
#include "ops/grad.h"
#include "runtime/eager.h"

namespace kiln {
namespace {

thread_local std::vector<Tape*> t_tapes;
thread_local GradientListener* t_listener = nullptr;

bool Differentiable(const Tensor& t) { return t.defined() && IsFloating(t.dtype()); }

// What the tape keeps of a value its op's gradient rule does not read: the shape, strides,
// dtype and version, without the storage, so the value itself can be freed.
Tensor Hollow(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = t.shape();
  impl->strides = t.strides();
  impl->offset = t.offset();
  impl->dtype = t.dtype();
  impl->wrapped_number = t.impl()->wrapped_number;
  impl->version = t.impl()->version;
  return Tensor(std::move(impl));
}

bool IsHollow(const Tensor& t) { return t.defined() && t.storage() == nullptr; }

std::atomic<size_t> g_hollow_from_bytes{16384};

// t itself when the rule reads its values, else its hollow stand-in. Small storages are kept
// as they are: freeing them saves little, and a stand-in costs three allocations per value.
Tensor KeptForGrad(const Tensor& t, bool read) {
  if (read || !t.defined() || t.storage()->nbytes() < g_hollow_from_bytes.load()) return t;
  return Hollow(t);
}

// Runs gradient rules eagerly: GradVars index a table of tensors.
class EagerGradBuilder final : public GradBuilder {
 public:
  EagerGradBuilder(const OpDef& def, const std::vector<Tensor>& inputs,
                   const std::vector<Tensor>& outputs, std::vector<Tensor> out_grads,
                   std::vector<bool> wants, const Attrs& attrs)
      : def_(def), attrs_(attrs), wants_(std::move(wants)), out_grads_(std::move(out_grads)) {
    for (const auto& t : inputs) input_ids_.push_back(Add(t));
    for (const auto& t : outputs) output_ids_.push_back(Add(t));
  }

  int num_inputs() const override { return static_cast<int>(input_ids_.size()); }
  int num_outputs() const override { return static_cast<int>(output_ids_.size()); }
  GradVar input(int i) override { return {input_ids_[i]}; }
  GradVar output(int i) override { return {output_ids_[i]}; }
  bool has_out_grad(int i) const override { return out_grads_[i].defined(); }
  bool wants_input_grad(int i) const override { return wants_[i]; }
  const Attrs& attrs() const override { return attrs_; }
  TensorMeta meta(GradVar v) override { return MetaOf(table_.at(v.id)); }

  GradVar out_grad(int i) override {
    if (!out_grads_[i].defined()) {
      const Tensor& out = table_[output_ids_[i]];
      Tensor zeros = Tensor::Empty(out.shape(), out.dtype());
      cpu::Fill(zeros, 0.0);
      out_grads_[i] = zeros;
    }
    return {Add(out_grads_[i])};
  }

  std::vector<GradVar> Emit(OpKind kind, const std::vector<GradVar>& inputs, Attrs attrs) override {
    std::vector<Tensor> args;
    for (GradVar v : inputs) {
      args.push_back(v.defined() ? table_.at(v.id) : Tensor());
      KILN_CHECK(!IsHollow(args.back()), Runtime, "grad: the gradient rule of '", def_.name,
                 "' read a value its registry entry says it does not read (OpDef::grad_reads)");
    }
    std::vector<GradVar> results;
    for (auto& t : CallOp(kind, std::move(args), std::move(attrs))) results.push_back({Add(t)});
    return results;
  }

  GradVar Scalar(double value) override { return {Add(ScalarTensor(value, DType::Float64))}; }

  const Tensor& value(GradVar v) const { return table_.at(v.id); }

 private:
  int Add(const Tensor& t) {
    table_.push_back(t);
    return static_cast<int>(table_.size()) - 1;
  }

  const OpDef& def_;
  const Attrs& attrs_;
  std::vector<bool> wants_;
  std::vector<Tensor> out_grads_;
  std::vector<Tensor> table_;
  std::vector<int> input_ids_, output_ids_;
};

Tensor Ones(const Tensor& like) {
  Tensor ones = Tensor::Empty(like.shape(), like.dtype());
  cpu::Fill(ones, 1.0);
  return ones;
}

bool IsStateInput(const OpDef& def, size_t k) {
  return std::find(def.mutated_inputs.begin(), def.mutated_inputs.end(), static_cast<int>(k)) !=
         def.mutated_inputs.end();
}

// Storage offsets (in elements) of t's elements, in t's row-major order.
std::vector<int64_t> ElementOffsets(const Tensor& t) {
  const Shape &shape = t.shape(), &strides = t.strides();
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  std::vector<int64_t> index(shape.size(), 0);
  int64_t offset = t.offset();
  for (size_t n = 0; n < out.size(); ++n) {
    out[n] = offset;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d]) {
        offset += strides[d];
        break;
      }
      offset -= strides[d] * (shape[d] - 1);
      index[d] = 0;
    }
  }
  return out;
}

// Where each element of `part` sits in `holder` (flat row-major positions, shaped like part),
// or nothing when some element of part is not one of holder's (or holder repeats an element).
std::optional<std::vector<int64_t>> PositionsIn(const Tensor& holder, const Tensor& part) {
  if (holder.is_contiguous()) {  // a flat position is the offset from holder's first element
    std::vector<int64_t> positions = ElementOffsets(part);
    for (int64_t& p : positions) {
      p -= holder.offset();
      if (p < 0 || p >= holder.numel()) return std::nullopt;
    }
    return positions;
  }
  std::unordered_map<int64_t, int64_t> where;
  std::vector<int64_t> offsets = ElementOffsets(holder);
  for (size_t i = 0; i < offsets.size(); ++i)
    if (!where.emplace(offsets[i], static_cast<int64_t>(i)).second) return std::nullopt;
  std::vector<int64_t> positions;
  for (int64_t offset : ElementOffsets(part)) {
    auto it = where.find(offset);
    if (it == where.end()) return std::nullopt;
    positions.push_back(it->second);
  }
  return positions;
}

// holder's coordinates of the flat `positions`, one int64 tensor per axis, shaped `like`.
std::vector<Tensor> Coordinates(const Shape& holder, const std::vector<int64_t>& positions,
                                const Shape& like) {
  std::vector<Tensor> coords;
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(holder.size()) - 1; d >= 0; --d) {
    Tensor c = Tensor::Empty(like, DType::Int64);
    for (size_t i = 0; i < positions.size(); ++i)
      c.data<int64_t>()[i] = positions[i] / stride % holder[d];
    coords.insert(coords.begin(), c);
    stride *= holder[d];
  }
  return coords;
}

bool Overlaps(const Tensor& a, const Tensor& b) {
  std::vector<int64_t> oa = ElementOffsets(a), ob = ElementOffsets(b);
  auto [a_lo, a_hi] = std::minmax_element(oa.begin(), oa.end());
  auto [b_lo, b_hi] = std::minmax_element(ob.begin(), ob.end());
  if (*a_hi < *b_lo || *b_hi < *a_lo) return false;  // disjoint ranges of the storage
  std::unordered_set<int64_t> in_a(oa.begin(), oa.end());
  return std::any_of(ob.begin(), ob.end(), [&](int64_t o) { return in_a.count(o) > 0; });
}

std::vector<int64_t> AllAxes(const Tensor& t) {
  std::vector<int64_t> axes(static_cast<size_t>(t.ndim()));
  for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
  return axes;
}

Tensor Zeros(const Tensor& like) {
  Tensor zeros = Tensor::Empty(like.shape(), like.dtype());
  cpu::Fill(zeros, 0.0);
  return zeros;
}

}  // namespace

int Tape::IdOf(const Tensor& t) const {
  if (!t.defined()) return -1;
  auto it = ids_.find(t.impl());
  // An expired entry was a tensor freed since; t is a new one at its address.
  return it == ids_.end() || it->second.tensor.expired() ? -1 : it->second.id;
}

int Tape::NewId(const Tensor& t) {
  ids_[t.impl()] = Tracked{next_id_, t.impl_ptr()};
  return next_id_++;
}

void Tape::Watch(const Tensor& t) {
  KILN_CHECK(t.defined(), Value, "grad: cannot watch an undefined tensor");
  if (IdOf(t) < 0) NewId(t);
}

bool Tape::IsWatched(const Tensor& t) const { return IdOf(t) >= 0; }

void Tape::Record(const OpDef& def, const std::vector<Tensor>& inputs, const Attrs& attrs,
                  const std::vector<Tensor>& outputs) {
  OpRecord rec{def.kind, attrs, inputs, outputs, {}, {}, {}};
  bool any = false;
  for (const auto& t : inputs) {
    int id = Differentiable(t) ? IdOf(t) : -1;
    KILN_CHECK(id < 0 || stale_.count(t.impl()) == 0, Runtime, "grad: an input of '", def.name,
               "' was changed in place through a tensor that overlaps it only in part (two "
               "views of one tensor); autodiff cannot follow that write. Write through the "
               "whole tensor, or copy the view first");
    rec.input_ids.push_back(id);
    rec.input_versions.push_back(t.defined() ? t.impl()->version : 0);
    any = any || id >= 0;
  }
  if (!any) return;
  for (const auto& t : outputs) rec.output_ids.push_back(Differentiable(t) ? NewId(t) : -1);
  const bool reads_nothing = def.grad == &NotDifferentiable;
  for (size_t k = 0; k < rec.inputs.size(); ++k) {
    bool read = !reads_nothing && GradReadsInput(def, k);
    if (def.grad_reads_factors_crosswise && k < 2 && rec.input_ids.size() > 1)
      read = read && rec.input_ids[1 - k] >= 0;  // a factor is read for the other's gradient
    rec.inputs[k] = KeptForGrad(rec.inputs[k], read);
  }
  for (size_t k = 0; k < rec.outputs.size(); ++k)
    rec.outputs[k] = KeptForGrad(rec.outputs[k], !reads_nothing && GradReadsOutput(def, k));
  records_.push_back(std::move(rec));
}

void Tape::PreserveBeforeWrite(const Tensor& target) {
  // One copy per recorded tensor (views of target each keep their own elements).
  std::unordered_map<const TensorImpl*, Tensor> copies;
  auto preserve = [&](Tensor& t) {
    auto it = copies.find(t.impl());
    if (it == copies.end()) it = copies.emplace(t.impl(), t.Clone()).first;
    t = it->second;
  };
  for (auto& rec : records_) {
    const OpDef& def = GetOpDef(rec.kind);
    for (size_t k = 0; k < rec.inputs.size(); ++k) {
      Tensor& in = rec.inputs[k];
      // State the op updates itself is not read by its rule; a tensor already written since
      // it was recorded stays as it is, for Gradient's check to report.
      if (!in.defined() || !in.same_storage(target) || IsStateInput(def, k) ||
          in.impl()->version != rec.input_versions[k])
        continue;
      preserve(in);
      rec.input_versions[k] = in.impl()->version;
    }
    for (Tensor& out : rec.outputs)
      if (out.defined() && out.same_storage(target)) preserve(out);
  }
}

void Tape::RebaseAfterWrite(const Tensor& written) {
  if (written.numel() == 0) return;
  // Live tracked tensors in the same storage, in the order they were tracked.
  std::vector<std::pair<int, std::shared_ptr<TensorImpl>>> others;
  for (const auto& [address, tracked] : ids_) {
    std::shared_ptr<TensorImpl> impl = tracked.tensor.lock();
    if (impl && impl.get() != written.impl() && impl->storage == written.storage() &&
        IsFloating(impl->dtype))
      others.emplace_back(tracked.id, std::move(impl));
  }
  std::sort(others.begin(), others.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [id, impl] : others) {
    Tensor other(impl);
    if (other.numel() == 0 || !Overlaps(other, written)) continue;
    if (other.ndim() > 0) {
      if (auto at = PositionsIn(other, written)) {  // other holds the written elements
        std::vector<Tensor> inputs = {other, written};
        for (Tensor& c : Coordinates(other.shape(), *at, written.shape())) inputs.push_back(c);
        Record(GetOpDef(OpKind::IndexPut), inputs, {AllAxes(other), false}, {other});
        continue;
      }
    }
    if (written.ndim() > 0) {
      if (auto at = PositionsIn(written, other)) {  // other is a part of what was written
        std::vector<Tensor> inputs = {written};
        for (Tensor& c : Coordinates(written.shape(), *at, other.shape())) inputs.push_back(c);
        Record(GetOpDef(OpKind::AdvancedIndex), inputs, {AllAxes(written)}, {other});
        continue;
      }
    }
    stale_.insert(other.impl());
  }
}

// ready_after[r]: the sources whose gradient is final once records r.. have been swept (none
// of records 0..r-1 uses them); the sweep reaches r after record r, so their last contribution
// is in. ready_after[records] holds the sources no record uses. Empty without a listener.
std::vector<std::vector<size_t>> Tape::ReadyAfter(const std::vector<int>& source_ids) const {
  std::vector<std::vector<size_t>> ready(records_.size() + 1);
  if (t_listener == nullptr) return ready;
  std::unordered_map<int, size_t> first_use;
  for (size_t r = records_.size(); r-- > 0;)
    for (int id : records_[r].input_ids)
      if (id >= 0) first_use[id] = r;
  for (size_t i = 0; i < source_ids.size(); ++i) {
    auto it = source_ids[i] >= 0 ? first_use.find(source_ids[i]) : first_use.end();
    ready[it == first_use.end() ? records_.size() : it->second].push_back(i);
  }
  return ready;
}

void Tape::Notify(const std::vector<size_t>& ready, const std::vector<Tensor>& sources,
                  const std::vector<int>& source_ids,
                  const std::unordered_map<int, Tensor>& grads) const {
  for (size_t i : ready) {
    auto it = source_ids[i] >= 0 ? grads.find(source_ids[i]) : grads.end();
    t_listener->Ready(sources[i], it != grads.end() ? it->second : Zeros(sources[i]));
  }
}

GradientListener* SetGradientListener(GradientListener* listener) {
  GradientListener* previous = t_listener;
  t_listener = listener;
  return previous;
}

std::vector<Tensor> Tape::Gradient(const std::vector<Tensor>& targets,
                                   const std::vector<Tensor>& sens,
                                   const std::vector<Tensor>& sources) {
  std::unordered_map<int, Tensor> grads;
  auto accumulate = [&](int id, Tensor g) {
    auto it = grads.find(id);
    if (it == grads.end()) {
      grads.emplace(id, std::move(g));
    } else {
      it->second = CallOp1(OpKind::Add, {it->second, g});
    }
  };
  std::vector<int> source_ids;
  for (const auto& s : sources) source_ids.push_back(IdOf(s));
  const std::vector<std::vector<size_t>> ready_after = ReadyAfter(source_ids);
  for (size_t i = 0; i < targets.size(); ++i) {
    int id = Differentiable(targets[i]) ? IdOf(targets[i]) : -1;
    if (id < 0) continue;
    Tensor seed = i < sens.size() && sens[i].defined() ? sens[i] : Ones(targets[i]);
    KILN_CHECK(seed.shape() == targets[i].shape(), Value, "grad: sens of shape ",
               ShapeStr(seed.shape()), " does not match the output's shape ",
               ShapeStr(targets[i].shape()));
    accumulate(id, seed.To(targets[i].dtype()));
  }

  // Take this tape off the active stack while it runs rules, so it does not record them.
  auto pos = std::find(t_tapes.begin(), t_tapes.end(), this);
  bool was_active = pos != t_tapes.end();
  if (was_active) t_tapes.erase(pos);
  struct Restore {
    Tape* tape;
    bool active;
    ~Restore() {
      if (active) t_tapes.push_back(tape);
    }
  } restore{this, was_active};

  for (auto rec = records_.rbegin(); rec != records_.rend(); ++rec) {
    std::vector<Tensor> out_grads(rec->outputs.size());
    Notify(ready_after[records_.rend() - rec], sources, source_ids, grads);
    bool any = false;
    for (size_t k = 0; k < rec->outputs.size(); ++k) {
      auto it = rec->output_ids[k] >= 0 ? grads.find(rec->output_ids[k]) : grads.end();
      if (it == grads.end()) continue;
      out_grads[k] = std::move(it->second);
      grads.erase(it);
      any = true;
    }
    if (!any) continue;
    const OpDef& def = GetOpDef(rec->kind);
    KILN_CHECK(def.grad != nullptr, NotImplemented, "grad: op '", def.name,
               "' has no gradient rule yet");
    for (size_t k = 0; k < rec->inputs.size(); ++k) {
      // State an op updates itself (BatchNorm's running statistics, Assign's target) is not read
      // by its gradient rule, so later updates to it are fine.
      bool is_state = IsStateInput(def, k);
      KILN_CHECK(is_state || !rec->inputs[k].defined() ||
                     rec->inputs[k].impl()->version == rec->input_versions[k],
                 Runtime, "grad: an input of '", def.name,
                 "' was modified in place after it was used; its gradient would be wrong");
    }
    std::vector<bool> wants;
    for (int id : rec->input_ids) wants.push_back(id >= 0);
    EagerGradBuilder builder(def, rec->inputs, rec->outputs, std::move(out_grads), wants,
                             rec->attrs);
    std::vector<GradVar> in_grads = def.grad(builder);
    for (size_t k = 0; k < rec->inputs.size() && k < in_grads.size(); ++k) {
      if (rec->input_ids[k] < 0 || !in_grads[k].defined()) continue;
      const Tensor& g = builder.value(in_grads[k]);
      KILN_CHECK(g.shape() == rec->inputs[k].shape(), Runtime, "grad: the rule of '", def.name,
                 "' gave a gradient of shape ", ShapeStr(g.shape()), " for an input of shape ",
                 ShapeStr(rec->inputs[k].shape()));
      accumulate(rec->input_ids[k], g.To(rec->inputs[k].dtype()));
    }
  }

  Notify(ready_after[0], sources, source_ids, grads);
  std::vector<Tensor> result;
  for (size_t i = 0; i < sources.size(); ++i) {
    auto it = source_ids[i] >= 0 ? grads.find(source_ids[i]) : grads.end();
    result.push_back(it != grads.end() ? it->second : Zeros(sources[i]));
  }
  return result;
}

void SetTapeHollowFromBytes(size_t bytes) { g_hollow_from_bytes.store(bytes); }

void PushTape(Tape* tape) { t_tapes.push_back(tape); }

void PopTape(Tape* tape) {
  auto pos = std::find(t_tapes.begin(), t_tapes.end(), tape);
  if (pos != t_tapes.end()) t_tapes.erase(pos);
}

bool AnyTapeActive() { return !t_tapes.empty(); }

void RecordOnTapes(const OpDef& def, const std::vector<Tensor>& inputs, const Attrs& attrs,
                   const std::vector<Tensor>& outputs) {
  for (Tape* tape : t_tapes) tape->Record(def, inputs, attrs, outputs);
}

void RebaseWrittenInputs(const OpDef& def, const std::vector<Tensor>& inputs) {
  for (int k : def.mutated_inputs) {
    if (k >= static_cast<int>(inputs.size()) || !inputs[k].defined()) continue;
    for (Tape* tape : t_tapes) tape->RebaseAfterWrite(inputs[k]);
  }
}

void PreserveWrittenInputs(const OpDef& def, const std::vector<Tensor>& inputs) {
  for (int k : def.mutated_inputs) {
    if (k >= static_cast<int>(inputs.size()) || !inputs[k].defined()) continue;
    for (Tape* tape : t_tapes) tape->PreserveBeforeWrite(inputs[k]);
  }
}

}  // namespace kiln
