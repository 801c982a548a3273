// test_util.h - small tensor helpers the C++ test files share.
#pragma once

#include "core/tensor.h"
#include "kernels/cpu/copy.h"

namespace kiln::testing_util {

// A tensor of `shape` and `dtype` with every element `value`.
inline Tensor Full(const Shape& shape, DType dtype, double value) {
  Tensor t = Tensor::Empty(shape, dtype);
  cpu::Fill(t, value);
  return t;
}

}  // namespace kiln::testing_util
