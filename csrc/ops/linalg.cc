// linalg.cc - the linalg op family (being written; see op_list.def for its ops).
#include "ops/registry.h"

namespace kiln {

void RegisterLinalgOps(OpRegistry&) {}

}  // namespace kiln
