// indexing.cc - NumPy advanced indexing (read and write), nonzero, gather and one_hot.
//
// Advanced indexing, index_put and gather share one plan: the index tensors broadcast to a shape
// B; every B position names one input offset, and the input's other ("rest") dimensions are
// copied whole. The result holds B in place of the indexed axes when they are adjacent, else B
// first (NumPy's rule). Offsets are precomputed as flat lists so the inner copy is a plain loop.
#include <algorithm>
#include <limits>
#include <optional>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/copy.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln {
namespace {

constexpr int64_t kGrain = 4096;

// Row-major element offsets of every position of `shape` walked with `strides`.
std::vector<int64_t> Offsets(const Shape& shape, const Shape& strides) {
  std::vector<int64_t> out(NumElements(shape));
  if (out.empty()) return out;
  std::vector<int64_t> index(shape.size(), 0);
  int64_t offset = 0;
  for (int64_t& o : out) {
    o = offset;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      offset += strides[d];
      if (++index[d] < shape[d]) break;
      offset -= shape[d] * strides[d];
      index[d] = 0;
    }
  }
  return out;
}

// Where the index result's dimensions come from.
struct IndexLayout {
  std::vector<int64_t> axes;  // indexed input axes, normalized, in index-tensor order
  Shape index_shape;          // B: the index tensors broadcast together
  bool in_place = true;       // adjacent axes: B replaces them; otherwise B goes first
  std::vector<int64_t> rest;  // the input axes not indexed, in order
  Shape out_shape;
  std::vector<int64_t> b_pos, rest_pos;  // result dimensions holding B and the rest axes
};

IndexLayout PlanIndex(const Shape& input, const std::vector<Shape>& index_shapes,
                      const std::vector<int64_t>& axes, const char* op) {
  IndexLayout p;
  int64_t n = static_cast<int64_t>(input.size());
  KILN_CHECK(axes.size() == index_shapes.size(), Value, op, ": ", index_shapes.size(),
             " index tensors for ", axes.size(), " axes ", ShapeStr(axes));
  std::vector<bool> indexed(n, false);
  for (int64_t axis : axes) {
    KILN_CHECK(axis >= -n && axis < n, Axis, op, ": axis ", axis,
               " is out of range for a tensor of rank ", n);
    axis = axis < 0 ? axis + n : axis;
    KILN_CHECK(!indexed[axis], Value, op, ": axis ", axis, " is indexed twice");
    indexed[axis] = true;
    p.axes.push_back(axis);
  }
  for (const Shape& s : index_shapes) p.index_shape = BroadcastShapes(p.index_shape, s, op);
  for (size_t k = 1; k < p.axes.size(); ++k) p.in_place &= p.axes[k] == p.axes[k - 1] + 1;
  for (int64_t i = 0; i < n; ++i)
    if (!indexed[i]) p.rest.push_back(i);
  int64_t nb = static_cast<int64_t>(p.index_shape.size());
  int64_t insert_at = p.in_place && !p.axes.empty() ? p.axes[0] : 0;
  // The rest dims keep their order; B sits where the first indexed axis was (or first).
  int64_t before_count = 0;
  for (int64_t axis : p.rest) before_count += axis < insert_at;
  for (int64_t j = 0; j < static_cast<int64_t>(p.rest.size()); ++j)
    p.rest_pos.push_back(j < before_count ? j : j + nb);
  for (int64_t k = 0; k < nb; ++k) p.b_pos.push_back(before_count + k);
  p.out_shape.assign(p.rest.size() + nb, 0);
  for (size_t j = 0; j < p.rest.size(); ++j) p.out_shape[p.rest_pos[j]] = input[p.rest[j]];
  for (int64_t k = 0; k < nb; ++k) p.out_shape[p.b_pos[k]] = p.index_shape[k];
  return p;
}

Shape Pick(const Shape& values, const std::vector<int64_t>& positions) {
  Shape out;
  for (int64_t i : positions) out.push_back(values[i]);
  return out;
}

