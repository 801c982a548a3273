// shape.cc - views (transpose, broadcast, squeeze, slices, split, reshape), concat and assign.
//
// View ops make their own outputs (allocates_outputs) as new TensorImpls over input 0's
// storage; inference computes the same shapes so Graph mode can plan without running them.
#include <algorithm>
#include <limits>

#include "core/error.h"
#include "kernels/cpu/copy.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln {
namespace {

OpDef ViewOp(OpKind kind, std::vector<const char*> inputs, std::vector<AttrSpec> attrs,
             InferFn infer, KernelFn kernel, GradRuleFn grad) {
  OpDef def = MakeOpDef(kind, std::move(inputs), std::move(attrs), infer, kernel);
  def.grad = grad;
  def.allocates_outputs = true;
  def.is_view = true;
  return def;
}

int64_t Rank(const TensorMeta& m) { return static_cast<int64_t>(m.shape.size()); }

// Checks an axis against a rank without NormalizeAxis's 0-d leniency (axis 0 of a 0-d tensor).
int64_t StrictAxis(int64_t axis, int64_t ndim, const char* op) {
  KILN_CHECK(axis >= -ndim && axis < ndim, Axis, op, ": axis ", axis,
             " is out of range for a tensor of rank ", ndim);
  return axis < 0 ? axis + ndim : axis;
}

// ---- transpose

std::vector<TensorMeta> InferTranspose(const OpDef& def, const std::vector<TensorMeta>& in,
                                       const Attrs& attrs) {
  const auto& perm = AttrInts(attrs, 0);
  int64_t n = Rank(in[0]);
  KILN_CHECK(static_cast<int64_t>(perm.size()) == n, Value, def.name, ": permutation ",
             ShapeStr(perm), " does not match a tensor of rank ", n);
  std::vector<bool> seen(n, false);
  Shape shape(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t axis = StrictAxis(perm[i], n, def.name);
    KILN_CHECK(!seen[axis], Value, def.name, ": axis ", axis, " repeats in the permutation ",
               ShapeStr(perm));
    seen[axis] = true;
    shape[i] = in[0].shape[axis];
  }
  return {TensorMeta{in[0].dtype, shape}};
}

void TransposeKernel(KernelContext& ctx) {
  ctx.outputs = {ctx.inputs[0].Permute(AttrInts(ctx.attrs, 0))};
}

// ---- broadcast_to: -1 keeps the input's dimension

Shape BroadcastTarget(const Shape& input, const Shape& target, const char* op) {
  int64_t extra = static_cast<int64_t>(target.size()) - static_cast<int64_t>(input.size());
  KILN_CHECK(extra >= 0, Value, op, ": cannot broadcast shape ", ShapeStr(input), " to ",
             ShapeStr(target), " (fewer dimensions)");
  Shape out = target;
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t have = static_cast<int64_t>(i) >= extra ? input[i - extra] : 1;
    if (out[i] == -1) {
      KILN_CHECK(static_cast<int64_t>(i) >= extra, Value, op, ": -1 in ", ShapeStr(target),
                 " is only allowed for dimensions the input has");
      out[i] = have;
      continue;
    }
    KILN_CHECK(out[i] >= 0, Value, op, ": invalid dimension ", out[i], " in ", ShapeStr(target));
    KILN_CHECK(have == out[i] || have == 1 || have == -1, Value, op, ": cannot broadcast shape ",
               ShapeStr(input), " to ", ShapeStr(target));
  }
  return out;
}

std::vector<TensorMeta> InferBroadcastTo(const OpDef& def, const std::vector<TensorMeta>& in,
                                         const Attrs& attrs) {
  return {TensorMeta{in[0].dtype, BroadcastTarget(in[0].shape, AttrInts(attrs, 0), def.name)}};
}

void BroadcastToKernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  ctx.outputs = {x.Expand(BroadcastTarget(x.shape(), AttrInts(ctx.attrs, 0), ctx.def.name))};
}

// ---- squeeze / expand_dims

