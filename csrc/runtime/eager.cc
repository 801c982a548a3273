// eager.cc - one op at a time: the path every PyNative call and Tensor operator takes.
//
// 1. Fill in default attributes and check the input count against the schema.
// 2. Cast promoted inputs to their common dtype (the registry's Promotion rule).
// 3. Infer output dtypes and shapes with the op's inference function (the one Graph mode uses).
// 4. Allocate the outputs, unless the op makes its own (views, value-dependent shapes).
// 5. Run the CPU kernel (first, under a tape, keep copies of the recorded tensors an in-place
//    op is about to overwrite: runtime/tape.h).
// 6. Record the op on any active autodiff tape (runtime/tape.h).
// Steps 1-5 are ops/evaluate.h's; this file adds the tapes.
#include "runtime/eager.h"

#include "kernels/cpu/copy.h"
#include "runtime/tape.h"

namespace kiln {
namespace {

// Under a tape the cast is an op of its own, so gradients flow back to the original dtype.
Tensor RecordedCast(const Tensor& t, DType dtype) { return CallOp1(OpKind::Cast, {t}, {dtype}); }

}  // namespace

std::vector<Tensor> CallOp(OpKind kind, std::vector<Tensor> inputs, Attrs attrs) {
  const OpDef& def = GetOpDef(kind);
  PrepareOperands(def, inputs, attrs);
  const bool record = AnyTapeActive();
  PromoteInputs(def, inputs, record ? RecordedCast : PlainCast);
  if (record && !def.mutated_inputs.empty()) PreserveWrittenInputs(def, inputs);
  std::vector<Tensor> outputs = InferAndRun(def, inputs, attrs);
  if (record) RecordOnTapes(def, inputs, attrs, outputs);
  if (record && !def.mutated_inputs.empty()) RebaseWrittenInputs(def, inputs);
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
