// conv_depthwise.cc - float32 depthwise convolution and its gradients, by rows of phase planes.
//
// Each (image, input channel) plane is copied into a zero-padded scratch split into stride_w
// phase planes: phase p holds the padded columns p, p + s, p + 2s, ... Then, at any stride, the
// taps of a row of outputs read consecutive floats: tap (i, j) of output (y, x) is in phase
// (j * dw) % s, row y * sh + i * dh, column x + (j * dw) / s. The forward keeps a chunk of outputs
// in registers across the taps. The input gradient adds, per row of dy and kernel row, each
// phase's taps as a correlation of the dy row (one read-modify-write per chunk, not one per tap)
// and copies the unpadded part back out. The weight gradient keeps a register per tap across an
// output channel's planes. A plane is small (MobileNet's largest is 112 x 112), so it stays in
// L1/L2 while its taps run; images and channels split over threads.
#include "kernels/cpu/conv_depthwise.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/conv_depthwise_blocked.h"
#include "kernels/cpu/vec.h"

namespace kiln::cpu {
namespace {

constexpr int kVecBytes = kNativeVecBytes;  // one native register (vec.h)
using Vec = FloatVec<kVecBytes>;
constexpr int64_t kLanes = kVecBytes / sizeof(float);
constexpr int kVecs = 2;                        // vectors of outputs the forward keeps per chunk
constexpr int64_t kChunk = kLanes * kVecs;      // outputs per chunk
constexpr int64_t kMaxSide = int64_t{1} << 20;  // bounds every product below
constexpr int64_t kMaxScratchFloats = int64_t{1} << 22;  // 16 MiB of phase planes per thread
constexpr int kMaxTapGroup = 12;  // weight-gradient accumulators held in registers at once

inline Vec Load(const float* p) { return LoadVec<Vec>(p); }
inline void Store(float* p, Vec v) { StoreVec(p, v); }

int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
int64_t PaddedHeight(const ConvShape& s) { return s.h + s.pad[0] + s.pad[1]; }
int64_t PaddedWidth(const ConvShape& s) { return s.w + s.pad[2] + s.pad[3]; }

// Whether v[0, n) holds no inf or nan: x - x is 0 for every finite x and nan otherwise.
bool AllFinite(const float* v, int64_t n) {
  Vec vec_sum = {};
  float sum = 0.0f;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Vec x = Load(v + i);
    vec_sum += x - x;
  }
  for (; i < n; ++i) sum += v[i] - v[i];
  for (int64_t lane = 0; lane < kLanes; ++lane) sum += vec_sum[lane];
  return sum == 0.0f;
}

// Where each tap of each output row reads. At unit vertical stride ("flat") consecutive output
// rows start `width` floats apart, so a sweep of chunks runs across the row ends (the positions
// past a row's ow are computed and dropped) and a 7 x 7 plane is 4 chunks of 16, not 7 rows of
// one chunk each; otherwise each output row is swept on its own, with room past its end.
struct Layout {
  bool flat;
  int64_t phases;     // stride_w
  int64_t width;      // floats per phase row
  int64_t plane;      // floats per phase plane, with the room its sweeps read and write past
  int64_t row_step;   // from one output row's taps to the next's: stride_h rows
  int64_t shift;      // the largest column shift of a tap, (kw - 1) * dw / stride_w
  int64_t span;       // row mode: a dy row's reach in a phase (ow + shift), whole chunks
  int64_t positions;  // flat mode: oh * width, whole chunks
  int64_t reach;      // flat mode: the largest tap offset within a phase
  std::vector<int64_t> taps;    // offset of tap (i, j) from its output row's start, weight order
  std::vector<int64_t> within;  // the same, within the tap's phase
  std::vector<int64_t> phase;   // the tap's phase
  // The taps the input gradient's sweeps take together, by (kernel row in row mode, or all of
  // them when flat) x phase: their indices in weight order.
  std::vector<std::vector<int64_t>> scatter;
};

// The Layout's sizes, without its per-tap lists (DepthwiseConvApplies checks them first: a huge
// stride or kernel must not allocate lists it will not use).
Layout LayoutSizes(const ConvShape& s) {
  Layout l;
  l.flat = s.stride[0] == 1;
  l.phases = s.stride[1];
  l.shift = (s.kw - 1) * s.dilation[1] / l.phases;
  const int64_t columns = (PaddedWidth(s) + l.phases - 1) / l.phases;
  if (l.flat) {
    l.width = columns;
    l.positions = RoundUp(s.oh * l.width, kChunk);
    l.reach = (s.kh - 1) * s.dilation[0] * l.width + l.shift;
    l.plane = RoundUp(std::max(PaddedHeight(s) * l.width, l.positions + l.reach), kLanes);
  } else {
    // Wide enough for the real columns, a chunk's reach past ow, and a dy row's span.
    l.span = RoundUp(s.ow + l.shift, kChunk);
    l.width = std::max({columns, RoundUp(s.ow, kChunk) + RoundUp(l.shift, kChunk), l.span});
    l.plane = PaddedHeight(s) * l.width;
  }
  l.row_step = s.stride[0] * l.width;
  return l;
}

Layout MakeLayout(const ConvShape& s) {
  Layout l = LayoutSizes(s);
  for (int64_t i = 0; i < s.kh; ++i)
    for (int64_t j = 0; j < s.kw; ++j) {
      const int64_t col = j * s.dilation[1];
      l.within.push_back(i * s.dilation[0] * l.width + col / l.phases);
      l.phase.push_back(col % l.phases);
      l.taps.push_back(l.phase.back() * l.plane + l.within.back());
    }
  l.scatter.resize(static_cast<size_t>((l.flat ? 1 : s.kh) * l.phases));
  for (int64_t t = 0; t < s.kh * s.kw; ++t)
    l.scatter[static_cast<size_t>((l.flat ? 0 : t / s.kw) * l.phases + l.phase[t])].push_back(t);
  return l;
}

int64_t ScratchFloats(const Layout& l) { return l.phases * l.plane; }

// even[k] = src[2k], odd[k] = src[2k + 1] for k < pairs: stride 2's phases, eight pairs a step.
void SplitPairs(const float* src, int64_t pairs, float* even, float* odd) {
  int64_t k = 0;
  for (; k + 8 <= pairs; k += 8) {
    const Vec8 a = Load8(src + 2 * k), b = Load8(src + 2 * k + 8);
    Store8(even + k, __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14));
    Store8(odd + k, __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15));
  }
  for (; k < pairs; ++k) even[k] = src[2 * k], odd[k] = src[2 * k + 1];
}