std::vector<int64_t> SqueezeAxes(const Shape& shape, const Attrs& attrs, const char* op) {
  int64_t n = static_cast<int64_t>(shape.size());
  std::vector<int64_t> axes;
  if (AttrIsNone(attrs, 0) || AttrInts(attrs, 0).empty()) {
    for (int64_t i = 0; i < n; ++i)
      if (shape[i] == 1) axes.push_back(i);
    return axes;
  }
  for (int64_t axis : AttrInts(attrs, 0)) {
    axis = StrictAxis(axis, n, op);
    KILN_CHECK(shape[axis] == 1 || shape[axis] == -1, Value, op, ": axis ", axis, " of shape ",
               ShapeStr(shape), " has size ", shape[axis], ", not 1");
    axes.push_back(axis);
  }
  return axes;
}

std::vector<TensorMeta> InferSqueeze(const OpDef& def, const std::vector<TensorMeta>& in,
                                     const Attrs& attrs) {
  std::vector<int64_t> axes = SqueezeAxes(in[0].shape, attrs, def.name);
  Shape shape;
  for (int64_t i = 0; i < Rank(in[0]); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) shape.push_back(in[0].shape[i]);
  return {TensorMeta{in[0].dtype, shape}};
}

void SqueezeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  std::vector<int64_t> axes = SqueezeAxes(x.shape(), ctx.attrs, ctx.def.name);
  // Tensor::Squeeze reads an empty list as "every size-1 axis"; nothing to drop is a plain view.
  ctx.outputs = {axes.empty() ? x.AsStrided(x.shape(), x.strides(), x.offset()) : x.Squeeze(axes)};
}

std::vector<TensorMeta> InferExpandDims(const OpDef& def, const std::vector<TensorMeta>& in,
                                        const Attrs& attrs) {
  int64_t axis = StrictAxis(AttrInt(attrs, 0), Rank(in[0]) + 1, def.name);
  Shape shape = in[0].shape;
  shape.insert(shape.begin() + axis, 1);
  return {TensorMeta{in[0].dtype, shape}};
}

void ExpandDimsKernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  ctx.outputs = {x.Unsqueeze(StrictAxis(AttrInt(ctx.attrs, 0), x.ndim() + 1, ctx.def.name))};
}

// ---- strided_slice over the leading dimensions, Python's clamping, positive steps

struct SliceSpec {
  int64_t start, length, step;
};

SliceSpec ClampSlice(int64_t begin, int64_t end, int64_t step, int64_t size) {
  auto clamp = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  int64_t start = clamp(begin), stop = clamp(end);
  return {start, stop > start ? (stop - start + step - 1) / step : 0, step};
}

std::vector<SliceSpec> SliceSpecs(const Shape& shape, const Attrs& attrs, const char* op) {
  const auto &begin = AttrInts(attrs, 0), &end = AttrInts(attrs, 1), &strides = AttrInts(attrs, 2);
  KILN_CHECK(begin.size() == end.size() && begin.size() == strides.size(), Value, op, ": begin ",
             ShapeStr(begin), ", end ", ShapeStr(end), " and strides ", ShapeStr(strides),
             " must have the same length");
  KILN_CHECK(begin.size() <= shape.size(), Index, op, ": ", begin.size(),
             " slices for a tensor of rank ", shape.size());
  std::vector<SliceSpec> specs;
  for (size_t i = 0; i < begin.size(); ++i) {
    KILN_CHECK(strides[i] > 0, Value, op, ": strides must be positive, got ", ShapeStr(strides));
    specs.push_back(ClampSlice(begin[i], end[i], strides[i], shape[i]));
  }
  return specs;
}

std::vector<TensorMeta> InferStridedSlice(const OpDef& def, const std::vector<TensorMeta>& in,
                                          const Attrs& attrs) {
  std::vector<SliceSpec> specs = SliceSpecs(in[0].shape, attrs, def.name);
  Shape shape = in[0].shape;
  for (size_t i = 0; i < specs.size(); ++i)
    if (shape[i] != -1) shape[i] = specs[i].length;
  return {TensorMeta{in[0].dtype, shape}};
}

void StridedSliceKernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  std::vector<SliceSpec> specs = SliceSpecs(x.shape(), ctx.attrs, ctx.def.name);
  Shape shape = x.shape(), strides = x.strides();
  int64_t offset = x.offset();
  bool empty = false;
  for (size_t i = 0; i < specs.size(); ++i) {
    shape[i] = specs[i].length;
    empty |= specs[i].length == 0;
    offset += specs[i].start * strides[i];
    strides[i] *= specs[i].step;
  }
  // An empty result may start one past the end of the storage; keep it at the input's offset.
  ctx.outputs = {x.AsStrided(shape, strides, empty ? x.offset() : offset)};
}

// ---- strided_slice_grad(dy, like?; shape, begin, end, strides): zeros of `shape` with dy
// written into the strided_slice view, the gradient of strided_slice (one copy, no index
// tensors). In a graph compiled for dimensions of any size the sliced tensor itself comes as
// `like`: its shape, known when the graph runs, replaces `shape`.

std::vector<TensorMeta> InferStridedSliceGrad(const OpDef& def, const std::vector<TensorMeta>& in,
                                              const Attrs& attrs) {
  const bool like = in.size() > 1 && in[1].present;
  Shape shape = like ? in[1].shape : AttrInts(attrs, 0);
  if (!like)
    for (int64_t d : shape)
      KILN_CHECK(d >= 0, Value, def.name, ": invalid dimension ", d, " in ", ShapeStr(shape));
  Attrs slice(attrs.begin() + 1, attrs.end());
  Shape sliced = InferStridedSlice(def, {TensorMeta{in[0].dtype, shape}}, slice)[0].shape;
  KILN_CHECK(in[0].shape.size() == sliced.size(), Value, def.name, ": dy of shape ",
             ShapeStr(in[0].shape), " does not match the slice's shape ", ShapeStr(sliced));
  for (size_t i = 0; i < sliced.size(); ++i)
    KILN_CHECK(in[0].shape[i] == sliced[i] || in[0].shape[i] == -1 || sliced[i] == -1, Value,
               def.name, ": dy of shape ", ShapeStr(in[0].shape),
               " does not match the slice's shape ", ShapeStr(sliced));
  return {TensorMeta{in[0].dtype, shape}};
}

void StridedSliceGradKernel(KernelContext& ctx) {
  const Tensor& out = ctx.outputs[0];
  cpu::Fill(out, 0.0);
  if (out.numel() == 0) return;
  Attrs slice(ctx.attrs.begin() + 1, ctx.attrs.end());
  std::vector<SliceSpec> specs = SliceSpecs(out.shape(), slice, ctx.def.name);
  Tensor view = out;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].length == 0) return;
    view = view.Slice(static_cast<int64_t>(i), specs[i].start,
                      specs[i].start + (specs[i].length - 1) * specs[i].step + 1, specs[i].step);
  }
  cpu::CopyInto(ctx.inputs[0], view);
}

// ---- split: views along one axis

// split(input, like*; axis, sizes): views along one axis. Where concat's gradient cannot name a
// size (a dimension of any size), the concatenated tensors come as `like`s: piece i takes
// like i's size along the axis, as the graph runs.
Shape SplitSizes(const OpDef& def, const std::vector<Shape>& likes, const Attrs& attrs,
                 int64_t axis) {
  Shape sizes = AttrInts(attrs, 1);
  KILN_CHECK(!sizes.empty(), Value, def.name, ": sizes must not be empty");
  KILN_CHECK(likes.empty() || likes.size() == sizes.size(), Value, def.name, ": ", likes.size(),
             " tensors give the sizes of ", sizes.size(), " pieces");
  for (size_t i = 0; i < likes.size(); ++i) {
    KILN_CHECK(axis < static_cast<int64_t>(likes[i].size()), Value, def.name, ": tensor ", i,
               " of shape ", ShapeStr(likes[i]), " has no axis ", axis);
    sizes[i] = likes[i][axis];
  }
  for (int64_t s : sizes)
    KILN_CHECK(s >= 0 || !likes.empty(), Value, def.name, ": negative size in ", ShapeStr(sizes));
  return sizes;
}

