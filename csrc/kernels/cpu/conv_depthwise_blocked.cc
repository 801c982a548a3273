// conv_depthwise_blocked.cc - depthwise convolution of small planes, eight channels to a vector.
//
// For planes of a few dozen outputs (MobileNet's 7 x 7 and 14 x 14), padding each plane on its
// own costs more than its taps, and a vector of a row's outputs is mostly past the row's end.
// Here eight channels of an image are transposed into one zero-padded scratch of (row, column,
// channel) floats (oneDNN's nChw8c), so each output is a vector of eight channels and each tap
// one multiply-add with the taps' weights in registers; no lane is wasted, and no lane ever
// multiplies an input its tap does not meet. Results are transposed back. The input gradient at
// unit stride is the same loop over dy with the kernel flipped.
#include "kernels/cpu/conv_depthwise_blocked.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/vec.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kBlock = 8;  // channels per vector
// Taps whose weights, and outputs of a row, stay in registers at once: AVX-512 has 32 vector
// registers (its 256-bit ones included), AVX2 16. A multiply-add takes 4 cycles and two start
// per cycle, so 8 outputs (8 independent chains) keep both units busy where they fit.
#if defined(__AVX512F__)
constexpr int kMaxTapGroup = 24;
constexpr int kOutputs = 8;
#else
constexpr int kMaxTapGroup = 12;
constexpr int kOutputs = 4;
#endif
constexpr int64_t kMaxScratchFloats = int64_t{1} << 21;  // 8 MiB per thread

struct Geometry {
  int64_t hp, wp;                // padded plane
  int64_t step;                  // floats from one output to the next along a row
  std::vector<int64_t> offsets;  // floats from an output's first tap to tap (i, j)
};

// The size of each group when `taps` are split into as few as hold kMaxTapGroup, evenly (49
// taps: 17, 16, 16, not 24, 24, 1, which costs a pass over the outputs for one tap).
int64_t GroupSize(int64_t taps) {
  const int64_t groups = (taps + kMaxTapGroup - 1) / kMaxTapGroup;
  return (taps + groups - 1) / groups;
}

Geometry MakeGeometry(const ConvShape& s) {
  Geometry g;
  g.hp = s.h + s.pad[0] + s.pad[1];
  g.wp = s.w + s.pad[2] + s.pad[3];
  g.step = s.stride[1] * kBlock;
  for (int64_t i = 0; i < s.kh; ++i)
    for (int64_t j = 0; j < s.kw; ++j)
      g.offsets.push_back((i * s.dilation[0] * g.wp + j * s.dilation[1]) * kBlock);
  return g;
}

// dst[p * 8 + k] = src[k * plane + p] for p < pixels, k < 8: eight planes to one of vectors.
void Interleave(const float* src, int64_t plane, int64_t pixels, float* dst) {
  int64_t p = 0;
  for (; p + 8 <= pixels; p += 8) TransposeBlock8(src + p, plane, dst + p * kBlock, kBlock);
  for (; p < pixels; ++p)
    for (int64_t k = 0; k < kBlock; ++k) dst[p * kBlock + k] = src[k * plane + p];
}

// The inverse: dst[k * plane + p] = src[p * 8 + k].
void Deinterleave(const float* src, int64_t pixels, int64_t plane, float* dst) {
  int64_t p = 0;
  for (; p + 8 <= pixels; p += 8) TransposeBlock8(src + p * kBlock, kBlock, dst + p, plane);
  for (; p < pixels; ++p)
    for (int64_t k = 0; k < kBlock; ++k) dst[k * plane + p] = src[p * kBlock + k];
}

// The eight planes at x (planes `plane` floats apart, h x w) into the padded scratch; the padding
// is never written, so it stays as zeroed when the scratch was made. `flat` holds h * w vectors.
void Pack(const ConvShape& s, const Geometry& g, const float* x, int64_t plane, float* flat,
          float* padded) {
  Interleave(x, plane, s.h * s.w, flat);
  for (int64_t y = 0; y < s.h; ++y)
    std::copy(flat + y * s.w * kBlock, flat + (y + 1) * s.w * kBlock,
              padded + ((y + s.pad[0]) * g.wp + s.pad[2]) * kBlock);
}

