// evaluate.h - runs one registry op on tensors: schema, promotion, inference, allocation, kernel.
//
// This is the whole of an op call except autodiff: nothing here knows about tapes. Eager
// dispatch (runtime/eager.cc) wraps it and records on the active tapes; constant folding
// (passes/fold.cc, passes/simplify.cc) calls EvaluateOp, so work done while compiling never
// lands on a user's gradient tape; the executor runs planned nodes through RunKernel.
#pragma once

#include <vector>

#include "ops/registry.h"

namespace kiln {

// How a promoted input is cast: PlainCast converts the tensor; eager dispatch passes a cast that
// goes through its own dispatch when a tape must see it.
using CastFn = Tensor (*)(const Tensor& t, DType dtype);
Tensor PlainCast(const Tensor& t, DType dtype);

// Checks the input count against the schema, pads absent trailing optional inputs (undefined
// tensors) and completes the attributes with their defaults. TypeError naming the op otherwise.
void PrepareOperands(const OpDef& def, std::vector<Tensor>& inputs, Attrs& attrs);
// Pads absent trailing optional inputs as far as the schema lists them; never a variadic tail
// ("tensors*"), which takes only the tensors given.
void PadOptionalInputs(const OpDef& def, std::vector<Tensor>& inputs);
// Casts the op's promoted inputs in place to PromotionTarget's dtype with `cast`. A Python int
// joining an integer tensor must fit the dtype (OverflowError naming the op otherwise).
void PromoteInputs(const OpDef& def, std::vector<Tensor>& inputs, CastFn cast = PlainCast);

// Runs the kernel into `outputs` (already allocated, unless the op makes its own) and bumps the
// write counter of every input it writes in place.
void RunKernel(const OpDef& def, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
               const Attrs& attrs);
// Infers the outputs from prepared, promoted inputs, allocates them and runs the kernel.
std::vector<Tensor> InferAndRun(const OpDef& def, const std::vector<Tensor>& inputs,
                                const Attrs& attrs);

// The op on `inputs` (undefined tensors for omitted optional ones) with `attrs` in schema order
// (missing trailing ones take their defaults), recorded on no tape.
std::vector<Tensor> EvaluateOp(OpKind kind, std::vector<Tensor> inputs, Attrs attrs = {});

}  // namespace kiln