std::vector<TensorMeta> InferSplit(const OpDef& def, const std::vector<TensorMeta>& in,
                                   const Attrs& attrs) {
  int64_t axis = StrictAxis(AttrInt(attrs, 0), Rank(in[0]), def.name);
  std::vector<Shape> likes;
  for (size_t k = 1; k < in.size(); ++k) likes.push_back(in[k].shape);
  const Shape sizes = SplitSizes(def, likes, attrs, axis);
  int64_t total = 0;
  for (int64_t s : sizes) total = (total < 0 || s < 0) ? -1 : total + s;
  int64_t dim = in[0].shape[axis];
  KILN_CHECK(dim == -1 || total == -1 || total == dim, Value, def.name, ": sizes ", ShapeStr(sizes),
             " sum to ", total, ", but axis ", axis, " of shape ", ShapeStr(in[0].shape),
             " has size ", dim);
  std::vector<TensorMeta> out;
  for (int64_t s : sizes) {
    Shape shape = in[0].shape;
    shape[axis] = s;
    out.push_back(TensorMeta{in[0].dtype, shape});
  }
  return out;
}

void SplitKernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  int64_t axis = StrictAxis(AttrInt(ctx.attrs, 0), x.ndim(), ctx.def.name);
  std::vector<TensorMeta> metas;
  for (const Tensor& t : ctx.inputs) metas.push_back(TensorMeta{t.dtype(), t.shape()});
  const std::vector<TensorMeta> pieces = InferSplit(ctx.def, metas, ctx.attrs);  // checks sizes
  int64_t start = 0;
  ctx.outputs.clear();
  for (const TensorMeta& piece : pieces) {
    const int64_t s = piece.shape[axis];
    int64_t offset = s > 0 ? x.offset() + start * x.strides()[axis] : x.offset();
    ctx.outputs.push_back(x.AsStrided(piece.shape, x.strides(), offset));
    start += s;
  }
}

// ---- depend: value, ordered after expr

std::vector<TensorMeta> InferDepend(const OpDef&, const std::vector<TensorMeta>& in, const Attrs&) {
  return {TensorMeta{in[0].dtype, in[0].shape}};
}

void DependKernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  ctx.outputs = {x.AsStrided(x.shape(), x.strides(), x.offset())};
}

// ---- tensor_shape: the input's shape as the graph runs (an int64 vector), for dimensions a
// graph was compiled without knowing (declared None)

std::vector<TensorMeta> InferTensorShape(const OpDef&, const std::vector<TensorMeta>& in,
                                         const Attrs&) {
  return {TensorMeta{DType::Int64, Shape{static_cast<int64_t>(in[0].shape.size())}}};
}

void TensorShapeKernel(KernelContext& ctx) {
  const Shape& shape = ctx.inputs[0].shape();
  int64_t* out = ctx.outputs[0].data<int64_t>();
  for (size_t i = 0; i < shape.size(); ++i) out[i] = shape[i];
}

// ---- reshape: a view when the layout allows, else a contiguous copy

// reshape(input, like?; shape): where `like` is given, its dimensions stand for the sizes a graph
// learns only when it runs: an empty `shape` is like's whole shape, and each -2 in `shape` is
// like's dimension at that position (one -1 is still what the others leave). The gradient's way
// back to a shape with several unknown sizes, and x.view(x.shape[0], -1) beside another one.
Shape ReshapeTarget(const OpDef& def, const Shape& attr, const Shape& like) {
  if (attr.empty()) return like;
  KILN_CHECK(attr.size() == like.size(), Value, def.name, ": target ", ShapeStr(attr),
             " and the tensor giving its sizes, of shape ", ShapeStr(like), ", differ in rank");
  Shape target = attr;
  for (size_t i = 0; i < target.size(); ++i)
    if (target[i] == -2) target[i] = like[i];
  return target;
}

std::vector<TensorMeta> InferReshapeOp(const OpDef& def, const std::vector<TensorMeta>& in,
                                       const Attrs& attrs) {
  const bool like = in.size() > 1 && in[1].present;
  const Shape target =
      like ? ReshapeTarget(def, AttrInts(attrs, 0), in[1].shape) : AttrInts(attrs, 0);
  const bool sized = !like || IsStaticShape(in[1].shape);  // the target's sizes are known
  if (!IsStaticShape(in[0].shape) || !sized) return {TensorMeta{in[0].dtype, target}};
  return {TensorMeta{in[0].dtype, InferReshape(in[0].shape, target, def.name)}};
}