// out[x] (+)= sum over k < K of weight[k] * src[x * step + offset[k]] for x < count, vectors of
// eight channels; `first` starts from zero instead of out. kStep is the step when known at compile
// time (unit stride, stride 2), so that each tap's loads are one address plus constant
// displacements (a runtime step needs a register per output, and spilled the taps' offsets).
template <int K, int64_t kStep>
void RowTaps(const float* weight, const int64_t* offset, const float* src, int64_t runtime_step,
             int64_t count, bool first, float* out) {
  const int64_t step = kStep ? kStep : runtime_step;
  Vec8 wk[K];
  int64_t ok[K];
  for (int k = 0; k < K; ++k) wk[k] = Load8(weight + k * kBlock), ok[k] = offset[k];
  int64_t x = 0;
  for (; x + kOutputs <= count; x += kOutputs) {
    Vec8 acc[kOutputs] = {};
    if (!first)
      for (int u = 0; u < kOutputs; ++u) acc[u] = Load8(out + (x + u) * kBlock);
#pragma GCC unroll 32  // every tap: the weights stay in registers
    for (int k = 0; k < K; ++k) {
      const float* tap = src + x * step + ok[k];
      for (int u = 0; u < kOutputs; ++u) acc[u] += wk[k] * Load8(tap + u * step);
    }
    for (int u = 0; u < kOutputs; ++u) Store8(out + (x + u) * kBlock, acc[u]);
  }
  for (; x < count; ++x) {
    Vec8 acc = first ? Vec8{} : Load8(out + x * kBlock);
#pragma GCC unroll 32  // every tap: the weights stay in registers
    for (int k = 0; k < K; ++k) acc += wk[k] * Load8(src + x * step + ok[k]);
    Store8(out + x * kBlock, acc);
  }
}

using RowFn = void (*)(const float*, const int64_t*, const float*, int64_t, int64_t, bool, float*);

template <int64_t kStep, int... K>
constexpr std::array<RowFn, sizeof...(K)> RowFns(std::integer_sequence<int, K...>) {
  return {RowTaps<K + 1, kStep>...};
}

// The row function for `size` taps at `step` floats between outputs.
RowFn RowFor(int64_t size, int64_t step) {
  static constexpr auto kSeq = std::make_integer_sequence<int, kMaxTapGroup>{};
  static constexpr auto kUnit = RowFns<kBlock>(kSeq);
  static constexpr auto kTwo = RowFns<2 * kBlock>(kSeq);
  static constexpr auto kAny = RowFns<0>(kSeq);
  return (step == kBlock ? kUnit : step == 2 * kBlock ? kTwo : kAny)[size - 1];
}

// out (oh * ow vectors) = the convolution of the packed plane with `weights` (taps x 8). At unit
// stride the rows are one sweep over the padded layout, into `sweep` (oh * wp vectors): the output
// at padded position y * wp + x, those between a row's ow and wp computed and dropped, so that
// few outputs fall outside a block of kOutputs (a lone output is one chain of dependent
// multiply-adds). Strided rows are swept one by one.
void ConvolvePacked(const ConvShape& s, const Geometry& g, const float* padded,
                    const float* weights, float* sweep, float* out) {
  const int64_t taps = static_cast<int64_t>(g.offsets.size());
  const int64_t group = GroupSize(taps);
  auto run = [&](const float* src, int64_t count, float* dst) {
    for (int64_t first = 0; first < taps; first += group) {
      const int64_t size = std::min<int64_t>(group, taps - first);
      RowFor(size, g.step)(weights + first * kBlock, g.offsets.data() + first, src, g.step, count,
                           first == 0, dst);
    }
  };
  if (s.stride[0] == 1 && s.stride[1] == 1) {
    run(padded, (s.oh - 1) * g.wp + s.ow, sweep);
    for (int64_t y = 0; y < s.oh; ++y)
      std::copy(sweep + y * g.wp * kBlock, sweep + (y * g.wp + s.ow) * kBlock,
                out + y * s.ow * kBlock);
    return;
  }
  for (int64_t y = 0; y < s.oh; ++y)
    run(padded + y * s.stride[0] * g.wp * kBlock, s.ow, out + y * s.ow * kBlock);
}