// The inverse: dst[2k] = even[k], dst[2k + 1] = odd[k].
void MergePairs(const float* even, const float* odd, int64_t pairs, float* dst) {
  int64_t k = 0;
  for (; k + 8 <= pairs; k += 8) {
    const Vec8 e = Load8(even + k), o = Load8(odd + k);
    Store8(dst + 2 * k, __builtin_shufflevector(e, o, 0, 8, 1, 9, 2, 10, 3, 11));
    Store8(dst + 2 * k + 8, __builtin_shufflevector(e, o, 4, 12, 5, 13, 6, 14, 7, 15));
  }
  for (; k < pairs; ++k) dst[2 * k] = even[k], dst[2 * k + 1] = odd[k];
}

// Where a row's even and odd columns start at stride 2: column pad_left + x is in phase
// (pad_left + x) % 2, at (pad_left + x) / 2.
int64_t EvenStart(const ConvShape& s, const Layout& l) {
  return s.pad[2] % 2 * l.plane + s.pad[2] / 2;
}
int64_t OddStart(const ConvShape& s, const Layout& l) {
  return (s.pad[2] + 1) % 2 * l.plane + (s.pad[2] + 1) / 2;
}

// Copies plane x (h, w) into the phase planes at its padding offsets. The padding is never
// written, so it stays as zeroed when the scratch was made.
void FillPhases(const ConvShape& s, const Layout& l, const float* x, float* phases) {
  for (int64_t y = 0; y < s.h; ++y) {
    const float* src = x + y * s.w;
    float* row = phases + (y + s.pad[0]) * l.width;
    if (l.phases == 1) {
      CopyRow(row + s.pad[2], src, s.w);
      continue;
    }
    if (l.phases == 2) {
      float *even = row + EvenStart(s, l), *odd = row + OddStart(s, l);
      SplitPairs(src, s.w / 2, even, odd);
      if (s.w % 2) even[s.w / 2] = src[s.w - 1];
      continue;
    }
    int64_t p = s.pad[2] % l.phases, col = s.pad[2] / l.phases;
    for (int64_t x0 = 0; x0 < s.w; ++x0) {
      row[p * l.plane + col] = src[x0];
      if (++p == l.phases) p = 0, ++col;
    }
  }
}