void ReshapeKernel(KernelContext& ctx) {
  const bool like = ctx.inputs.size() > 1 && ctx.inputs[1].defined();
  const Shape& attr = AttrInts(ctx.attrs, 0);
  // ViewAs, else a copy
  ctx.outputs = {
      ctx.inputs[0].Reshape(like ? ReshapeTarget(ctx.def, attr, ctx.inputs[1].shape()) : attr)};
}

// ---- concat

std::vector<TensorMeta> InferConcat(const OpDef& def, const std::vector<TensorMeta>& in,
                                    const Attrs& attrs) {
  KILN_CHECK(!in.empty(), Value, def.name, ": expected at least one tensor");
  const Shape& first = in[0].shape;
  KILN_CHECK(!first.empty(), Value, def.name, ": zero-dimensional tensors cannot be concatenated");
  int64_t axis = StrictAxis(AttrInt(attrs, 0), Rank(in[0]), def.name);
  Shape shape = first;
  for (size_t k = 1; k < in.size(); ++k) {
    const Shape& s = in[k].shape;
    bool ok = s.size() == first.size();
    for (size_t i = 0; ok && i < s.size(); ++i)
      ok = static_cast<int64_t>(i) == axis || s[i] == first[i] || s[i] == -1 || first[i] == -1;
    KILN_CHECK(ok, Value, def.name, ": tensor ", k, " has shape ", ShapeStr(s),
               ", which does not match tensor 0's shape ", ShapeStr(first), " outside axis ", axis);
    shape[axis] = (shape[axis] == -1 || s[axis] == -1) ? -1 : shape[axis] + s[axis];
  }
  return {TensorMeta{PromotedType(in, {}), shape}};
}

void ConcatKernel(KernelContext& ctx) {
  const Tensor& out = ctx.outputs[0];
  int64_t axis = StrictAxis(AttrInt(ctx.attrs, 0), out.ndim(), ctx.def.name);
  int64_t start = 0;
  for (const Tensor& t : ctx.inputs) {
    int64_t n = t.shape()[axis];
    if (n > 0) cpu::CopyInto(t, out.Slice(axis, start, start + n, 1));
    start += n;
  }
}

// ---- assign: variable[...] = value, in place

std::vector<TensorMeta> InferAssign(const OpDef& def, const std::vector<TensorMeta>& in,
                                    const Attrs&) {
  Shape joined = BroadcastShapes(in[0].shape, in[1].shape, def.name);
  KILN_CHECK(joined == in[0].shape, Value, def.name, ": value of shape ", ShapeStr(in[1].shape),
             " cannot be broadcast to the variable's shape ", ShapeStr(in[0].shape));
  return {TensorMeta{in[0].dtype, in[0].shape}};
}

void AssignKernel(KernelContext& ctx) {
  const Tensor &variable = ctx.inputs[0], &value = ctx.inputs[1];
  // Overlapping source and destination (x[1:] = x[:-1]) would read already-written elements.
  Tensor source = value.same_storage(variable) ? value.Clone() : value;
  cpu::CopyInto(source, variable);
  ctx.outputs = {variable};
}

// ---- Gradient rules. Views and copies route dy back unchanged in value; only the layout moves.

GradVar Dy(GradBuilder& g) { return g.out_grad(0); }
Shape InputShape(GradBuilder& g, int i) { return g.meta(g.input(i)).shape; }

// Reshape, squeeze, expand_dims: dy takes the input's shape again.
std::vector<GradVar> ReshapeGrad(GradBuilder& g) {
  GradVar dy = Dy(g);
  Shape shape = InputShape(g, 0);
  std::vector<GradVar> grads(g.num_inputs());  // reshape's `like` gets none
  if (g.meta(dy).shape == shape && IsStaticShape(shape)) {
    grads[0] = dy;
  } else if (std::count(shape.begin(), shape.end(), -1) > 1) {
    grads[0] = g.Emit1(OpKind::Reshape, {dy, g.input(0)}, {Shape{}});  // the input's shape
  } else {
    grads[0] = g.Emit1(OpKind::Reshape, {dy}, {shape});
  }
  return grads;
}

