// grad.cc - the building blocks gradient rules share.
#include "ops/grad.h"

namespace kiln {

std::vector<GradVar> NotDifferentiable(GradBuilder& g) {
  return std::vector<GradVar>(g.num_inputs());
}

GradVar SumToShape(GradBuilder& g, GradVar grad, const Shape& shape) {
  const Shape have = g.meta(grad).shape;
  if (have == shape) return grad;
  int64_t extra = static_cast<int64_t>(have.size()) - static_cast<int64_t>(shape.size());
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < static_cast<int64_t>(have.size()); ++i) {
    bool added = i < extra;
    bool stretched = !added && shape[i - extra] == 1 && have[i] != 1;
    if (added || stretched) axes.push_back(i);
  }
  GradVar summed =
      axes.empty() ? grad : g.Emit1(OpKind::ReduceSum, {grad}, {axes, true, std::monostate{}});
  if (g.meta(summed).shape == shape) return summed;
  if (!IsStaticShape(shape) && extra > 0) {  // a reshape could name one unknown size only
    std::vector<int64_t> leading;
    for (int64_t i = 0; i < extra; ++i) leading.push_back(i);
    return g.Emit1(OpKind::Squeeze, {summed}, {leading});
  }
  return g.Emit1(OpKind::Reshape, {summed}, {shape});
}

GradVar FilledLike(GradBuilder& g, GradVar like, double value, DType dtype) {
  const Shape shape = g.meta(like).shape;
  if (IsStaticShape(shape)) return g.Emit1(OpKind::Fill, {}, {shape, value, dtype});
  return g.Emit1(OpKind::FillLike, {like}, {value, dtype});
}

GradVar CastTo(GradBuilder& g, GradVar v, DType dtype) {
  if (g.meta(v).dtype == dtype) return v;
  return g.Emit1(OpKind::Cast, {v}, {dtype});
}

GradVar ToInput(GradBuilder& g, GradVar grad, int input) {
  TensorMeta in = g.meta(g.input(input));
  // With a dimension of any size only the run tells whether broadcasting stretched it.
  if (!IsStaticShape(in.shape))
    return CastTo(g, g.Emit1(OpKind::SumToLike, {grad, g.input(input)}), in.dtype);
  return CastTo(g, SumToShape(g, grad, in.shape), in.dtype);
}

}  // namespace kiln