// The inverse of FillPhases: plane dx (h, w) from the phase planes.
void TakePhases(const ConvShape& s, const Layout& l, const float* phases, float* dx) {
  for (int64_t y = 0; y < s.h; ++y) {
    const float* row = phases + (y + s.pad[0]) * l.width;
    float* dst = dx + y * s.w;
    if (l.phases == 1) {
      CopyRow(dst, row + s.pad[2], s.w);
      continue;
    }
    if (l.phases == 2) {
      const float *even = row + EvenStart(s, l), *odd = row + OddStart(s, l);
      MergePairs(even, odd, s.w / 2, dst);
      if (s.w % 2) dst[s.w - 1] = even[s.w / 2];
      continue;
    }
    int64_t p = s.pad[2] % l.phases, col = s.pad[2] / l.phases;
    for (int64_t x0 = 0; x0 < s.w; ++x0) {
      dst[x0] = row[p * l.plane + col];
      if (++p == l.phases) p = 0, ++col;
    }
  }
}

// out[0, count) (whole chunks) = K taps of src, read at offset[k] with weight[k], added to what
// out holds unless `first`; + bias when given (the last group's). The taps' weights and offsets
// stay in registers across the sweep.
template <int K>
void ForwardTaps(const float* weight, const int64_t* offset, const float* src, int64_t count,
                 bool first, const float* bias, float* out) {
  float wk[K];
  int64_t ok[K];
  for (int k = 0; k < K; ++k) wk[k] = weight[k], ok[k] = offset[k];
  for (int64_t x0 = 0; x0 < count; x0 += kChunk) {
    Vec acc[kVecs] = {};
    if (!first)
      for (int v = 0; v < kVecs; ++v) acc[v] = Load(out + x0 + v * kLanes);
#pragma GCC unroll 32  // every tap: the weights stay in registers
    for (int k = 0; k < K; ++k)
      for (int v = 0; v < kVecs; ++v) acc[v] += wk[k] * Load(src + ok[k] + x0 + v * kLanes);
    // The bias last, as a separate add after the convolution would: same bits either way.
    if (bias)
      for (int v = 0; v < kVecs; ++v) acc[v] += *bias;
    for (int v = 0; v < kVecs; ++v) Store(out + x0 + v * kLanes, acc[v]);
  }
}

using ForwardFn = void (*)(const float*, const int64_t*, const float*, int64_t, bool, const float*,
                           float*);

template <int... K>
constexpr std::array<ForwardFn, sizeof...(K)> ForwardFns(std::integer_sequence<int, K...>) {
  return {ForwardTaps<K + 1>...};
}

