// fused_elementwise.cc - the chunked runner behind fused elementwise calls.
#include "runtime/fused_elementwise.h"

#include <utility>

#include "analysis/chunking.h"
#include "core/error.h"
#include "core/parallel.h"

namespace kiln {

// Elements per chunk: big enough that a kernel call's fixed cost is small next to its work, small
// enough that a chunk's intermediates stay in the core's cache.
constexpr int64_t kChunkElements = 32768;

enum class ParamKind { Full, Scalar, Row };

struct ChunkedFunc {
  Shape shape;      // the result's shape
  DType dtype;      // the result's dtype
  int64_t row = 0;  // when some parameter is a row: its length (the last dim); chunks are rows
  std::vector<ParamKind> params;
  struct Step {
    const OpDef* def;
    const ir::Node* node;
    int slot;                 // where its output goes: num_params + its node index
    int buffer;               // the per-thread scratch buffer it writes (buffers are reused)
    std::vector<int> inputs;  // slots; a negative one is constant -1 - slot
  };
  std::vector<Step> steps;
  std::vector<Tensor> constants;  // one-element constants, as 0-d tensors
  int num_params = 0;
  int num_slots = 0;
  int num_buffers = 0;
  DType widest = DType::Bool;  // the widest dtype a scratch buffer holds
};

namespace {

// A parameter's role in a chunked run over `out` (its shape fits: analysis/chunking.h).
ParamKind Classify(const Shape& p, const Shape& out) {
  if (p == out) return ParamKind::Full;
  if (NumElements(p) == 1) return ParamKind::Scalar;
  return ParamKind::Row;
}

Tensor ZeroDim(const Tensor& t) { return t.AsStrided({}, {}, t.offset()); }

// Gives each step but the last (which writes the result) a scratch buffer, reusing the buffer
// of a value once its last reader has run: a chain needs two buffers, not one per op.
void AssignBuffers(ChunkedFunc& plan) {
  std::vector<int> last_read(plan.num_slots, -1);
  for (size_t s = 0; s < plan.steps.size(); ++s)
    for (int slot : plan.steps[s].inputs)
      if (slot >= 0) last_read[slot] = static_cast<int>(s);
  std::vector<int> free_buffers, buffer_of(plan.num_slots, -1);
  for (size_t s = 0; s + 1 < plan.steps.size(); ++s) {
    auto& step = plan.steps[s];
    if (free_buffers.empty()) {
      step.buffer = plan.num_buffers++;
    } else {
      step.buffer = free_buffers.back();
      free_buffers.pop_back();
    }
    buffer_of[step.slot] = step.buffer;
    // Inputs read for the last time here are free for the next step (not this one: a kernel
    // may read and write one buffer only elementwise, which holds, but keep it simple).
    for (int slot : step.inputs)
      if (slot >= 0 && buffer_of[slot] >= 0 && last_read[slot] == static_cast<int>(s))
        free_buffers.push_back(std::exchange(buffer_of[slot], -1));
  }
}

}  // namespace

std::shared_ptr<const ChunkedFunc> PlanChunked(const ir::Func& f) {
  if (!analysis::IsChunkableBody(f)) return nullptr;
  const TensorMeta& out = f.meta(f.results[0]);
  auto plan = std::make_shared<ChunkedFunc>();
  plan->shape = out.shape;
  plan->dtype = out.dtype;
  plan->num_params = static_cast<int>(f.params.size());
  plan->num_slots = plan->num_params + static_cast<int>(f.nodes.size());
  for (const auto& p : f.params) {
    const ParamKind kind = Classify(p.shape, out.shape);
    plan->params.push_back(kind);
    if (kind == ParamKind::Row) plan->row = out.shape.back();
  }
  // Slots: parameters, then one per node (a constant's slot holds its 0-d value).
  const int base = plan->num_params;
  std::vector<int> const_index(f.nodes.size(), -1);
  for (size_t n = 0; n < f.nodes.size(); ++n) {
    const ir::Node& node = f.nodes[n];
    if (node.kind == ir::NodeKind::Const) {
      const_index[n] = static_cast<int>(plan->constants.size());
      plan->constants.push_back(ZeroDim(node.value));
      continue;
    }
    const OpDef& def = GetOpDef(node.op);
    if (ItemSize(node.outputs[0].dtype) > ItemSize(plan->widest))
      plan->widest = node.outputs[0].dtype;
    ChunkedFunc::Step step{&def, &node, base + static_cast<int>(n), -1, {}};
    for (const auto& v : node.inputs) {
      if (v.is_param()) {
        step.inputs.push_back(v.index);
      } else if (const_index[v.node] >= 0) {
        step.inputs.push_back(-1 - const_index[v.node]);  // negative: a constant
      } else {
        step.inputs.push_back(base + v.node);
      }
    }
    plan->steps.push_back(std::move(step));
  }
  AssignBuffers(*plan);
  return plan;
}

namespace {

// One thread's work: chunks [begin, end) of the result, intermediates in `scratch`.
class ChunkRunner {
 public:
  ChunkRunner(const ChunkedFunc& plan, const std::vector<Tensor>& args, const Tensor& out)
      : plan_(plan), args_(args), out_(out) {}

