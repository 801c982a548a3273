// data.cc - get_next: the next batch of a dataset queue, read inside a compiled training loop
// (MindSpore's GetNext in dataset sink mode).
//
// It has an effect (each run takes a different batch), so passes never remove, merge, fold or
// move it (OpDef::reads_queue, analysis/effects.h): a loop's get_next stays in the loop.
#include <string>

#include "core/error.h"
#include "core/feed_queue.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln {
namespace {

// attrs: queue (id), dtypes (one per column), ranks (one per column), dims (all shapes, flat)
std::vector<TensorMeta> InferGetNext(const OpDef& def, const std::vector<TensorMeta>&,
                                     const Attrs& attrs) {
  const auto &dtypes = AttrInts(attrs, 1), &ranks = AttrInts(attrs, 2), &dims = AttrInts(attrs, 3);
  KILN_CHECK(!dtypes.empty() && dtypes.size() == ranks.size(), Value, def.name,
             ": needs one dtype and one rank per column, got ", dtypes.size(), " and ",
             ranks.size());
  std::vector<TensorMeta> out;
  size_t at = 0;
  for (size_t c = 0; c < dtypes.size(); ++c) {
    KILN_CHECK(dtypes[c] >= 0 && dtypes[c] < kNumDTypes && ranks[c] >= 0 &&
                   at + static_cast<size_t>(ranks[c]) <= dims.size(),
               Value, def.name, ": bad dtype or shape for column ", c);
    Shape shape(dims.begin() + at, dims.begin() + at + ranks[c]);
    at += ranks[c];
    out.push_back(TensorMeta{static_cast<DType>(dtypes[c]), shape});
  }
  KILN_CHECK(at == dims.size(), Value, def.name, ": ", dims.size() - at, " dims left over");
  return out;
}

std::string Describe(const std::vector<Tensor>& batch) {
  std::string s;
  for (const Tensor& t : batch)
    s += (s.empty() ? "" : ", ") + std::string(DTypeName(t.dtype())) + " " + ShapeStr(t.shape());
  return "[" + s + "]";
}

void GetNextKernel(KernelContext& ctx) {
  const std::shared_ptr<FeedQueue> queue = FindFeedQueue(AttrInt(ctx.attrs, 0));
  KILN_CHECK(queue, Runtime, ctx.def.name, ": dataset queue ", AttrInt(ctx.attrs, 0),
             " does not exist (closed, or the loop outlived its training call)");
  const std::vector<TensorMeta> want = InferGetNext(ctx.def, {}, ctx.attrs);
  std::vector<Tensor> batch = queue->Pop(ctx.def.name, [&](const std::vector<Tensor>& b) {
    bool same = b.size() == want.size();
    for (size_t c = 0; same && c < b.size(); ++c)
      same = b[c].dtype() == want[c].dtype && b[c].shape() == want[c].shape;
    if (same) return;
    std::vector<Tensor> expected;
    for (const auto& m : want) expected.push_back(Tensor::Empty(m.shape, m.dtype));
    Throw(ErrorKind::Value, ctx.def.name, ": the next batch is ", Describe(b),
          " but this loop was compiled for ", Describe(expected));
  });
  for (Tensor& t : batch) t = t.Contiguous();
  ctx.outputs = std::move(batch);
}

}  // namespace

void RegisterDataOps(OpRegistry& r) {
  OpDef def;
  def.kind = OpKind::GetNext;
  def.attrs = {{"queue", int64_t{0}},
               {"dtypes", std::vector<int64_t>{}},
               {"ranks", std::vector<int64_t>{}},
               {"dims", std::vector<int64_t>{}}};
  def.infer = InferGetNext;
  def.kernel = GetNextKernel;
  def.grad = NotDifferentiable;  // data, not a function of anything
  def.allocates_outputs = true;
  def.reads_queue = true;
  r.Add(std::move(def));
}

}  // namespace kiln
