// evaluate.cc - one op call without autodiff: the steps eager dispatch and constant folding share.
#include "ops/evaluate.h"

#include <string>

#include "core/error.h"

namespace kiln {

Tensor PlainCast(const Tensor& t, DType dtype) { return t.To(dtype); }

void PadOptionalInputs(const OpDef& def, std::vector<Tensor>& inputs) {
  while (inputs.size() < def.inputs.size() && std::string(def.inputs[inputs.size()]).back() == '?')
    inputs.emplace_back();
}

void PrepareOperands(const OpDef& def, std::vector<Tensor>& inputs, Attrs& attrs) {
  std::vector<bool> given;
  given.reserve(inputs.size());
  for (const auto& t : inputs) given.push_back(t.defined());
  CheckInputArity(def, given);
  PadOptionalInputs(def, inputs);
  attrs = CompleteAttrs(def, std::move(attrs));
}

void PromoteInputs(const OpDef& def, std::vector<Tensor>& inputs, CastFn cast) {
  if (def.promotion == Promotion::None) return;
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (const auto& t : inputs) metas.push_back(MetaOf(t));
  const DType target = PromotionTarget(def, metas);
  auto promote = [&](Tensor& t) {
    if (!t.defined() || t.dtype() == target) return;
    CheckWeakScalarFits(def.name, t, target);
    t = cast(t, target);
  };
  if (def.promoted_inputs.empty()) {
    for (auto& t : inputs) promote(t);
  } else {
    for (int i : def.promoted_inputs)
      if (i < static_cast<int>(inputs.size())) promote(inputs[i]);
  }
}

void RunKernel(const OpDef& def, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
               const Attrs& attrs) {
  KernelContext ctx{def, inputs, outputs, attrs};
  def.kernel(ctx);
  for (int i : def.mutated_inputs)
    if (inputs[i].defined()) MarkWritten(inputs[i]);
}

std::vector<Tensor> InferAndRun(const OpDef& def, const std::vector<Tensor>& inputs,
                                const Attrs& attrs) {
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (const auto& t : inputs) metas.push_back(MetaOf(t));
  const std::vector<TensorMeta> out_metas = def.infer(def, metas, attrs);
  for (const auto& m : out_metas) CheckShapeSize(def.name, m.shape, m.dtype);
  std::vector<Tensor> outputs;
  if (!def.allocates_outputs) {
    outputs.reserve(out_metas.size());
    for (const auto& m : out_metas) outputs.push_back(Tensor::Empty(m.shape, m.dtype));
  }
  RunKernel(def, inputs, outputs, attrs);
  return outputs;
}

std::vector<Tensor> EvaluateOp(OpKind kind, std::vector<Tensor> inputs, Attrs attrs) {
  const OpDef& def = GetOpDef(kind);
  PrepareOperands(def, inputs, attrs);
  PromoteInputs(def, inputs);
  return InferAndRun(def, inputs, attrs);
}

}  // namespace kiln
