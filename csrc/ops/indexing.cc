// indexing.cc - the indexing op family (being written; see op_list.def for its ops).
#include "ops/registry.h"

namespace kiln {

void RegisterIndexingOps(OpRegistry&) {}

}  // namespace kiln
