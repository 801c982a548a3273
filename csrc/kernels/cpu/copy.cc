// copy.cc - CopyInto and Fill, templated over source and destination dtypes.
#include "kernels/cpu/copy.h"

#include <cstring>

#include "core/error.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/loop.h"

namespace kiln::cpu {

Shape BroadcastStrides(const Tensor& t, const Shape& shape) {
  int64_t extra = static_cast<int64_t>(shape.size()) - t.ndim();
  KILN_CHECK(extra >= 0, Value, "cannot broadcast shape ", ShapeStr(t.shape()), " to ",
             ShapeStr(shape));
  Shape strides(shape.size(), 0);
  for (int64_t i = 0; i < t.ndim(); ++i) {
    int64_t have = t.shape()[i];
    KILN_CHECK(have == shape[extra + i] || have == 1, Value, "cannot broadcast shape ",
               ShapeStr(t.shape()), " to ", ShapeStr(shape));
    strides[extra + i] = have == 1 ? 0 : t.strides()[i];
  }
  return strides;
}

namespace {

template <typename Dst, typename Src>
void CopyTyped(const Tensor& src, const Tensor& dst) {
  ForEachElement<2>(dst, {src}, [](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
    if constexpr (std::is_same_v<Dst, Src>) {
      if (s[0] == sizeof(Dst) && s[1] == sizeof(Src)) {
        std::memcpy(p[0], p[1], n * sizeof(Dst));
        return;
      }
    }
    if (s[0] == sizeof(Dst) && s[1] == sizeof(Src)) {
      auto* out = reinterpret_cast<Dst*>(p[0]);
      auto* in = reinterpret_cast<const Src*>(p[1]);
      for (int64_t i = 0; i < n; ++i) out[i] = Convert<Dst>(in[i]);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      *reinterpret_cast<Dst*>(p[0] + i * s[0]) =
          Convert<Dst>(*reinterpret_cast<const Src*>(p[1] + i * s[1]));
    }
  });
}

}  // namespace

void CopyInto(const Tensor& src, const Tensor& dst) {
  DispatchDType(dst.dtype(), [&](auto dst_tag) {
    DispatchDType(src.dtype(),
                  [&](auto src_tag) { CopyTyped<decltype(dst_tag), decltype(src_tag)>(src, dst); });
  });
}

void Fill(const Tensor& dst, double value) {
  Tensor scalar = Tensor::Empty({}, DType::Float64);
  *scalar.data<double>() = value;
  CopyInto(scalar, dst);
}

}  // namespace kiln::cpu

namespace kiln {

Tensor Tensor::Contiguous() const {
  if (is_contiguous()) return *this;
  return Clone();
}

Tensor Tensor::Clone() const {
  Tensor out = Empty(shape(), dtype());
  cpu::CopyInto(*this, out);
  return out;
}

Tensor Tensor::To(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = Empty(shape(), target);
  cpu::CopyInto(*this, out);
  return out;
}

Tensor Tensor::Reshape(const Shape& target) const {
  Shape shape = InferReshape(this->shape(), target, "reshape");
  if (auto view = ViewAs(shape)) return *view;
  return Clone().AsStrided(shape, ContiguousStrides(shape), 0);
}

}  // namespace kiln
