// linalg_decomp_internal.h - the gradient rules of the decompositions (linalg_decomp_grad.cc),
// shared with their registration in linalg_decomp.cc.
#pragma once

#include <vector>

#include "ops/grad.h"

namespace kiln::linalg_grad {

std::vector<GradVar> SvdGrad(GradBuilder& g);
std::vector<GradVar> QrGrad(GradBuilder& g);
std::vector<GradVar> TriangularSolveGrad(GradBuilder& g);

}  // namespace kiln::linalg_grad
