// eager.cc - one op at a time: the path every PyNative call and Tensor operator takes.
//
// 1. Fill in default attributes and check the input count against the schema.
// 2. Cast promoted inputs to their common dtype (the registry's Promotion rule).
// 3. Infer output dtypes and shapes with the op's inference function (the one Graph mode uses).
// 4. Allocate the outputs, unless the op makes its own (views, value-dependent shapes).
// 5. Run the CPU kernel.
// 6. Record the op on any active autodiff tape (runtime/tape.h).
#include "runtime/eager.h"

#include "core/error.h"
#include "kernels/cpu/copy.h"
#include "runtime/tape.h"

namespace kiln {

TensorMeta MetaOf(const Tensor& t) {
  if (!t.defined()) return TensorMeta{DType::Float32, {}, false, false};
  return TensorMeta{t.dtype(), t.shape(), t.impl()->wrapped_number, true};
}

DType PromotionTarget(const OpDef& def, const std::vector<TensorMeta>& metas) {
  DType target = PromotedType(metas, def.promoted_inputs);
  if (def.promotion == Promotion::CommonFloat && !IsFloating(target)) target = DType::Float32;
  return target;
}

void PromoteInputs(const OpDef& def, std::vector<Tensor>& inputs) {
  if (def.promotion == Promotion::None) return;
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (const auto& t : inputs) metas.push_back(MetaOf(t));
  DType target = PromotionTarget(def, metas);
  // Under a tape the cast is an op of its own, so gradients flow back to the original dtype.
  bool record = AnyTapeActive();
  auto cast = [&](Tensor& t) {
    if (!t.defined() || t.dtype() == target) return;
    if (t.impl()->wrapped_number && t.dtype() == DType::Int64)
      CheckWeakIntFits(def.name, *t.data<int64_t>(), target);
    t = record ? CallOp1(OpKind::Cast, {t}, {target}) : t.To(target);
  };
  if (def.promoted_inputs.empty()) {
    for (auto& t : inputs) cast(t);
  } else {
    for (int i : def.promoted_inputs)
      if (i < static_cast<int>(inputs.size())) cast(inputs[i]);
  }
}

namespace {

void CheckArity(const OpDef& def, const std::vector<Tensor>& inputs) {
  std::vector<bool> given;
  given.reserve(inputs.size());
  for (const auto& t : inputs) given.push_back(t.defined());
  CheckInputArity(def, given);
}

}  // namespace

std::vector<Tensor> CallOp(OpKind kind, std::vector<Tensor> inputs, Attrs attrs) {
  const OpDef& def = GetOpDef(kind);
  CheckArity(def, inputs);
  while (inputs.size() < def.inputs.size() && std::string(def.inputs[inputs.size()]).back() == '?')
    inputs.emplace_back();
  KILN_CHECK(attrs.size() <= def.attrs.size(), Type, def.name, ": expected at most ",
             def.attrs.size(), " attributes, got ", attrs.size());
  for (size_t i = attrs.size(); i < def.attrs.size(); ++i)
    attrs.push_back(def.attrs[i].default_value);

  PromoteInputs(def, inputs);
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (const auto& t : inputs) metas.push_back(MetaOf(t));
  std::vector<TensorMeta> out_metas = def.infer(def, metas, attrs);
  for (const auto& m : out_metas) CheckShapeSize(def.name, m.shape, m.dtype);

  std::vector<Tensor> outputs;
  if (!def.allocates_outputs) {
    outputs.reserve(out_metas.size());
    for (const auto& m : out_metas) outputs.push_back(Tensor::Empty(m.shape, m.dtype));
  }
  KernelContext ctx{def, inputs, outputs, attrs};
  def.kernel(ctx);
  for (int i : def.mutated_inputs)
    if (inputs[i].defined()) MarkWritten(inputs[i]);
  if (AnyTapeActive()) RecordOnTapes(def, inputs, attrs, outputs);
  return outputs;
}

Tensor CallOp1(OpKind kind, std::vector<Tensor> inputs, Attrs attrs) {
  std::vector<Tensor> outputs = CallOp(kind, std::move(inputs), std::move(attrs));
  return std::move(outputs.front());
}

Tensor ScalarTensor(double value, DType dtype, bool weak) {
  Tensor t = Tensor::Empty({}, dtype);
  cpu::Fill(t, value);
  t.impl()->wrapped_number = weak;
  return t;
}

}  // namespace kiln