// out[0, count) = the taps w of `src` (an output row's start, or a flat plane's), + bias.
void ForwardSweep(const Layout& l, const float* src, const float* w, const float* bias,
                  int64_t count, float* out) {
  static constexpr auto kFns = ForwardFns(std::make_integer_sequence<int, kMaxTapGroup>{});
  const int64_t taps = static_cast<int64_t>(l.taps.size());
  for (int64_t first = 0; first < taps; first += kMaxTapGroup) {
    const int64_t size = std::min<int64_t>(kMaxTapGroup, taps - first);
    kFns[size - 1](w + first, l.taps.data() + first, src, count, first == 0,
                   first + size == taps ? bias : nullptr, out);
  }
}

// out (oh, ow) from the filled phase planes; `sweep` holds one sweep's chunks.
void ForwardPlane(const ConvShape& s, const Layout& l, const float* phases, const float* w,
                  const float* bias, float* sweep, float* out) {
  if (l.flat) {
    ForwardSweep(l, phases, w, bias, l.positions, sweep);
    for (int64_t y = 0; y < s.oh; ++y) CopyRow(out + y * s.ow, sweep + y * l.width, s.ow);
    return;
  }
  const int64_t count = RoundUp(s.ow, kChunk);
  for (int64_t y = 0; y < s.oh; ++y) {
    ForwardSweep(l, phases + y * l.row_step, w, bias, count, sweep);
    CopyRow(out + y * s.ow, sweep, s.ow);
  }
}

// The transpose of ForwardPlane, tap by tap over exactly the positions each tap reaches: for
// weights that are not all finite, where the zero-padded sweeps below would add 0 * inf.
void ScatterPlaneExact(const ConvShape& s, const Layout& l, const float* dy, const float* w,
                       float* phases) {
  for (int64_t y = 0; y < s.oh; ++y)
    for (int64_t t = 0; t < static_cast<int64_t>(l.taps.size()); ++t) {
      float* dst = phases + y * l.row_step + l.taps[t];
      for (int64_t x0 = 0; x0 < s.ow; ++x0) dst[x0] += w[t] * dy[y * s.ow + x0];
    }
}

// dst[z] += sum over k < K of weight[k] * src[z - offset[k]], z in [0, count): K taps of the
// transpose of a sweep, as a correlation, so each vector of dst is read and written once per K
// taps. src must be readable (and zero where dy is not) wherever that index falls.
template <int K>
void ScatterTaps(const float* weight, const int64_t* offset, const float* src, int64_t count,
                 float* dst) {
  float wk[K];
  int64_t ok[K];
  for (int k = 0; k < K; ++k) wk[k] = weight[k], ok[k] = offset[k];
  for (int64_t z = 0; z < count; z += kLanes) {
    Vec acc = Load(dst + z);
#pragma GCC unroll 32  // every tap: the weights stay in registers
    for (int k = 0; k < K; ++k) acc += wk[k] * Load(src + (z - ok[k]));
    Store(dst + z, acc);
  }
}

using ScatterFn = void (*)(const float*, const int64_t*, const float*, int64_t, float*);

template <int... K>
constexpr std::array<ScatterFn, sizeof...(K)> ScatterFns(std::integer_sequence<int, K...>) {
  return {ScatterTaps<K + 1>...};
}

// The taps of `group` (indices in weight order), kMaxTapGroup at a time: src is read at
// z + lead - within_t.
void ScatterSweep(const Layout& l, const std::vector<int64_t>& group, const float* src,
                  int64_t lead, const float* w, int64_t count, float* dst) {
  static constexpr auto kFns = ScatterFns(std::make_integer_sequence<int, kMaxTapGroup>{});
  float weight[kMaxTapGroup];
  int64_t offset[kMaxTapGroup];
  const int64_t taps = static_cast<int64_t>(group.size());
  for (int64_t first = 0; first < taps; first += kMaxTapGroup) {
    const int64_t size = std::min<int64_t>(kMaxTapGroup, taps - first);
    for (int64_t k = 0; k < size; ++k) {
      const int64_t t = group[static_cast<size_t>(first + k)];
      weight[k] = w[t];
      offset[k] = l.within[static_cast<size_t>(t)] - lead;
    }
    kFns[size - 1](weight, offset, src, count, dst);
  }
}