// weights[(block * taps + t) * 8 + k] = w[(block * 8 + k) * taps + t], flipped in both spatial
// axes if asked (the input gradient's kernel).
std::vector<float> PackWeights(const ConvShape& s, const float* w, bool flip) {
  const int64_t taps = s.kh * s.kw;
  std::vector<float> packed(static_cast<size_t>(s.c * taps));
  for (int64_t c = 0; c < s.c; ++c)
    for (int64_t t = 0; t < taps; ++t) {
      const int64_t source = flip ? taps - 1 - t : t;  // (i, j) -> (kh - 1 - i, kw - 1 - j)
      packed[static_cast<size_t>(((c / kBlock) * taps + t) * kBlock + c % kBlock)] =
          w[c * taps + source];
    }
  return packed;
}

int64_t PackedFloats(const ConvShape& s, const Geometry& g) { return g.hp * g.wp * kBlock; }

// The forward of s (one channel per group, channels a multiple of 8) with packed weights; bias
// may be null.
void BlockedForward(const ConvShape& s, const float* x, const std::vector<float>& weights,
                    const float* bias, float* out) {
  const Geometry g = MakeGeometry(s);
  const int64_t blocks = s.c / kBlock, taps = s.kh * s.kw;
  const int64_t in_plane = s.h * s.w, out_plane = s.oh * s.ow;
  const int64_t work = std::max<int64_t>(kBlock * out_plane * taps, 1);
  ParallelFor(s.n * blocks, std::max<int64_t>(1, 50000 / work), [&](int64_t begin, int64_t end) {
    std::vector<float> padded(static_cast<size_t>(PackedFloats(s, g)));  // zeroed: the padding
    std::vector<float> flat(static_cast<size_t>(std::max(in_plane, out_plane) * kBlock));
    std::vector<float> sweep(static_cast<size_t>(s.oh * g.wp * kBlock));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / blocks, block = item % blocks, c0 = block * kBlock;
      Pack(s, g, x + (n * s.c + c0) * in_plane, in_plane, flat.data(), padded.data());
      ConvolvePacked(s, g, padded.data(), weights.data() + block * taps * kBlock, sweep.data(),
                     flat.data());
      if (bias) {  // last, as a separate add after the convolution would: same bits either way
        const Vec8 b = Load8(bias + c0);
        for (int64_t p = 0; p < out_plane; ++p)
          Store8(flat.data() + p * kBlock, Load8(flat.data() + p * kBlock) + b);
      }
      Deinterleave(flat.data(), out_plane, out_plane, out + (n * s.c + c0) * out_plane);
    }
  });
}

// dw for the channels of `block`, summed over every image into `sums` (taps x 8 doubles).
template <int K>
void WeightTaps(const ConvShape& s, const Geometry& g, const float* padded, const float* dy,
                int64_t first, double* sums) {
  Vec8 acc[K] = {};
  const int64_t* offset = g.offsets.data() + first;
  for (int64_t y = 0; y < s.oh; ++y) {
    const float* src = padded + y * s.stride[0] * g.wp * kBlock;
    const float* d = dy + y * s.ow * kBlock;
    for (int64_t x = 0; x < s.ow; ++x) {
      const Vec8 v = Load8(d + x * kBlock);
#pragma GCC unroll 32  // every tap: the weights stay in registers
      for (int k = 0; k < K; ++k) acc[k] += v * Load8(src + x * g.step + offset[k]);
    }
  }
#pragma GCC unroll 32  // every tap: the weights stay in registers
  for (int k = 0; k < K; ++k)
    for (int64_t lane = 0; lane < kBlock; ++lane) sums[(first + k) * kBlock + lane] += acc[k][lane];
}

