// grad.h - gradient rules: how each op's input gradients are built from ordinary ops.
//
// A rule sees the op's forward inputs, outputs and output gradients as opaque GradVars and emits
// registry ops through a GradBuilder. The eager tape's builder runs each emitted op at once; Graph
// mode's autodiff will record them as IR nodes instead, so one rule serves both modes.
#pragma once

#include <vector>

#include "core/error.h"
#include "ops/registry.h"

namespace kiln {

struct GradVar {
  int id = -1;
  bool defined() const { return id >= 0; }
};

class GradBuilder {
 public:
  virtual ~GradBuilder() = default;
  virtual int num_inputs() const = 0;
  virtual int num_outputs() const = 0;
  virtual GradVar input(int i) = 0;
  virtual GradVar output(int i) = 0;
  // The gradient flowing into output i; zeros of the output's shape if none arrived.
  virtual GradVar out_grad(int i) = 0;
  virtual bool has_out_grad(int i) const = 0;
  // False when input i needs no gradient (integer, or not tracked): rules may skip its work.
  virtual bool wants_input_grad(int i) const = 0;
  virtual const Attrs& attrs() const = 0;
  virtual TensorMeta meta(GradVar v) = 0;
  virtual std::vector<GradVar> Emit(OpKind kind, const std::vector<GradVar>& inputs,
                                    Attrs attrs = {}) = 0;
  // A 0-d weakly typed constant: it takes the dtype of the tensor it is combined with.
  virtual GradVar Scalar(double value) = 0;

  GradVar Emit1(OpKind kind, const std::vector<GradVar>& inputs, Attrs attrs = {}) {
    return Emit(kind, inputs, std::move(attrs))[0];
  }
};

// A rule (OpDef::grad) returns one gradient per forward input; undefined means "no gradient".

// The rule of ops with no gradient (comparisons, argmax, integer results, stop_gradient).
std::vector<GradVar> NotDifferentiable(GradBuilder& g);

// The rule of a gradient op kiln does not differentiate again (the recurrent layers' BPTT): a
// gradient of its gradient raises, naming the op, instead of silently coming out zero.
template <const char* kOp>
std::vector<GradVar> NoSecondOrder(GradBuilder& g) {
  for (int i = 0; i < g.num_inputs(); ++i)
    KILN_CHECK(!g.wants_input_grad(i), NotImplemented, kOp,
               ": second derivatives (gradients of this gradient) are not supported");
  return {};
}

// ---- Building blocks for rules ----
// Sums `grad` over the axes that broadcasting added or stretched, so it takes `shape`.
GradVar SumToShape(GradBuilder& g, GradVar grad, const Shape& shape);
// A tensor of `like`'s shape filled with value (in dtype): a fill op, or where `like` has a
// dimension of any size (a graph compiled for such), fill_like, which takes it as the graph runs.
GradVar FilledLike(GradBuilder& g, GradVar like, double value, DType dtype);
// Casts v to dtype unless it has it already.
GradVar CastTo(GradBuilder& g, GradVar v, DType dtype);
// `grad` reduced to input i's shape and cast to its dtype: the usual last step of a rule.
GradVar ToInput(GradBuilder& g, GradVar grad, int input);

inline GradVar Add(GradBuilder& g, GradVar a, GradVar b) { return g.Emit1(OpKind::Add, {a, b}); }
inline GradVar Sub(GradBuilder& g, GradVar a, GradVar b) { return g.Emit1(OpKind::Sub, {a, b}); }
inline GradVar Mul(GradBuilder& g, GradVar a, GradVar b) { return g.Emit1(OpKind::Mul, {a, b}); }
inline GradVar Div(GradBuilder& g, GradVar a, GradVar b) { return g.Emit1(OpKind::Div, {a, b}); }
inline GradVar Neg(GradBuilder& g, GradVar a) { return g.Emit1(OpKind::Neg, {a}); }

}  // namespace kiln
