// outputs.h - a compiled graph's output tree (ir/signature.h) from and to Python objects.
#pragma once

#include <vector>

#include "convert.h"
#include "ir/signature.h"

namespace kiln::bind {

// The tree from the front end's description (kiln.jit.api._output_signature): ("result", k),
// ("literal", value), ("opaque", k), ("tuple", [...]), ("list", [...]), ("dict", [(key, value)]).
ir::OutputTree ToOutputTree(nb::handle spec);

// A run's result as the caller sees it: `outputs` nested as `tree` says, literals as Python
// values, `opaque[k]` where the tree holds `opaque k`. Moves the tensors out of `outputs`.
// The tree in the front end's description, for results the front end fills in itself (a
// loaded model inlined into a graph being compiled).
nb::object TreeToSpec(const ir::OutputTree& tree);

nb::object BuildOutputs(const ir::OutputTree& tree, std::vector<Tensor>& outputs,
                        const nb::tuple& opaque);

}  // namespace kiln::bind