using WeightFn = void (*)(const ConvShape&, const Geometry&, const float*, const float*, int64_t,
                          double*);

template <int... K>
constexpr std::array<WeightFn, sizeof...(K)> WeightFns(std::integer_sequence<int, K...>) {
  return {WeightTaps<K + 1>...};
}

}  // namespace

bool DepthwiseBlockedApplies(const ConvShape& s) {
  if (s.c % kBlock != 0 || s.o != s.c || s.groups != s.c) return false;
  return PackedFloats(s, MakeGeometry(s)) <= kMaxScratchFloats;
}

bool DepthwiseBlockedPays(const ConvShape& s, DepthwisePass pass) {
  switch (pass) {
    case DepthwisePass::kForward:  // a strided forward reads its phases at any size
      return s.stride[0] > 1 || s.stride[1] > 1 || s.oh * s.ow <= 16 * 16;
    case DepthwisePass::kInputGrad:
      return s.oh * s.ow <= 16 * 16 || s.kh * s.kw > 9;
    case DepthwisePass::kWeightGrad:
      return true;
  }
  return false;
}

void DepthwiseBlockedF32(const ConvShape& s, const float* x, const float* w, const float* bias,
                         float* out) {
  BlockedForward(s, x, PackWeights(s, w, false), bias, out);
}

bool DepthwiseBlockedBackwardDataF32(const ConvShape& s, const float* dy, const float* w,
                                     float* dx) {
  if (s.stride[0] != 1 || s.stride[1] != 1) return false;
  const ConvShape t = UnitStrideInputGradShape(s);
  for (int64_t pad : t.pad)
    if (pad < 0) return false;  // padding past the kernel's reach: rows no tap reads
  if (!DepthwiseBlockedApplies(t)) return false;
  BlockedForward(t, dy, PackWeights(s, w, true), nullptr, dx);
  return true;
}

void DepthwiseBlockedBackwardWeightsF32(const ConvShape& s, const float* dy, const float* x,
                                        float* dw) {
  static constexpr auto kFns = WeightFns(std::make_integer_sequence<int, kMaxTapGroup>{});
  const Geometry g = MakeGeometry(s);
  const int64_t blocks = s.c / kBlock, taps = s.kh * s.kw;
  const int64_t in_plane = s.h * s.w, out_plane = s.oh * s.ow;
  // One block of channels per item: its sums run over every image, so no two tasks share one.
  ParallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> padded(static_cast<size_t>(PackedFloats(s, g)));  // zeroed: the padding
    std::vector<float> flat(static_cast<size_t>(in_plane * kBlock));
    std::vector<float> grad(static_cast<size_t>(out_plane * kBlock));
    std::vector<double> sums(static_cast<size_t>(taps * kBlock));
    for (int64_t block = begin; block < end; ++block) {
      std::fill(sums.begin(), sums.end(), 0.0);
      const int64_t c0 = block * kBlock;
      for (int64_t n = 0; n < s.n; ++n) {
        Pack(s, g, x + (n * s.c + c0) * in_plane, in_plane, flat.data(), padded.data());
        Interleave(dy + (n * s.c + c0) * out_plane, out_plane, out_plane, grad.data());
        for (int64_t first = 0; first < taps; first += GroupSize(taps))
          kFns[std::min<int64_t>(GroupSize(taps), taps - first) - 1](
              s, g, padded.data(), grad.data(), first, sums.data());
      }
      for (int64_t k = 0; k < kBlock; ++k)
        for (int64_t t = 0; t < taps; ++t)
          dw[(c0 + k) * taps + t] = static_cast<float>(sums[t * kBlock + k]);
    }
  });
}

}  // namespace kiln::cpu
