// normalization_internal.h - what the normalization ops (normalization.cc) and their backward
// kernels (normalization_grad.cc) share.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln::norm {

// The dtype statistics come out in: float32 for 16-bit floats, the input dtype otherwise.
inline DType StatDType(DType in) {
  return in == DType::Float16 || in == DType::BFloat16 ? DType::Float32 : in;
}

// Shapes equal where known (-1: a dimension only known at run time, in Graph mode).
inline bool ShapesMatch(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && a[i] != -1 && b[i] != -1) return false;
  return true;
}

// Input names without the schema's "?" marker, for messages.
inline std::string InputName(const OpDef& def, size_t i) {
  std::string name = def.inputs[i];
  if (!name.empty() && name.back() == '?') name.pop_back();
  return name;
}

// Sum of f(p[i]) over a row in double, in 8 lanes: independent chains the compiler can
// vectorize, and a smaller rounding error than one running sum.
template <typename T, typename F>
double RowSum(const T* p, int64_t n, F f) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lanes[l] += f(p[i + l]);
  double total = 0;
  for (; i < n; ++i) total += f(p[i]);
  for (int l = 0; l < 8; ++l) total += lanes[l];
  return total;
}

template <typename T>
constexpr bool kFloatType = std::is_floating_point_v<compute_t<T>>;

// An OpDef of this family with its schema, inference, kernel and promotion filled in.
inline OpDef Norm(OpKind kind, std::vector<const char*> inputs, InferFn infer, KernelFn kernel,
                  Promotion promotion) {
  OpDef def;
  def.kind = kind;
  def.inputs = std::move(inputs);
  def.infer = infer;
  def.kernel = kernel;
  def.promotion = promotion;
  return def;
}

// The first normalized axis of layer norm (attribute 0, negative counts from the end).
inline int64_t NormAxis(const Shape& shape, const Attrs& attrs) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  int64_t axis = AttrInt(attrs, 0);
  return axis < 0 ? axis + ndim : axis;
}

// A per-channel tensor as doubles (`fill` when omitted).
std::vector<double> LoadChannels(const Tensor& t, int64_t channels, double fill);
// Writes doubles into a 1-d tensor of any float dtype and stride (the running statistics).
void StoreChannels(const Tensor& t, const std::vector<double>& values);

void RegisterNormalizationGradOps(OpRegistry& r);

}  // namespace kiln::norm
