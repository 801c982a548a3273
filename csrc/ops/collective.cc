// collective.cc - collective communication ops: AllReduce, AllGather, ReduceScatter, Broadcast
// and Barrier, with their gradient rules, and AllReduce split into start and wait (overlap).
//
// The kernels call core/comm.h, which runs them through the loaded communication library
// (libkiln_comm.so over MPI) or, on a single rank, as the identity. The registry marks them
// `communicates`: every rank must run the same collectives in the same order, so the passes
// never remove, merge, fold or reorder them (analysis/effects.h).
#include "core/comm.h"
#include "core/error.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln {
namespace {

const char* const kWorld = "hccl_world_group";

const std::string& GroupAttr(const Attrs& attrs, size_t i) { return AttrString(attrs, i); }

void RequireAxis0(const OpDef& def, const TensorMeta& x) {
  KILN_CHECK(!x.shape.empty(), Value, def.name,
             ": the input must have at least one dimension (collectives split and join axis 0), "
             "got a 0-d tensor");
}

// ---- Inference ----
// all_reduce and broadcast: the input's type.
std::vector<TensorMeta> InferSame(const OpDef& def, const std::vector<TensorMeta>& in,
                                  const Attrs& attrs) {
  if (def.kind == OpKind::AllReduce) comm::ReduceFromName(AttrString(attrs, 0), def.name);
  TensorMeta out = in[0];
  out.weak = false;
  return {out};
}

// all_gather: axis 0 times the group size.
std::vector<TensorMeta> InferAllGather(const OpDef& def, const std::vector<TensorMeta>& in,
                                       const Attrs& attrs) {
  RequireAxis0(def, in[0]);
  TensorMeta out = in[0];
  out.weak = false;
  if (out.shape[0] >= 0) out.shape[0] *= comm::Size(GroupAttr(attrs, 0));
  return {out};
}

// reduce_scatter: axis 0 divided by the group size, which must divide it.
std::vector<TensorMeta> InferReduceScatter(const OpDef& def, const std::vector<TensorMeta>& in,
                                           const Attrs& attrs) {
  comm::ReduceFromName(AttrString(attrs, 0), def.name);
  RequireAxis0(def, in[0]);
  TensorMeta out = in[0];
  out.weak = false;
  const int size = comm::Size(GroupAttr(attrs, 1));
  if (out.shape[0] >= 0) {
    KILN_CHECK(out.shape[0] % size == 0, Value, def.name, ": the input's first dimension (",
               out.shape[0], " of shape ", ShapeStr(out.shape), ") must divide by the group size ",
               size);
    out.shape[0] /= size;
  }
  return {out};
}

// all_reduce_start: a 0-d int64 handle for all_reduce_wait.
std::vector<TensorMeta> InferStart(const OpDef& def, const std::vector<TensorMeta>&,
                                   const Attrs& attrs) {
  comm::ReduceFromName(AttrString(attrs, 0), def.name);
  return {TensorMeta{DType::Int64, {}}};
}

// all_reduce_wait(x, handle): the reduction of x that `handle` started. x is an input so the
// result's type is x's and so the executor keeps x (the buffer being sent) alive until the wait.
std::vector<TensorMeta> InferWait(const OpDef& def, const std::vector<TensorMeta>& in,
                                  const Attrs&) {
  KILN_CHECK(in[1].dtype == DType::Int64 && in[1].shape.empty(), Type, def.name,
             ": the handle must be the int64 scalar all_reduce_start returned");
  TensorMeta out = in[0];
  out.weak = false;
  return {out};
}

std::vector<TensorMeta> InferBarrier(const OpDef&, const std::vector<TensorMeta>&, const Attrs&) {
  return {TensorMeta{DType::Bool, {}}};
}

// ---- Kernels ----
void AllReduceKernel(KernelContext& ctx) {
  const auto op = comm::ReduceFromName(AttrString(ctx.attrs, 0), ctx.def.name);
  ctx.outputs = {comm::AllReduce(GroupAttr(ctx.attrs, 1), ctx.inputs[0], op, "AllReduce")};
}

void AllGatherKernel(KernelContext& ctx) {
  ctx.outputs = {comm::AllGather(GroupAttr(ctx.attrs, 0), ctx.inputs[0], "AllGather")};
}

void ReduceScatterKernel(KernelContext& ctx) {
  const auto op = comm::ReduceFromName(AttrString(ctx.attrs, 0), ctx.def.name);
  ctx.outputs = {comm::ReduceScatter(GroupAttr(ctx.attrs, 1), ctx.inputs[0], op, "ReduceScatter")};
}

void BroadcastKernel(KernelContext& ctx) {
  const std::string& group = GroupAttr(ctx.attrs, 1);
  const int64_t root = AttrInt(ctx.attrs, 0), size = comm::Size(group);
  KILN_CHECK(root >= 0 && root < size, Value, "Broadcast: root_rank ", root,
             " is outside the group of ", size, " ranks");
  ctx.outputs = {comm::Broadcast(group, ctx.inputs[0], static_cast<int>(root), "Broadcast")};
}

void AllReduceStartKernel(KernelContext& ctx) {
  const auto op = comm::ReduceFromName(AttrString(ctx.attrs, 0), ctx.def.name);
  Tensor handle = Tensor::Empty({}, DType::Int64);
  *handle.data<int64_t>() =
      comm::AllReduceStart(GroupAttr(ctx.attrs, 1), ctx.inputs[0], op, "AllReduce");
  ctx.outputs = {handle};
}

void AllReduceWaitKernel(KernelContext& ctx) {
  Tensor out = comm::AllReduceWait(*ctx.inputs[1].data<int64_t>(), "AllReduce");
  KILN_CHECK(out.shape() == ctx.inputs[0].shape(), Value,
             "AllReduce: the handle waited for belongs to a tensor of shape ",
             ShapeStr(out.shape()), ", not the ", ShapeStr(ctx.inputs[0].shape()), " given");
  ctx.outputs = {out};
}

void BarrierKernel(KernelContext& ctx) {
  comm::Barrier(GroupAttr(ctx.attrs, 0), "Barrier");
  Tensor token = Tensor::Empty({}, DType::Bool);
  *token.data<bool>() = true;
  ctx.outputs = {token};
}

// ---- Gradient rules ----
GradVar AllReduceSum(GradBuilder& g, GradVar v, const std::string& group) {
  return g.Emit1(OpKind::AllReduce, {v}, {std::string("sum"), group});
}

// out = reduce over ranks of x. SUM: every rank's x feeds every rank's out, so dx = the sum of
// the ranks' gradients. MAX/MIN: the gradient goes to the ranks holding the extreme value.
// PROD: d out / d x = out / x.
std::vector<GradVar> AllReduceGrad(GradBuilder& g) {
  const std::string& op = AttrString(g.attrs(), 0);
  const std::string& group = GroupAttr(g.attrs(), 1);
  const GradVar dout = g.out_grad(0);
  if (op == "sum") return {ToInput(g, AllReduceSum(g, dout, group), 0)};
  if (op == "prod")
    return {ToInput(g, Div(g, AllReduceSum(g, Mul(g, dout, g.output(0)), group), g.input(0)), 0)};
  const GradVar hit = g.Emit1(OpKind::Equal, {g.input(0), g.output(0)});
  const GradVar mask = CastTo(g, hit, g.meta(dout).dtype);
  return {ToInput(g, Mul(g, AllReduceSum(g, dout, group), mask), 0)};
}

// out = the ranks' x stacked on axis 0: rank r's dx is block r of the summed gradients.
std::vector<GradVar> AllGatherGrad(GradBuilder& g) {
  const GradVar dx = g.Emit1(OpKind::ReduceScatter, {g.out_grad(0)},
                             {std::string("sum"), GroupAttr(g.attrs(), 0)});
  return {ToInput(g, dx, 0)};
}

// out = block `rank` of the sum: every rank's x feeds every block, so dx = all blocks' grads.
std::vector<GradVar> ReduceScatterGrad(GradBuilder& g) {
  KILN_CHECK(AttrString(g.attrs(), 0) == "sum", NotImplemented,
             "ReduceScatter: only op=ReduceOp.SUM has a gradient, got '", AttrString(g.attrs(), 0),
             "'");
  const GradVar dx = g.Emit1(OpKind::AllGather, {g.out_grad(0)}, {GroupAttr(g.attrs(), 1)});
  return {ToInput(g, dx, 0)};
}

// out = the root's x on every rank: the root's dx is the sum of every rank's gradient, the
// others' is zero.
std::vector<GradVar> BroadcastGrad(GradBuilder& g) {
  const std::string& group = GroupAttr(g.attrs(), 1);
  const bool is_root = comm::Rank(group) == AttrInt(g.attrs(), 0);
  const GradVar total = AllReduceSum(g, g.out_grad(0), group);
  return {ToInput(g, Mul(g, total, g.Scalar(is_root ? 1.0 : 0.0)), 0)};
}

OpDef Collective(OpKind kind, std::vector<const char*> inputs, std::vector<AttrSpec> attrs,
                 InferFn infer, KernelFn kernel, GradRuleFn grad) {
  OpDef def = MakeOpDef(kind, std::move(inputs), std::move(attrs), infer, kernel, grad);
  def.allocates_outputs = true;  // the communication layer makes the result
  def.communicates = true;
  return def;
}

}  // namespace

