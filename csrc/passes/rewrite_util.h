// rewrite_util.h - small helpers the passes share for rewriting a function's node list.
#pragma once

#include <vector>

#include "ir/ir.h"

namespace kiln::passes {

// Keeps the nodes with keep[n] (in order) and renumbers every reference to them; no kept node
// or result may use a dropped node's value.
void KeepNodes(ir::Func& f, const std::vector<bool>& keep);
// Puts the nodes in `order` (a permutation of their indices, each after its producers) and
// renumbers every reference.
void ReorderNodes(ir::Func& f, const std::vector<int>& order);

}  // namespace kiln::passes
