// special_internal.h - scalar special functions shared by the math families
// (elementwise_math.cc: digamma; special.cc: polygamma, zeta, incomplete gamma).
#pragma once

namespace kiln::special {

// Digamma for doubles; -inf at 0 and NaN at the negative integers (poles).
double DigammaD(double x);

}  // namespace kiln::special
