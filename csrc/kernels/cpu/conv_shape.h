// conv_shape.h - the geometry of one 2-D convolution, as kiln's own convolution loops take it.
#pragma once

#include <array>
#include <cstdint>

namespace kiln::cpu {

// NCHW input (n, c, h, w), OIHW weight (o, c / groups, kh, kw), output (n, o, oh, ow).
struct ConvShape {
  int64_t n, c, h, w, o, kh, kw, oh, ow, groups;
  std::array<int64_t, 2> stride, dilation;
  std::array<int64_t, 4> pad;  // top, bottom, left, right
};

}  // namespace kiln::cpu
