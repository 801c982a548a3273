// shape.cc - the shape op family (being written; see op_list.def for its ops).
#include "ops/registry.h"

namespace kiln {

void RegisterShapeOps(OpRegistry&) {}

}  // namespace kiln
