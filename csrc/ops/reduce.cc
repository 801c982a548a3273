// reduce.cc - the reduce op family (being written; see op_list.def for its ops).
#include "ops/registry.h"

namespace kiln {

void RegisterReduceOps(OpRegistry&) {}

}  // namespace kiln
