// conv.cc - the conv op family (being written; see op_list.def for its ops).
#include "ops/registry.h"

namespace kiln {

void RegisterConvOps(OpRegistry&) {}

}  // namespace kiln