// Adds the transpose of ForwardPlane(w) applied to dy (oh, ow) into the phase planes, reading dy
// through `rows`: a buffer that is zero but where dy's rows are copied into it.
void ScatterPlane(const ConvShape& s, const Layout& l, const float* dy, const float* w, float* rows,
                  float* phases) {
  if (l.flat) {  // rows: reach zeros, then dy's rows `width` apart, then zeros to the plane's end
    float* src = rows + l.reach;
    for (int64_t y = 0; y < s.oh; ++y) CopyRow(src + y * l.width, dy + y * s.ow, s.ow);
    for (int64_t p = 0; p < l.phases; ++p)
      ScatterSweep(l, l.scatter[p], src, 0, w, l.plane, phases + p * l.plane);
    return;
  }
  float* src = rows + l.shift;  // rows: shift zeros, one dy row, zeros to span
  for (int64_t y = 0; y < s.oh; ++y) {
    CopyRow(src, dy + y * s.ow, s.ow);
    for (int64_t i = 0; i < s.kh; ++i) {
      const int64_t row = (y * s.stride[0] + i * s.dilation[0]) * l.width;
      // A tap of kernel row i is i * dh rows and its shift in: the lead leaves the shift alone.
      for (int64_t p = 0; p < l.phases; ++p)
        ScatterSweep(l, l.scatter[i * l.phases + p], src, i * s.dilation[0] * l.width, w, l.span,
                     phases + p * l.plane + row);
    }
  }
}

// acc[first + g] += the products of dy (oh, ow) with taps [first, first + G) of the filled
// phase planes, lane by lane, row by row: whole vectors of a row in registers, the rest one by
// one into lane 0 (a lane past ow would multiply an input the tap never meets, and 0 * inf is not
// 0).
template <int G>
void WeightGradRows(const ConvShape& s, const Layout& l, const float* phases, const float* dy,
                    int64_t first, Vec* acc_out) {
  Vec acc[G];
  float rest[G] = {};
  for (int g = 0; g < G; ++g) acc[g] = acc_out[first + g];
  const int64_t* offset = l.taps.data() + first;
  const int64_t whole = s.ow / kLanes * kLanes;
  for (int64_t y = 0; y < s.oh; ++y) {
    const float* row = phases + y * l.row_step;
    const float* d = dy + y * s.ow;
    for (int64_t x0 = 0; x0 < whole; x0 += kLanes) {
      const Vec v = Load(d + x0);
      for (int g = 0; g < G; ++g) acc[g] += v * Load(row + offset[g] + x0);
    }
    for (int64_t x0 = whole; x0 < s.ow; ++x0)
      for (int g = 0; g < G; ++g) rest[g] += d[x0] * row[offset[g] + x0];
  }
  for (int g = 0; g < G; ++g) {
    acc[g][0] += rest[g];
    acc_out[first + g] = acc[g];
  }
}

// The same in one flat sweep of dy laid out `width` apart with zeros between its rows (`flat`):
// for a plane whose inputs are all finite, so the zeros meet only finite numbers.
template <int G>
void WeightGradFlat(const ConvShape& s, const Layout& l, const float* phases, const float* flat,
                    int64_t first, Vec* acc_out) {
  Vec acc[G];
  for (int g = 0; g < G; ++g) acc[g] = acc_out[first + g];
  const int64_t* offset = l.taps.data() + first;
  for (int64_t q = 0; q < l.positions; q += kLanes) {
    const Vec v = Load(flat + q);
    for (int g = 0; g < G; ++g) acc[g] += v * Load(phases + offset[g] + q);
  }
  for (int g = 0; g < G; ++g) acc_out[first + g] = acc[g];
}