// The flat lists a kernel walks: input offset per B position (indices resolved and checked),
// result offset per B position, and the rest dimensions' offsets on both sides. When the rest
// dimensions are one contiguous run on both sides (x[i] of a row-major tensor: a whole row),
// the rest lists are left empty and `rest_run` holds the run's length instead: the kernels then
// copy rows, where the lists would cost as much as the copy to build.
struct IndexOffsets {
  std::vector<int64_t> in_b, in_rest, res_b, res_rest;
  bool one_run = false;
  int64_t rest_run = 0;
  int64_t rest_count() const { return one_run ? rest_run : static_cast<int64_t>(in_rest.size()); }
};

// True when walking `shape` with `strides` visits offsets 0, 1, 2, ... in order.
bool OneRun(const Shape& shape, const Shape& strides) {
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

// The first value of a uint64 index tensor past int64's range, if any: reading indices as int64
// would wrap it to a negative index, one that counts from the end.
std::optional<uint64_t> FirstPastInt64(const Tensor& index) {
  if (index.dtype() != DType::UInt64) return std::nullopt;
  const Tensor values = index.Contiguous();
  const uint64_t* v = values.data<uint64_t>();
  for (int64_t i = 0; i < values.numel(); ++i)
    if (v[i] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return v[i];
  return std::nullopt;
}

IndexOffsets ResolveIndex(const IndexLayout& p, const Tensor& input,
                          const std::vector<Tensor>& indices, const Tensor& result,
                          const char* op) {
  IndexOffsets o;
  int64_t nb = NumElements(p.index_shape);
  o.in_b.assign(nb, 0);
  for (size_t k = 0; k < indices.size(); ++k) {
    int64_t axis = p.axes[k], size = input.shape()[axis], stride = input.strides()[axis];
    if (auto big = FirstPastInt64(indices[k]))
      Throw(ErrorKind::Index, op, ": index ", *big, " is out of bounds for axis ", axis,
            " with size ", size);
    Tensor idx = indices[k].To(DType::Int64).Expand(p.index_shape).Contiguous();
    const int64_t* v = idx.data<int64_t>();
    for (int64_t b = 0; b < nb; ++b) {
      int64_t i = v[b];
      KILN_CHECK(i >= -size && i < size, Index, op, ": index ", i, " is out of bounds for axis ",
                 axis, " with size ", size);
      o.in_b[b] += (i < 0 ? i + size : i) * stride;
    }
  }
  o.res_b = Offsets(p.index_shape, Pick(result.strides(), p.b_pos));
  const Shape in_rest = Pick(input.shape(), p.rest), res_rest = Pick(result.shape(), p.rest_pos);
  const Shape in_strides = Pick(input.strides(), p.rest);
  const Shape res_strides = Pick(result.strides(), p.rest_pos);
  if (in_rest == res_rest && OneRun(in_rest, in_strides) && OneRun(res_rest, res_strides)) {
    o.one_run = true;
    o.rest_run = NumElements(in_rest);
    return o;
  }
  o.in_rest = Offsets(in_rest, in_strides);
  o.res_rest = Offsets(res_rest, res_strides);
  return o;
}

void CheckIndexDTypes(const std::vector<TensorMeta>& metas, size_t first, const char* op) {
  for (size_t k = first; k < metas.size(); ++k)
    KILN_CHECK(IsIntegral(metas[k].dtype), Type, op, ": index tensors must be integers, got ",
               DTypeName(metas[k].dtype), " (convert boolean masks with nonzero first)");
}

std::vector<Shape> ShapesFrom(const std::vector<TensorMeta>& metas, size_t first) {
  std::vector<Shape> shapes;
  for (size_t k = first; k < metas.size(); ++k) shapes.push_back(metas[k].shape);
  return shapes;
}

std::vector<Shape> ShapesFrom(const std::vector<Tensor>& tensors, size_t first) {
  std::vector<Shape> shapes;
  for (size_t k = first; k < tensors.size(); ++k) shapes.push_back(tensors[k].shape());
  return shapes;
}

// True when the result's innermost dimension of more than one element holds B: then walking B
// innermost reads and writes along rows (flip or a gather along the last axis; B outermost
// jumped a row per element, 9 ms for a 1024 x 1024 flip).
bool IndexedInnermost(const IndexLayout& p) {
  for (int64_t d = static_cast<int64_t>(p.out_shape.size()) - 1; d >= 0; --d)
    if (p.out_shape[d] > 1) return std::find(p.b_pos.begin(), p.b_pos.end(), d) != p.b_pos.end();
  return false;
}

// out[res] = in[index] over the plan, in parallel over B positions, or over the rest positions
// when B is innermost (writes never collide).
void GatherByPlan(const IndexLayout& p, const Tensor& in, const std::vector<Tensor>& indices,
                  const Tensor& out, const char* op) {
  IndexOffsets o = ResolveIndex(p, in, indices, out, op);
  if (out.numel() == 0) return;
  DispatchDType(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(in.raw_data());
    T* dst = out.data<T>();
    const int64_t nr = o.rest_count();
    const auto nb = static_cast<int64_t>(o.in_b.size());
    if (!o.one_run && IndexedInnermost(p)) {
      int64_t from = 0, step = 0, to = 0, one = 0;  // B as one run of the output: strided copies
      const bool runs = cpu::IsProgression(o.in_b, &from, &step) &&
                        cpu::IsProgression(o.res_b, &to, &one) && one == 1;
      ParallelFor(nr, std::max<int64_t>(1, kGrain / nb), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const T* s = src + o.in_rest[r];
          T* d = dst + o.res_rest[r];
          if (runs) {
            cpu::CopyStridedRun(s + from, step, d + to, nb);
          } else {
            for (int64_t b = 0; b < nb; ++b) d[o.res_b[b]] = s[o.in_b[b]];
          }
        }
      });
      return;
    }
    ParallelFor(nb, std::max<int64_t>(1, kGrain / nr), [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const T* s = src + o.in_b[b];
        T* d = dst + o.res_b[b];
        if (o.one_run) {
          std::copy(s, s + nr, d);
        } else {
          for (int64_t r = 0; r < nr; ++r) d[o.res_rest[r]] = s[o.in_rest[r]];
        }
      }
    });
  });
}

