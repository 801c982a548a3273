// reverse_internal.h - the control-flow parts of reverse.cc's backward sweep, shared within
// autodiff.
#pragma once

#include <string>
#include <vector>

#include "autodiff/reverse.h"

namespace kiln::autodiff {

// A value of `like`'s meta m filled with `value`: a fill node, or fill_like of `like` where m has
// a dimension of any size (its size is known only when the graph runs).
ir::ValueRef FilledLike(ir::Builder& b, const ir::ValueRef& like, const TensorMeta& m, double value,
                        const ir::SourceLoc& loc = {});

// The backward of one branch (or loop body): a new function of the branch's params and the
// gradients of its results, which recomputes the branch and returns the params' gradients.
std::string BranchGradient(ir::Module& module, const std::string& branch_name);

// The gradients of the inputs of the `while` node at `index` of parent's function from those of
// its outputs (none: zeros), as nodes appended through `parent` and functions added to `module`
// (while_grad.cc). The node itself becomes a call that also counts the loop's iterations.
std::vector<ir::ValueRef> WhileGradient(ir::Module& module, ir::Builder& parent, int index,
                                        const std::vector<ir::ValueRef>& out_grads);

}  // namespace kiln::autodiff