std::vector<GradVar> TransposeGrad(GradBuilder& g) {
  const auto& perm = AttrInts(g.attrs(), 0);
  int64_t n = static_cast<int64_t>(perm.size());
  std::vector<int64_t> inverse(n);
  for (int64_t i = 0; i < n; ++i) inverse[perm[i] < 0 ? perm[i] + n : perm[i]] = i;
  return {g.Emit1(OpKind::Transpose, {Dy(g)}, {inverse})};
}

std::vector<GradVar> BroadcastToGrad(GradBuilder& g) {
  if (!IsStaticShape(InputShape(g, 0))) return {ToInput(g, Dy(g), 0)};
  return {SumToShape(g, Dy(g), InputShape(g, 0))};
}

// True when every slice of a strided_slice takes its whole axis (the gradient is dy itself). Along
// a dimension of any size only "from 0 to the end, step 1" is known to.
bool SlicesWholeAxes(const Shape& shape, const Attrs& a) {
  const auto &begin = AttrInts(a, 0), &end = AttrInts(a, 1), &strides = AttrInts(a, 2);
  for (size_t i = 0; i < begin.size() && i < shape.size(); ++i) {
    if (strides[i] != 1) return false;
    if (shape[i] >= 0) {
      if (ClampSlice(begin[i], end[i], 1, shape[i]).length != shape[i]) return false;
    } else if (begin[i] != 0 || end[i] != std::numeric_limits<int64_t>::max()) {
      return false;
    }
  }
  return true;
}

// strided_slice: dy written into zeros of the input's shape (the input's own, as the graph runs,
// where a dimension has any size).
std::vector<GradVar> StridedSliceGradRule(GradBuilder& g) {
  const Attrs& a = g.attrs();
  GradVar dy = Dy(g);
  Shape shape = InputShape(g, 0);
  if (SlicesWholeAxes(shape, a)) return {dy};
  std::vector<GradVar> inputs = {dy};
  if (!IsStaticShape(shape)) inputs.push_back(g.input(0));
  return {g.Emit1(OpKind::StridedSliceGrad, inputs, {shape, a[0], a[1], a[2]})};
}

// strided_slice_grad is linear in dy: its gradient slices the same elements back out.
std::vector<GradVar> StridedSliceGradGrad(GradBuilder& g) {
  const Attrs& a = g.attrs();
  return {g.Emit1(OpKind::StridedSlice, {Dy(g)}, {a[1], a[2], a[3]}), GradVar{}};
}

// split: the pieces' gradients joined again; pieces without one contribute zeros.
std::vector<GradVar> SplitGrad(GradBuilder& g) {
  std::vector<GradVar> pieces;
  for (int i = 0; i < g.num_outputs(); ++i) pieces.push_back(g.out_grad(i));
  GradVar joined = g.Emit1(OpKind::Concat, pieces, {g.attrs()[0]});
  return {CastTo(g, joined, g.meta(g.input(0)).dtype)};
}

// concat: dy split by the inputs' sizes along the axis, each cast back to its input's dtype.
std::vector<GradVar> ConcatGrad(GradBuilder& g) {
  int n = g.num_inputs();
  std::vector<GradVar> grads(n);
  bool any = false;
  for (int i = 0; i < n; ++i) any |= g.wants_input_grad(i);
  if (!any) return grads;
  int64_t axis = AttrInt(g.attrs(), 0);
  int64_t ndim = static_cast<int64_t>(InputShape(g, 0).size());
  if (axis < 0) axis += ndim;
  std::vector<int64_t> sizes;
  std::vector<GradVar> inputs = {Dy(g)};
  for (int i = 0; i < n; ++i) sizes.push_back(InputShape(g, i)[axis]);
  // A size known only when the graph runs: the inputs give every piece's size then.
  if (std::count(sizes.begin(), sizes.end(), -1) > 0)
    for (int i = 0; i < n; ++i) inputs.push_back(g.input(i));
  std::vector<GradVar> pieces = g.Emit(OpKind::Split, inputs, {axis, sizes});
  for (int i = 0; i < n; ++i)
    if (g.wants_input_grad(i)) grads[i] = CastTo(g, pieces[i], g.meta(g.input(i)).dtype);
  return grads;
}

