// reverse.h - reverse-mode autodiff on the IR: backward nodes from the registry's gradient rules.
#pragma once

#include <vector>

#include "ir/ir.h"

namespace kiln::autodiff {

// Appends to `func` the nodes computing d(sum_i <targets[i], sens[i]>)/d(source) for each
// source, by sweeping the forward nodes [begin, end of func) backwards and applying each op's
// gradient rule (the rules eager mode uses). A ValueRef::None() sens means ones. Sources must be
// defined before `begin` (params or earlier nodes); unreached sources get zeros.
std::vector<ir::ValueRef> Gradient(ir::Module& module, ir::Func& func, int begin,
                                   const std::vector<ir::ValueRef>& targets,
                                   const std::vector<ir::ValueRef>& sens,
                                   const std::vector<ir::ValueRef>& sources);

}  // namespace kiln::autodiff