void RegisterCollectiveOps(OpRegistry& r) {
  r.Add(Collective(OpKind::AllReduce, {"x"},
                   {{"op", std::string("sum")}, {"group", std::string(kWorld)}}, InferSame,
                   AllReduceKernel, AllReduceGrad));
  r.Add(Collective(OpKind::AllGather, {"x"}, {{"group", std::string(kWorld)}}, InferAllGather,
                   AllGatherKernel, AllGatherGrad));
  r.Add(Collective(OpKind::ReduceScatter, {"x"},
                   {{"op", std::string("sum")}, {"group", std::string(kWorld)}}, InferReduceScatter,
                   ReduceScatterKernel, ReduceScatterGrad));
  r.Add(Collective(OpKind::Broadcast, {"x"},
                   {{"root_rank", int64_t{0}}, {"group", std::string(kWorld)}}, InferSame,
                   BroadcastKernel, BroadcastGrad));
  // Their sum is all_reduce's: the split only lets the executor run other nodes in between.
  // Not differentiable: the data-parallel gradient reducer emits them after autodiff.
  r.Add(Collective(OpKind::AllReduceStart, {"x"},
                   {{"op", std::string("sum")}, {"group", std::string(kWorld)}}, InferStart,
                   AllReduceStartKernel, NotDifferentiable));
  r.Add(Collective(OpKind::AllReduceWait, {"x", "handle"}, {}, InferWait, AllReduceWaitKernel,
                   NotDifferentiable));
  r.Add(Collective(OpKind::Barrier, {}, {{"group", std::string(kWorld)}}, InferBarrier,
                   BarrierKernel, NotDifferentiable));
}

}  // namespace kiln
