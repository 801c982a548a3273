// axis_runs.h - a tensor as [outer, n, inner] runs along one axis, for the scan and sort ops.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "ops/registry.h"

namespace kiln {

struct AxisRuns {
  int64_t outer = 1, n = 1, inner = 1;
  // The offset of element 0 of run `row` (in [0, outer * inner)) in a contiguous tensor.
  int64_t Base(int64_t row) const { return (row / inner) * n * inner + row % inner; }
};

inline AxisRuns RunsOf(const Shape& shape, int64_t axis) {
  AxisRuns r;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < axis) r.outer *= shape[i];
    if (i == axis) r.n = shape[i];
    if (i > axis) r.inner *= shape[i];
  }
  return r;
}

// `axis` normalized for `shape` (a 0-d tensor counts as 1-D), or a ValueError naming the op.
inline int64_t ScanAxis(const OpDef& def, const Shape& shape, int64_t axis) {
  const int64_t ndim = std::max<int64_t>(1, static_cast<int64_t>(shape.size()));
  KILN_CHECK(axis >= -ndim && axis < ndim, Value, def.name, ": axis ", axis,
             " is out of range for a tensor of rank ", shape.size(), " (expected [", -ndim, ", ",
             ndim, "))");
  return axis < 0 ? axis + ndim : axis;
}

}  // namespace kiln
