// reduce.cc - lays a reduction's input out as a contiguous [outer, reduce, inner] block.
#include "kernels/cpu/reduce.h"

namespace kiln::cpu {

Tensor PrepareReduce(const Tensor& in, const std::vector<bool>& reduced, ReduceShape* shape) {
  const Shape& dims = in.shape();
  const int64_t ndim = in.ndim();
  // Size-1 axes never affect the layout, so they may sit anywhere; only the others must form
  // one adjacent run for the contiguous input to be usable as it is.
  int64_t lo = -1, hi = -1;
  for (int64_t d = 0; d < ndim; ++d) {
    if (reduced[d] && dims[d] != 1) {
      if (lo < 0) lo = d;
      hi = d;
    }
  }
  bool adjacent = true;
  for (int64_t d = lo; lo >= 0 && d <= hi; ++d) adjacent = adjacent && (reduced[d] || dims[d] == 1);

  *shape = ReduceShape{};
  if (adjacent) {
    for (int64_t d = 0; d < ndim; ++d) {
      if (lo >= 0 && d >= lo && d <= hi)
        shape->reduce *= dims[d];
      else if (lo >= 0 && d > hi)
        shape->inner *= dims[d];
      else
        shape->outer *= dims[d];
    }
    return in.Contiguous();
  }
  // Kept axes first (in order), reduced axes last: one copy, then plain rows.
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < ndim; ++d)
    if (!reduced[d]) {
      perm.push_back(d);
      shape->outer *= dims[d];
    }
  for (int64_t d = 0; d < ndim; ++d)
    if (reduced[d]) {
      perm.push_back(d);
      shape->reduce *= dims[d];
    }
  return in.Permute(perm).Contiguous();
}

}  // namespace kiln::cpu
