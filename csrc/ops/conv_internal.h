// conv_internal.h - what the conv family (conv.cc) and pooling (pool.cc) share.
#pragma once

#include <string>
#include <vector>

#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln::conv {

// "(2, 3) and (4,)": the present inputs' shapes, for error messages.
std::string ShapesStr(const std::vector<TensorMeta>& in);
// An attribute list of `count` ints, each at least `min`; ValueError naming op and attribute.
const Shape& CheckedInts(const Attrs& attrs, size_t i, size_t count, int64_t min, const char* op,
                         const char* what);
// `grad` cast to the dtype of input `input` (its gradient must have the input's type).
GradVar InputGrad(GradBuilder& g, GradVar grad, int input);

void RegisterPoolOps(OpRegistry& r);

}  // namespace kiln::conv
