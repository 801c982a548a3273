// eager.h - PyNative dispatch: one op from the registry, recorded on the active autodiff tapes.
#pragma once

#include <vector>

#include "ops/evaluate.h"

namespace kiln {

// Runs `kind` on `inputs` (undefined tensors stand for omitted optional inputs) with `attrs`
// in schema order (missing trailing attrs take their defaults), and records it on every active
// tape that watches an input. Returns the outputs. (EvaluateOp is the same without the tapes.)
std::vector<Tensor> CallOp(OpKind kind, std::vector<Tensor> inputs, Attrs attrs);

// The single-output form used by Tensor operators.
Tensor CallOp1(OpKind kind, std::vector<Tensor> inputs, Attrs attrs = {});

// A 0-d tensor holding a Python scalar, weakly typed for promotion.
Tensor ScalarTensor(double value, DType dtype, bool weak = true);

}  // namespace kiln