// ---- advanced_index(input, indices*; axes)

std::vector<TensorMeta> InferAdvancedIndex(const OpDef& def, const std::vector<TensorMeta>& in,
                                           const Attrs& attrs) {
  CheckIndexDTypes(in, 1, def.name);
  IndexLayout p = PlanIndex(in[0].shape, ShapesFrom(in, 1), AttrInts(attrs, 0), def.name);
  return {TensorMeta{in[0].dtype, p.out_shape}};
}

void AdvancedIndexKernel(KernelContext& ctx) {
  const Tensor& in = ctx.inputs[0];
  std::vector<Tensor> indices(ctx.inputs.begin() + 1, ctx.inputs.end());
  IndexLayout p =
      PlanIndex(in.shape(), ShapesFrom(ctx.inputs, 1), AttrInts(ctx.attrs, 0), ctx.def.name);
  GatherByPlan(p, in, indices, ctx.outputs[0], ctx.def.name);
}

// ---- index_put(input, values, indices*; axes, accumulate): input[index] = values (or +=)

// values must broadcast to the indexed shape without changing it. While compiling, a dim of the
// indexed shape may be -1 (a boolean mask's count of True elements): any length of values fits
// there, and the kernel checks the same rule again with the run-time shapes.
void CheckValuesFit(const Shape& indexed, const Shape& values, const char* op) {
  Shape joined = BroadcastShapes(indexed, values, op);
  bool fits = joined.size() == indexed.size();
  for (size_t i = 0; fits && i < joined.size(); ++i)
    fits = joined[i] == indexed[i] || indexed[i] == -1;
  KILN_CHECK(fits, Value, op, ": values of shape ", ShapeStr(values),
             " cannot be broadcast to the indexed shape ", ShapeStr(indexed));
}

std::vector<TensorMeta> InferIndexPut(const OpDef& def, const std::vector<TensorMeta>& in,
                                      const Attrs& attrs) {
  CheckIndexDTypes(in, 2, def.name);
  IndexLayout p = PlanIndex(in[0].shape, ShapesFrom(in, 2), AttrInts(attrs, 0), def.name);
  CheckValuesFit(p.out_shape, in[1].shape, def.name);
  return {TensorMeta{in[0].dtype, in[0].shape}};
}

