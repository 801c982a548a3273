// creation.cc - the creation op family (being written; see op_list.def for its ops).
#include "ops/registry.h"

namespace kiln {

void RegisterCreationOps(OpRegistry&) {}

}  // namespace kiln