  void Run(int64_t chunk, int64_t chunk_items, int64_t total_items) {
    const int64_t start = chunk * chunk_items;
    const int64_t items = std::min(chunk_items, total_items - start);
    const int64_t row = plan_.row;
    const Shape shape = row ? Shape{items, row} : Shape{items};
    const Shape strides = row ? Shape{row, 1} : Shape{1};
    const int64_t offset = row ? start * row : start;
    values_.resize(plan_.num_slots);
    for (int p = 0; p < plan_.num_params; ++p) values_[p] = View(p, shape, strides, offset);
    for (size_t s = 0; s < plan_.steps.size(); ++s) {
      const auto& step = plan_.steps[s];
      std::vector<Tensor> inputs;
      inputs.reserve(step.inputs.size());
      for (int slot : step.inputs)
        inputs.push_back(slot < 0 ? plan_.constants[-1 - slot] : values_[slot]);
      const bool last = s + 1 == plan_.steps.size();
      std::vector<Tensor> outputs{
          last ? out_.AsStrided(shape, strides, offset)
               : Scratch(step.buffer, step.node->outputs[0].dtype, shape, strides)};
      KernelContext ctx{*step.def, inputs, outputs, step.node->attrs};
      step.def->kernel(ctx);
      values_[step.slot] = std::move(outputs[0]);
    }
  }

 private:
  Tensor View(int p, const Shape& shape, const Shape& strides, int64_t offset) const {
    const Tensor& a = args_[p];
    switch (plan_.params[p]) {
      case ParamKind::Full:
        return a.AsStrided(shape, strides, a.offset() + offset);
      case ParamKind::Scalar:
        return ZeroDim(a);
      case ParamKind::Row:
        return a.AsStrided({plan_.row}, {a.strides().back()}, a.offset());
    }
    return a;
  }

  // A view of this thread's scratch buffer b, which holds any dtype for a whole chunk.
  Tensor Scratch(int b, DType dtype, const Shape& shape, const Shape& strides) {
    if (scratch_.empty()) {
      scratch_.resize(plan_.num_buffers);
      const int64_t items =
          plan_.row ? std::max<int64_t>(plan_.row, kChunkElements) : kChunkElements;
      for (auto& buffer : scratch_) buffer = Tensor::Empty({items}, plan_.widest);
    }
    return Tensor::FromStorage(scratch_[b].storage(), shape, strides, 0, dtype);
  }

  const ChunkedFunc& plan_;
  const std::vector<Tensor>& args_;
  const Tensor& out_;
  std::vector<Tensor> values_;
  std::vector<Tensor> scratch_;
};

}  // namespace

Tensor RunChunked(const ChunkedFunc& plan, const std::vector<Tensor>& in) {
  std::vector<Tensor> args;
  args.reserve(in.size());
  for (size_t p = 0; p < in.size(); ++p)
    args.push_back(plan.params[p] == ParamKind::Full ? in[p].Contiguous() : in[p]);
  Tensor out = Tensor::Empty(plan.shape, plan.dtype);
  const int64_t total = plan.row ? out.numel() / plan.row : out.numel();
  const int64_t per_chunk =
      plan.row ? std::max<int64_t>(1, kChunkElements / plan.row) : kChunkElements;
  const int64_t chunks = (total + per_chunk - 1) / per_chunk;
  if (chunks == 0) return out;
  ParallelFor(chunks, 1, [&](int64_t begin, int64_t end) {
    ChunkRunner runner(plan, args, out);
    for (int64_t c = begin; c < end; ++c) runner.Run(c, per_chunk, total);
  });
  return out;
}

}  // namespace kiln