using GroupFn = void (*)(const ConvShape&, const Layout&, const float*, const float*, int64_t,
                         Vec*);

template <int... G>
constexpr std::array<GroupFn, sizeof...(G)> RowFns(std::integer_sequence<int, G...>) {
  return {WeightGradRows<G + 1>...};
}

template <int... G>
constexpr std::array<GroupFn, sizeof...(G)> FlatFns(std::integer_sequence<int, G...>) {
  return {WeightGradFlat<G + 1>...};
}

GroupFn GroupFor(int64_t size, bool flat) {
  static constexpr auto kRows = RowFns(std::make_integer_sequence<int, kMaxTapGroup>{});
  static constexpr auto kFlat = FlatFns(std::make_integer_sequence<int, kMaxTapGroup>{});
  return (flat ? kFlat : kRows)[size - 1];
}

// Items per ParallelFor task: at least ~50k multiply-adds each.
int64_t Grain(int64_t work_per_item) {
  return std::max<int64_t>(1, 50000 / std::max<int64_t>(work_per_item, 1));
}

// Floats of ScatterPlane's dy buffer.
int64_t RowsFloats(const Layout& l) { return l.flat ? l.reach + l.plane : l.shift + l.span; }

}  // namespace

bool DepthwiseConvApplies(const ConvShape& s) {
  if (s.c < 2 || s.groups != s.c || s.o % s.c != 0) return false;
  for (int64_t v : {PaddedHeight(s), PaddedWidth(s), s.kh, s.kw, s.stride[0], s.stride[1],
                    s.dilation[0], s.dilation[1], s.oh, s.ow})
    if (v > kMaxSide) return false;
  return ScratchFloats(LayoutSizes(s)) <= kMaxScratchFloats;
}

bool DepthwiseWeightGradPays(const ConvShape& s) { return s.oh * s.ow >= 64 || s.kh * s.kw > 9; }

void DepthwiseConvF32(const ConvShape& s, const float* x, const float* w, const float* bias,
                      float* out) {
  if (DepthwiseBlockedApplies(s) && DepthwiseBlockedPays(s, DepthwisePass::kForward)) {
    DepthwiseBlockedF32(s, x, w, bias, out);
    return;
  }
  const Layout l = MakeLayout(s);
  const int64_t multiplier = s.o / s.c, taps = s.kh * s.kw;
  const int64_t in_plane = s.h * s.w, out_plane = s.oh * s.ow;
  ParallelFor(s.n * s.c, Grain(multiplier * out_plane * taps), [&](int64_t begin, int64_t end) {
    std::vector<float> phases(static_cast<size_t>(ScratchFloats(l)));  // zeroed: the padding
    std::vector<float> sweep(static_cast<size_t>(l.flat ? l.positions : RoundUp(s.ow, kChunk)));
    for (int64_t t = begin; t < end; ++t) {
      FillPhases(s, l, x + t * in_plane, phases.data());
      const int64_t n = t / s.c, c = t % s.c;
      for (int64_t k = 0; k < multiplier; ++k) {
        const int64_t oc = c * multiplier + k;
        ForwardPlane(s, l, phases.data(), w + oc * taps, bias ? bias + oc : nullptr, sweep.data(),
                     out + (n * s.o + oc) * out_plane);
      }
    }
  });
}

