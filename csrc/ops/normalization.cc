// normalization.cc - the normalization op family (being written; see op_list.def for its ops).
#include "ops/registry.h"

namespace kiln {

void RegisterNormalizationOps(OpRegistry&) {}

}  // namespace kiln