void IndexPutKernel(KernelContext& ctx) {
  const Tensor& in = ctx.inputs[0];
  std::vector<Tensor> indices(ctx.inputs.begin() + 2, ctx.inputs.end());
  IndexLayout p =
      PlanIndex(in.shape(), ShapesFrom(ctx.inputs, 2), AttrInts(ctx.attrs, 0), ctx.def.name);
  bool accumulate = AttrBool(ctx.attrs, 1);
  CheckValuesFit(p.out_shape, ctx.inputs[1].shape(), ctx.def.name);
  Tensor values = ctx.inputs[1].To(in.dtype());
  if (values.same_storage(in)) values = values.Clone();  // x[i] = x[j] reads before writing
  values = values.Expand(p.out_shape);
  IndexOffsets o = ResolveIndex(p, in, indices, values, ctx.def.name);
  ctx.outputs = {in};
  if (values.numel() == 0) return;
  DispatchDType(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    T* dst = in.data<T>();
    const T* src = values.data<T>();
    // Serial, in index order: repeated indices accumulate, or the last write wins (NumPy).
    for (size_t b = 0; b < o.in_b.size(); ++b) {
      T* d = dst + o.in_b[b];
      const T* s = src + o.res_b[b];
      if (o.one_run && !accumulate) {  // a whole row
        std::copy(s, s + o.rest_run, d);
        continue;
      }
      for (int64_t r = 0; r < o.rest_count(); ++r) {
        T& target = d[o.one_run ? r : o.in_rest[r]];
        T v = s[o.one_run ? r : o.res_rest[r]];
        if (accumulate) {
          target = cpu::Convert<T>(static_cast<C>(static_cast<C>(target) + static_cast<C>(v)));
        } else {
          target = v;
        }
      }
    }
  });
}

// ---- nonzero(input) -> int64 (n, ndim)

std::vector<TensorMeta> InferNonZero(const OpDef&, const std::vector<TensorMeta>& in,
                                     const Attrs&) {
  return {TensorMeta{DType::Int64, Shape{-1, static_cast<int64_t>(in[0].shape.size())}}};
}

void NonZeroKernel(KernelContext& ctx) {
  Tensor in = ctx.inputs[0].Contiguous();
  int64_t ndim = in.ndim(), numel = in.numel();
  std::vector<int64_t> hits;
  DispatchDType(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* v = in.data<T>();
    for (int64_t i = 0; i < numel; ++i)
      if (cpu::Convert<bool>(v[i])) hits.push_back(i);
  });
  Tensor out = Tensor::Empty({static_cast<int64_t>(hits.size()), ndim}, DType::Int64);
  int64_t* o = out.data<int64_t>();
  for (int64_t flat : hits) {
    for (int64_t d = ndim - 1; d >= 0; --d) {
      o[d] = flat % in.shape()[d];
      flat /= in.shape()[d];
    }
    o += ndim;
  }
  ctx.outputs = {out};
}

// ---- gather(input_params, input_indices; axis, batch_dims): np.take along axis

// MindSpore's batch_dims: the first batch_dims axes of params and indices are paired (batch b
// of the result gathers from batch b of params), and the result is
// params[:axis] + indices[batch_dims:] + params[axis + 1:]. It is indexing the batch axes with
// aranges broadcast against indices, with the result's dimensions placed by hand.
struct GatherPlan {
  int64_t axis = 0, batch_dims = 0;
  IndexLayout layout;
};

