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
  return g.Emit1(OpKind::Reshape, {summed}, {shape});
}

GradVar CastTo(GradBuilder& g, GradVar v, DType dtype) {
  if (g.meta(v).dtype == dtype) return v;
  return g.Emit1(OpKind::Cast, {v}, {dtype});
}

GradVar ToInput(GradBuilder& g, GradVar grad, int input) {
  TensorMeta in = g.meta(g.input(input));
  return CastTo(g, SumToShape(g, grad, in.shape), in.dtype);
}

}  // namespace kiln