// depend: the value passes through; expr only orders execution.
std::vector<GradVar> DependGrad(GradBuilder& g) { return {Dy(g), GradVar{}}; }

// assign: the variable's old value is overwritten, so only the value (broadcast into the
// variable's shape and converted to its dtype) receives a gradient.
std::vector<GradVar> AssignGrad(GradBuilder& g) {
  if (!g.wants_input_grad(1)) return {GradVar{}, GradVar{}};
  return {GradVar{}, ToInput(g, Dy(g), 1)};
}

}  // namespace

void RegisterShapeOps(OpRegistry& r) {
  const AttrValue none = std::monostate{};
  // These rules read only shapes and dtypes (GradReads: nothing), so the tape keeps no values.
  r.Add(GradReads(ViewOp(OpKind::Transpose, {"input"}, {{"perm", Shape{}}}, InferTranspose,
                         TransposeKernel, TransposeGrad),
                  {}, {}));
  r.Add(GradReads(ViewOp(OpKind::BroadcastTo, {"input"}, {{"shape", Shape{}}}, InferBroadcastTo,
                         BroadcastToKernel, BroadcastToGrad),
                  {}, {}));
  r.Add(GradReads(ViewOp(OpKind::Squeeze, {"input"}, {{"axis", none}}, InferSqueeze, SqueezeKernel,
                         ReshapeGrad),
                  {}, {}));
  r.Add(GradReads(ViewOp(OpKind::ExpandDims, {"input"}, {{"axis", int64_t{0}}}, InferExpandDims,
                         ExpandDimsKernel, ReshapeGrad),
                  {}, {}));
  r.Add(GradReads(ViewOp(OpKind::StridedSlice, {"input"},
                         {{"begin", Shape{}}, {"end", Shape{}}, {"strides", Shape{}}},
                         InferStridedSlice, StridedSliceKernel, StridedSliceGradRule),
                  {}, {}));
  r.Add(GradReads(
      ViewOp(OpKind::Split, {"input", "like*"}, {{"axis", int64_t{0}}, {"sizes", Shape{}}},
             InferSplit, SplitKernel, SplitGrad),
      {}, {}));
  r.Add(ViewOp(OpKind::Depend, {"value", "expr"}, {}, InferDepend, DependKernel, DependGrad));
  OpDef tensor_shape =
      MakeOpDef(OpKind::TensorShape, {"input"}, {}, InferTensorShape, TensorShapeKernel);
  tensor_shape.grad = NotDifferentiable;
  r.Add(GradReads(std::move(tensor_shape), {}, {}));
  // Reshape may copy; is_view says the output may alias the input.
  r.Add(GradReads(ViewOp(OpKind::Reshape, {"input", "like?"}, {{"shape", Shape{}}}, InferReshapeOp,
                         ReshapeKernel, ReshapeGrad),
                  {}, {}));

  OpDef concat =
      MakeOpDef(OpKind::Concat, {"tensors*"}, {{"axis", int64_t{0}}}, InferConcat, ConcatKernel);
  concat.promotion = Promotion::Common;
  concat.grad = ConcatGrad;
  r.Add(GradReads(std::move(concat), {}, {}));

  OpDef assign =
      ViewOp(OpKind::Assign, {"variable", "value"}, {}, InferAssign, AssignKernel, AssignGrad);
  assign.mutated_inputs = {0};
  r.Add(std::move(assign));

  OpDef slice_grad =
      MakeOpDef(OpKind::StridedSliceGrad, {"dy", "like?"},
                {{"shape", Shape{}}, {"begin", Shape{}}, {"end", Shape{}}, {"strides", Shape{}}},
                InferStridedSliceGrad, StridedSliceGradKernel);
  slice_grad.grad = StridedSliceGradGrad;
  r.Add(std::move(slice_grad));
}

}  // namespace kiln