GatherPlan PlanGather(const Shape& params, const Shape& indices, const Attrs& attrs,
                      const char* op) {
  GatherPlan g;
  int64_t n = static_cast<int64_t>(params.size()), ni = static_cast<int64_t>(indices.size());
  KILN_CHECK(n > 0, Value, op, ": input_params must have at least one dimension");
  g.axis = AttrInt(attrs, 0);
  KILN_CHECK(g.axis >= -n && g.axis < n, Axis, op, ": axis ", g.axis,
             " is out of range for a tensor of rank ", n);
  if (g.axis < 0) g.axis += n;
  g.batch_dims = AttrInt(attrs, 1);
  if (g.batch_dims < 0) g.batch_dims += ni;
  KILN_CHECK(g.batch_dims >= 0 && g.batch_dims <= ni, Value, op, ": batch_dims ", AttrInt(attrs, 1),
             " is out of range for indices of rank ", ni);
  if (g.batch_dims == 0) {
    g.layout = PlanIndex(params, {indices}, {g.axis}, op);
    return g;
  }
  int64_t bd = g.batch_dims;
  KILN_CHECK(bd <= g.axis, Value, op, ": batch_dims (", bd, ") must not exceed axis (", g.axis,
             ")");
  for (int64_t i = 0; i < bd; ++i)
    KILN_CHECK(params[i] == indices[i] || params[i] == -1 || indices[i] == -1, Value, op,
               ": batch dimension ", i, " of input_params ", ShapeStr(params),
               " and input_indices ", ShapeStr(indices), " differ");
  std::vector<Shape> shapes;
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < bd; ++i) {
    Shape s(ni, 1);
    s[i] = params[i];
    shapes.push_back(s);
    axes.push_back(i);
  }
  shapes.push_back(indices);
  axes.push_back(g.axis);
  IndexLayout p = PlanIndex(params, shapes, axes, op);
  // Result: [batch (bd), params[bd:axis], indices[bd:], params[axis+1:]].
  int64_t nidx = ni - bd;
  p.b_pos.clear();
  for (int64_t k = 0; k < ni; ++k) p.b_pos.push_back(k < bd ? k : k + (g.axis - bd));
  p.rest_pos.clear();
  for (int64_t r : p.rest) p.rest_pos.push_back(r < g.axis ? r : r - 1 + nidx);
  p.out_shape.assign(p.rest.size() + ni, 0);
  for (size_t j = 0; j < p.rest.size(); ++j) p.out_shape[p.rest_pos[j]] = params[p.rest[j]];
  for (int64_t k = 0; k < ni; ++k) p.out_shape[p.b_pos[k]] = p.index_shape[k];
  g.layout = std::move(p);
  return g;
}

// The index tensors of a gather: an arange per batch axis, then the indices themselves.
std::vector<Tensor> GatherIndexTensors(const Shape& params, const Tensor& indices,
                                       int64_t batch_dims) {
  std::vector<Tensor> out;
  for (int64_t i = 0; i < batch_dims; ++i) {
    Shape s(indices.ndim(), 1);
    s[i] = params[i];
    Tensor t = Tensor::Empty(s, DType::Int64);
    int64_t* v = t.data<int64_t>();
    for (int64_t j = 0; j < params[i]; ++j) v[j] = j;
    out.push_back(t);
  }
  out.push_back(indices);
  return out;
}

std::vector<TensorMeta> InferGather(const OpDef& def, const std::vector<TensorMeta>& in,
                                    const Attrs& attrs) {
  CheckIndexDTypes(in, 1, def.name);
  return {TensorMeta{in[0].dtype,
                     PlanGather(in[0].shape, in[1].shape, attrs, def.name).layout.out_shape}};
}

void GatherKernel(KernelContext& ctx) {
  const Tensor &params = ctx.inputs[0], &indices = ctx.inputs[1];
  GatherPlan p = PlanGather(params.shape(), indices.shape(), ctx.attrs, ctx.def.name);
  GatherByPlan(p.layout, params, GatherIndexTensors(params.shape(), indices, p.batch_dims),
               ctx.outputs[0], ctx.def.name);
}

// ---- one_hot(indices; depth, axis, on_value, off_value, dtype, out_of_range_error)

int64_t OneHotAxis(int64_t axis, int64_t ndim, const char* op) {
  KILN_CHECK(axis >= -1 && axis <= ndim, Axis, op, ": axis must be in [-1, ", ndim, "], got ",
             axis);
  return axis == -1 ? ndim : axis;
}

std::vector<TensorMeta> InferOneHot(const OpDef& def, const std::vector<TensorMeta>& in,
                                    const Attrs& attrs) {
  CheckIndexDTypes(in, 0, def.name);
  int64_t depth = AttrInt(attrs, 0);
  KILN_CHECK(depth >= 0, Value, def.name, ": depth must be non-negative, got ", depth);
  Shape shape = in[0].shape;
  int64_t axis = OneHotAxis(AttrInt(attrs, 1), static_cast<int64_t>(shape.size()), def.name);
  shape.insert(shape.begin() + axis, depth);
  return {TensorMeta{AttrDType(attrs, 4), shape}};
}

