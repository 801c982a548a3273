// gemm.h - the portable matmul for dtypes oneDNN does not run: float64, integers, bool.
#pragma once

#include "core/tensor.h"

namespace kiln::cpu {

// c[..., M, N] = a[..., M, K] @ b[..., K, N] for any dtype (all three share it). a and b are
// already broadcast (strides 0 allowed) to c's batch dims; any strides work. Integers wrap like
// NumPy's (accumulated modulo 2^64, then truncated); bool gives logical or-of-ands.
void GemmFallback(const Tensor& a, const Tensor& b, const Tensor& c);

}  // namespace kiln::cpu
