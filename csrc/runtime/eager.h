// eager.h - PyNative dispatch: promote, infer, allocate and run one op from the registry.
#pragma once

#include <vector>

#include "ops/registry.h"

namespace kiln {

// Runs `kind` on `inputs` (undefined tensors stand for omitted optional inputs) with `attrs`
// in schema order (missing trailing attrs take their defaults). Returns the outputs.
std::vector<Tensor> CallOp(OpKind kind, std::vector<Tensor> inputs, Attrs attrs);

// The single-output form used by Tensor operators.
Tensor CallOp1(OpKind kind, std::vector<Tensor> inputs, Attrs attrs = {});

// The metadata inference sees for a tensor.
TensorMeta MetaOf(const Tensor& t);

// Casts the op's promoted inputs in place to the dtype the registry's rule gives; returns it.
// Graph mode inserts the same casts, so both modes compute in the same type.
void PromoteInputs(const OpDef& def, std::vector<Tensor>& inputs);
DType PromotionTarget(const OpDef& def, const std::vector<TensorMeta>& metas);

// A 0-d tensor holding a Python scalar, weakly typed for promotion.
Tensor ScalarTensor(double value, DType dtype, bool weak = true);

}  // namespace kiln