void OneHotKernel(KernelContext& ctx) {
  const Tensor& out = ctx.outputs[0];
  int64_t depth = AttrInt(ctx.attrs, 0);
  const std::string& caller = AttrString(ctx.attrs, 5);
  // A uint64 index past int64 reads as a negative one: an all-off row either way, but a
  // caller's error names the value itself.
  if (auto big = FirstPastInt64(ctx.inputs[0]); big && !caller.empty())
    Throw(ErrorKind::Index, caller, " ", *big, " is out of range [0, ", depth, ")");
  Tensor indices = ctx.inputs[0].To(DType::Int64).Contiguous();
  int64_t axis = OneHotAxis(AttrInt(ctx.attrs, 1), indices.ndim(), ctx.def.name);
  double on = AttrFloat(ctx.attrs, 2), off = AttrFloat(ctx.attrs, 3);
  int64_t inner = 1;
  for (int64_t d = axis; d < indices.ndim(); ++d) inner *= indices.shape()[d];
  const int64_t* idx = indices.data<int64_t>();
  DispatchDType(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T on_v = cpu::Convert<T>(on), off_v = cpu::Convert<T>(off);
    T* o = out.data<T>();
    std::fill(o, o + out.numel(), off_v);
    // Indices outside [0, depth) give an all-off row (TensorFlow's and MindSpore's rule),
    // unless the caller says such an index is a user error (class labels, ids) by naming it,
    // as "cross_entropy: target class": then it is an IndexError in both modes (Graph mode
    // first sees the values here).
    for (int64_t i = 0; i < indices.numel(); ++i) {
      int64_t v = idx[i];
      if (v >= 0 && v < depth) {
        o[(i / inner) * depth * inner + v * inner + i % inner] = on_v;
      } else if (!caller.empty()) {
        Throw(ErrorKind::Index, caller, " ", v, " is out of range [0, ", depth, ")");
      }
    }
  });
}

// ---- Gradient rules: reads scatter dy back (adding where an index repeats); writes route dy
// to the values they stored.

GradVar Zeros(GradBuilder& g, GradVar like) { return FilledLike(g, like, 0.0, g.meta(like).dtype); }

// dx = zeros of input 0's shape with dy added at the indexed positions (index_put, accumulate).
GradVar ScatterAdd(GradBuilder& g, GradVar dy, const std::vector<GradVar>& indices,
                   const std::vector<int64_t>& axes) {
  std::vector<GradVar> args = {Zeros(g, g.input(0)), CastTo(g, dy, g.meta(g.input(0)).dtype)};
  args.insert(args.end(), indices.begin(), indices.end());
  return g.Emit1(OpKind::IndexPut, args, {axes, true});
}

std::vector<GradVar> AdvancedIndexGrad(GradBuilder& g) {
  std::vector<GradVar> grads(g.num_inputs());
  if (!g.wants_input_grad(0)) return grads;
  std::vector<GradVar> indices;
  for (int i = 1; i < g.num_inputs(); ++i) indices.push_back(g.input(i));
  grads[0] = ScatterAdd(g, g.out_grad(0), indices, AttrInts(g.attrs(), 0));
  return grads;
}

// index_put(input, values, indices*): input keeps dy except where it was overwritten (all of dy
// with accumulate); values get dy at the positions they went to, summed over broadcasting.
// With repeated indices and accumulate=False every duplicate gets the gradient, although only
// the last write survives (as in PyTorch).
std::vector<GradVar> IndexPutGrad(GradBuilder& g) {
  std::vector<GradVar> grads(g.num_inputs());
  GradVar dy = g.out_grad(0);
  const Attrs& a = g.attrs();
  std::vector<GradVar> indices;
  for (int i = 2; i < g.num_inputs(); ++i) indices.push_back(g.input(i));
  if (g.wants_input_grad(0)) {
    if (AttrBool(a, 1)) {
      grads[0] = dy;
    } else {
      GradVar keep = FilledLike(g, dy, 1.0, DType::Bool);
      std::vector<GradVar> args = {keep, g.Scalar(0.0)};
      args.insert(args.end(), indices.begin(), indices.end());
      keep = g.Emit1(OpKind::IndexPut, args, {a[0], false});
      grads[0] = g.Emit1(OpKind::Where, {keep, dy, g.Scalar(0.0)});
    }
  }
  if (g.wants_input_grad(1)) {
    std::vector<GradVar> args = {dy};
    args.insert(args.end(), indices.begin(), indices.end());
    grads[1] = ToInput(g, g.Emit1(OpKind::AdvancedIndex, args, {a[0]}), 1);
  }
  return grads;
}

