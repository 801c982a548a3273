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

// The input gradient of unit-stride convolution s as a convolution of its own: dx[y] sums
// dy[y + pad_top - i * dilation] over taps i, a convolution of dy (o channels in, c out, the same
// groups) padded by reach - pad on each side (reach = (k - 1) * dilation), with tap i read as
// k - 1 - i. A negative pad means padding past the kernel's reach (rows no tap reads): that
// convolution does not express it.
inline ConvShape UnitStrideInputGradShape(const ConvShape& s) {
  const int64_t reach_h = (s.kh - 1) * s.dilation[0], reach_w = (s.kw - 1) * s.dilation[1];
  ConvShape t = s;
  t.c = s.o, t.h = s.oh, t.w = s.ow, t.o = s.c, t.oh = s.h, t.ow = s.w;
  t.stride = {1, 1};
  t.pad = {reach_h - s.pad[0], reach_h - s.pad[1], reach_w - s.pad[2], reach_w - s.pad[3]};
  return t;
}

}  // namespace kiln::cpu
