// rewrite_util.h - small helpers the passes share for rewriting a function's node list.
#pragma once

#include <vector>

#include "ir/ir.h"

namespace kiln::passes {

// Keeps the nodes with keep[n] (in order) and renumbers every reference to them; no kept node
// or result may use a dropped node's value.
void KeepNodes(ir::Func& f, const std::vector<bool>& keep);

// True for a node a rewrite must not move values across: print, raise, if, while, call, an
// in-place write or a random draw (constants and other ops are pure).
bool MayHaveEffect(const ir::Node& node);

}  // namespace kiln::passes