std::vector<GradVar> GatherGrad(GradBuilder& g) {
  if (!g.wants_input_grad(0)) return {GradVar{}, GradVar{}};
  TensorMeta params = g.meta(g.input(0));
  GradVar indices = g.input(1), dy = g.out_grad(0);
  GatherPlan p = PlanGather(params.shape, g.meta(indices).shape, g.attrs(), "gather");
  if (p.batch_dims == 0) return {ScatterAdd(g, dy, {indices}, {p.axis}), GradVar{}};
  // Batch axes are indexed by aranges shaped to broadcast against indices.
  int64_t bd = p.batch_dims, ni = static_cast<int64_t>(g.meta(indices).shape.size());
  std::vector<GradVar> index_vars;
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < bd; ++i) {
    GradVar r =
        g.Emit1(OpKind::Arange, {}, {int64_t{0}, params.shape[i], int64_t{1}, DType::Int64});
    Shape s(ni, 1);
    s[i] = params.shape[i];
    index_vars.push_back(g.Emit1(OpKind::Reshape, {r}, {s}));
    axes.push_back(i);
  }
  index_vars.push_back(indices);
  axes.push_back(p.axis);
  // index_put expects NumPy's layout: with axis > batch_dims the index dimensions come first,
  // [batch, indices[bd:], params[bd:axis], params[axis+1:]]; dy has params[bd:axis] first.
  if (p.axis > bd) {
    int64_t nd = static_cast<int64_t>(g.meta(dy).shape.size()), nidx = ni - bd;
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < bd; ++i) perm.push_back(i);
    for (int64_t i = 0; i < nidx; ++i) perm.push_back(p.axis + i);
    for (int64_t i = bd; i < p.axis; ++i) perm.push_back(i);
    for (int64_t i = p.axis + nidx; i < nd; ++i) perm.push_back(i);
    dy = g.Emit1(OpKind::Transpose, {dy}, {perm});
  }
  return {ScatterAdd(g, dy, index_vars, axes), GradVar{}};
}

// For the tape (OpDef::grad_reads_*): the rules read the index tensors, every input from
// `first` on, and of the indexed tensor and the values only their shapes and dtypes.
OpDef ReadsIndicesFrom(OpDef def, int first) {
  def.grad_reads_inputs = ~uint64_t{0} << first;
  def.grad_reads_outputs = 0;
  return def;
}

}  // namespace

void RegisterIndexingOps(OpRegistry& r) {
  r.Add(
      ReadsIndicesFrom(MakeOpDef(OpKind::AdvancedIndex, {"input", "indices*"}, {{"axes", Shape{}}},
                                 InferAdvancedIndex, AdvancedIndexKernel, AdvancedIndexGrad),
                       1));
  OpDef put = MakeOpDef(OpKind::IndexPut, {"input", "values", "indices*"},
                        {{"axes", Shape{}}, {"accumulate", false}}, InferIndexPut, IndexPutKernel,
                        IndexPutGrad);
  put.allocates_outputs = true;  // returns input itself, written in place
  put.is_view = true;
  put.mutated_inputs = {0};
  r.Add(ReadsIndicesFrom(std::move(put), 2));
  OpDef nonzero =
      MakeOpDef(OpKind::NonZero, {"input"}, {}, InferNonZero, NonZeroKernel, NotDifferentiable);
  nonzero.allocates_outputs = true;  // the row count depends on the values
  r.Add(std::move(nonzero));
  r.Add(ReadsIndicesFrom(MakeOpDef(OpKind::Gather, {"input_params", "input_indices"},
                                   {{"axis", int64_t{0}}, {"batch_dims", int64_t{0}}}, InferGather,
                                   GatherKernel, GatherGrad),
                         1));
  r.Add(MakeOpDef(OpKind::OneHot, {"indices"},
                  {{"depth", int64_t{0}},
                   {"axis", int64_t{-1}},
                   {"on_value", 1.0},
                   {"off_value", 0.0},
                   {"dtype", DType::Float32},
                   {"out_of_range_error", std::string()}},
                  InferOneHot, OneHotKernel, NotDifferentiable));
}

}  // namespace kiln
