// convert.h - conversions between Python objects and core values, shared by the binding files.
#pragma once

#include <nanobind/nanobind.h>

#include "core/tensor.h"
#include "ops/registry.h"

namespace kiln::bind {

namespace nb = nanobind;

// Registers kiln.Tensor (the Python subclass) as the type C++ results are returned as.
void SetTensorClass(nb::handle cls);
// A new kiln.Tensor instance owning `t`.
nb::object Wrap(Tensor t);
// Wraps one output as a Tensor and several as a tuple.
nb::object WrapOutputs(std::vector<Tensor> outputs);

// A Tensor from a Tensor, a Python bool/int/float (weakly typed 0-d) or None (undefined).
// Returns false for anything else, so operators can answer NotImplemented.
bool ToOperand(nb::handle h, Tensor* out);
// A list or tuple of numbers (nested as a tensor's rows) as a kiln.Tensor, for `t + [5, 6]`
// (MindSpore converts such operands of + and -); false for anything else.
bool SequenceOperand(nb::handle h, Tensor* out);
AttrValue ToAttr(nb::handle h);
// A Python int as int64; OverflowError naming `what` when it does not fit.
int64_t ToInt64(nb::handle h, const char* what);
// An OverflowError (already set) for the Python int `value`, to throw.
nb::python_error OverflowFor(nb::handle value, const char* what);
Shape ToShape(nb::handle h);

}  // namespace kiln::bind