void DepthwiseConvBackwardDataF32(const ConvShape& s, const float* dy, const float* w, float* dx) {
  const int64_t multiplier = s.o / s.c, taps = s.kh * s.kw;
  // The blocked loops gather through dy's zero padding: only for weights that are all finite.
  if (DepthwiseBlockedApplies(s) && DepthwiseBlockedPays(s, DepthwisePass::kInputGrad) &&
      AllFinite(w, s.o * taps) && DepthwiseBlockedBackwardDataF32(s, dy, w, dx))
    return;
  const Layout l = MakeLayout(s);
  const int64_t in_plane = s.h * s.w, out_plane = s.oh * s.ow;
  ParallelFor(s.n * s.c, Grain(multiplier * out_plane * taps), [&](int64_t begin, int64_t end) {
    std::vector<float> phases(static_cast<size_t>(ScratchFloats(l)));
    std::vector<float> rows(static_cast<size_t>(RowsFloats(l)));  // zero but where dy goes
    for (int64_t t = begin; t < end; ++t) {
      std::fill(phases.begin(), phases.end(), 0.0f);
      const int64_t n = t / s.c, c = t % s.c;
      for (int64_t k = 0; k < multiplier; ++k) {
        const int64_t oc = c * multiplier + k;
        const float* plane = dy + (n * s.o + oc) * out_plane;
        if (AllFinite(w + oc * taps, taps)) {
          ScatterPlane(s, l, plane, w + oc * taps, rows.data(), phases.data());
        } else {
          ScatterPlaneExact(s, l, plane, w + oc * taps, phases.data());
        }
      }
      TakePhases(s, l, phases.data(), dx + t * in_plane);
    }
  });
}

void DepthwiseConvBackwardWeightsF32(const ConvShape& s, const float* dy, const float* x,
                                     float* dw) {
  if (DepthwiseBlockedApplies(s) && DepthwiseBlockedPays(s, DepthwisePass::kWeightGrad)) {
    DepthwiseBlockedBackwardWeightsF32(s, dy, x, dw);
    return;
  }
  const Layout l = MakeLayout(s);
  const int64_t multiplier = s.o / s.c, taps = s.kh * s.kw;
  const int64_t in_plane = s.h * s.w, out_plane = s.oh * s.ow;
  // One output channel per item: its sums run over every image, so no two tasks share one. The
  // float lanes go into double sums every kFlushPositions products or so.
  constexpr int64_t kFlushPositions = int64_t{1} << 14;
  ParallelFor(s.o, Grain(s.n * out_plane * taps), [&](int64_t begin, int64_t end) {
    std::vector<float> phases(static_cast<size_t>(ScratchFloats(l)));
    std::vector<float> flat(static_cast<size_t>(l.flat ? l.positions : 0));  // dy, width apart
    std::vector<Vec> acc(static_cast<size_t>(taps));
    std::vector<double> sums(static_cast<size_t>(taps));
    auto flush = [&] {
      for (int64_t t = 0; t < taps; ++t) {
        for (int64_t lane = 0; lane < kLanes; ++lane) sums[t] += acc[t][lane];
        acc[t] = Vec{};
      }
    };
    for (int64_t oc = begin; oc < end; ++oc) {
      std::fill(sums.begin(), sums.end(), 0.0);
      std::fill(acc.begin(), acc.end(), Vec{});
      const int64_t c = oc / multiplier;
      int64_t pending = 0;
      for (int64_t n = 0; n < s.n; ++n) {
        const float* image = x + (n * s.c + c) * in_plane;
        const float* plane = dy + (n * s.o + oc) * out_plane;
        FillPhases(s, l, image, phases.data());
        const bool sweep = l.flat && AllFinite(image, in_plane);
        if (sweep)
          for (int64_t y = 0; y < s.oh; ++y)
            CopyRow(flat.data() + y * l.width, plane + y * s.ow, s.ow);
        for (int64_t first = 0; first < taps; first += kMaxTapGroup)
          GroupFor(std::min<int64_t>(kMaxTapGroup, taps - first), sweep)(
              s, l, phases.data(), sweep ? flat.data() : plane, first, acc.data());
        if ((pending += out_plane) >= kFlushPositions) flush(), pending = 0;
      }
      flush();
      for (int64_t t = 0; t < taps; ++t) dw[oc * taps + t] = static_cast<float>(sums[t]);
    }
  });
}

}  // namespace kiln::cpu
