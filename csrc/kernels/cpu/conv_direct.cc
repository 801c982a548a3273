// conv_direct.cc - float32 convolution for few channels, by direct loops over flat image rows.
//
// Each band of an image's rows is copied into a zero-padded scratch of row width Wp. An output
// at flat position q = oh * Wp + ow then reads its tap (c, i, j) at q + c * plane + i * dh * Wp +
// j * dw: one offset per tap for every position, so a run of consecutive positions is one vector
// load per tap, whatever the row boundaries. The positions past a row's last output (ow >= OW)
// are computed and dropped; that waste is (Wp - OW) / Wp. A block of two vectors of positions by
// up to 8 output channels (6 without AVX-512) accumulates in registers; the weights are repacked
// tap-major so each tap reads its block's weights from one cache line. A band is as many output
// rows as keep its scratch in L2 (with the kh - 1 rows below it that its taps also read), so a
// large image is many bands, split over threads even when it is the only one.
#include "kernels/cpu/conv_direct.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/vec.h"

namespace kiln::cpu {
namespace {

// One native vector register (vec.h). The block of kVecs x kMaxChannelBlock accumulators, the
// kVecs inputs and a broadcast weight fit the register file: 19 of AVX-512's 32 registers, 15 of
// AVX2's 16.
constexpr int kVecBytes = kNativeVecBytes;
constexpr int64_t kMaxChannelBlock = kVecBytes == 64 ? 8 : 6;
using Vec = FloatVec<kVecBytes>;
constexpr int64_t kLanes = kVecBytes / sizeof(float);
constexpr int kVecs = 2;                        // vectors of positions per block
constexpr int64_t kPositions = kLanes * kVecs;  // positions per block
// A band's scratch (input rows and output rows) aims at this many floats: 512 KiB, L2-sized.
constexpr int64_t kBandFloats = int64_t{1} << 17;
// and never exceeds this many (4 MiB), even for a band of one output row.
constexpr int64_t kMaxScratchFloats = int64_t{1} << 20;

inline Vec Load(const float* p) { return LoadVec<Vec>(p); }
inline void Store(float* p, Vec v) { StoreVec(p, v); }

struct Plan {
  int64_t rows, bands;        // output rows per band (the last may have fewer), bands per image
  int64_t hb, wp, plane;      // input rows per band (with the taps' reach), row width, plane size
  int64_t positions;          // rows * wp, rounded up to whole blocks
  int64_t scratch;            // floats of one padded band, with room for the last block's reads
  std::vector<int64_t> taps;  // flat offset of each (c, i, j), in weight order
};

int64_t PaddedWidth(const ConvShape& s) { return s.w + s.pad[2] + s.pad[3]; }
int64_t Reach(const ConvShape& s) { return (s.kh - 1) * s.dilation[0]; }

// Floats of a band of `rows` output rows: c planes of its input rows, and o + 1 of output rows
// (the flat result and the last block's overrun).
int64_t BandFloats(const ConvShape& s, int64_t rows) {
  const int64_t wp = PaddedWidth(s);
  return s.c * (rows + Reach(s)) * wp + (s.o + 1) * rows * wp + kPositions;
}

Plan MakePlan(const ConvShape& s) {
  Plan p;
  p.wp = PaddedWidth(s);
  const int64_t per_row = (s.c + s.o + 1) * p.wp;
  const int64_t fit = (kBandFloats - s.c * Reach(s) * p.wp - kPositions) / per_row;
  p.rows = std::clamp<int64_t>(fit, 1, std::max<int64_t>(s.oh, 1));
  p.bands = std::max<int64_t>(1, (s.oh + p.rows - 1) / p.rows);
  p.hb = p.rows + Reach(s);
  p.plane = p.hb * p.wp;
  p.positions = (p.rows * p.wp + kPositions - 1) / kPositions * kPositions;
  p.scratch = s.c * p.plane + p.positions;  // the largest tap offset is below c * plane
  p.taps.reserve(static_cast<size_t>(s.c * s.kh * s.kw));
  for (int64_t c = 0; c < s.c; ++c)
    for (int64_t i = 0; i < s.kh; ++i)
      for (int64_t j = 0; j < s.kw; ++j)
        p.taps.push_back(c * p.plane + i * s.dilation[0] * p.wp + j * s.dilation[1]);
  return p;
}

// The weights of each block of output channels as [tap][channel in block], blocks of
// kMaxChannelBlock (the last may be short, and is packed at its own width).
std::vector<float> PackWeights(const ConvShape& s, const float* w) {
  const int64_t taps = s.c * s.kh * s.kw;
  std::vector<float> packed(static_cast<size_t>(s.o * taps));
  for (int64_t o0 = 0; o0 < s.o; o0 += kMaxChannelBlock) {
    const int64_t width = std::min(kMaxChannelBlock, s.o - o0);
    float* block = packed.data() + o0 * taps;
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t b = 0; b < width; ++b) block[t * width + b] = w[(o0 + b) * taps + t];
  }
  return packed;
}

// One block of positions for `Width` output channels: out[b][0, kPositions) = taps + bias.
template <int Width>
void PositionBlock(const float* image, const std::vector<int64_t>& taps, const float* weights,
                   const float* bias, float* out, int64_t out_stride) {
  Vec acc[Width][kVecs] = {};
  const int64_t* offset = taps.data();
  const int64_t count = static_cast<int64_t>(taps.size());
  for (int64_t t = 0; t < count; ++t, weights += Width) {
    const float* src = image + offset[t];
    Vec in[kVecs];
    for (int v = 0; v < kVecs; ++v) in[v] = Load(src + v * kLanes);
#pragma GCC unroll 8
    for (int b = 0; b < Width; ++b) {
      const float wb = weights[b];
      for (int v = 0; v < kVecs; ++v) acc[b][v] += wb * in[v];
    }
  }
  // The bias is added last, as a separate add after the convolution would: a graph that splits
  // or fuses the bias gives the same bits.
  for (int b = 0; b < Width; ++b)
    for (int v = 0; v < kVecs; ++v)
      Store(out + b * out_stride + v * kLanes, bias ? acc[b][v] + bias[b] : acc[b][v]);
}

using BlockFn = void (*)(const float*, const std::vector<int64_t>&, const float*, const float*,
                         float*, int64_t);

BlockFn BlockFor(int64_t width) {
  static constexpr BlockFn kFns[8] = {PositionBlock<1>, PositionBlock<2>, PositionBlock<3>,
                                      PositionBlock<4>, PositionBlock<5>, PositionBlock<6>,
                                      PositionBlock<7>, PositionBlock<8>};
  static_assert(kMaxChannelBlock <= 8);
  return kFns[width - 1];
}

// Copies the input rows of the band that starts at output row y0 from image x (c, h, w) into
// the scratch, at their padding offsets; rows above or below the image are zeroed (the scratch
// is reused for the next band). The left and right padding is never written, so it stays as
// zeroed when the scratch was made.
void PadBand(const ConvShape& s, const Plan& p, const float* x, int64_t y0, float* image) {
  for (int64_t c = 0; c < s.c; ++c)
    for (int64_t i = 0; i < p.hb; ++i) {
      float* row = image + c * p.plane + i * p.wp;
      const int64_t y = y0 + i - s.pad[0];
      if (y >= 0 && y < s.h) {
        CopyRow(row + s.pad[2], x + (c * s.h + y) * s.w, s.w);
      } else {
        std::fill(row, row + p.wp, 0.0f);
      }
    }
}

// Output rows [y0, y0 + rows) of image x into out (o, oh, ow).
void ConvBand(const ConvShape& s, const Plan& p, const float* x, int64_t y0, const float* packed,
              const float* bias, float* image, float* flat, float* out) {
  PadBand(s, p, x, y0, image);
  const int64_t taps = s.c * s.kh * s.kw;
  for (int64_t o0 = 0; o0 < s.o; o0 += kMaxChannelBlock) {
    const int64_t width = std::min(kMaxChannelBlock, s.o - o0);
    const BlockFn block = BlockFor(width);
    for (int64_t q = 0; q < p.positions; q += kPositions)
      block(image + q, p.taps, packed + o0 * taps, bias ? bias + o0 : nullptr,
            flat + o0 * p.positions + q, p.positions);
  }
  const int64_t rows = std::min(p.rows, s.oh - y0);
  for (int64_t o = 0; o < s.o; ++o)  // keep each row's first ow positions
    for (int64_t y = 0; y < rows; ++y)
      CopyRow(out + (o * s.oh + y0 + y) * s.ow, flat + o * p.positions + y * p.wp, s.ow);
}

}  // namespace

bool DirectConvApplies(const ConvShape& s) {
  if (s.groups != 1 || s.stride[0] != 1 || s.stride[1] != 1) return false;
  if (s.o > 32 || s.c * s.kh * s.kw > 400) return false;
  constexpr int64_t kMaxSide = int64_t{1} << 20;  // bounds the products below (pads are free)
  if (s.h + s.pad[0] + s.pad[1] > kMaxSide || PaddedWidth(s) > kMaxSide) return false;
  if (s.kh > kMaxSide || s.dilation[0] > kMaxSide) return false;
  return BandFloats(s, 1) <= kMaxScratchFloats;  // a band of one row fits
}

void DirectConvF32(const ConvShape& s, const float* x, const float* w, const float* bias,
                   float* out) {
  const Plan plan = MakePlan(s);
  const std::vector<float> packed = PackWeights(s, w);
  const int64_t in_image = s.c * s.h * s.w, out_image = s.o * s.oh * s.ow;
  const int64_t band_work = std::max<int64_t>(s.o * plan.positions * s.c * s.kh * s.kw, 1);
  const int64_t grain = std::max<int64_t>(1, 100000 / band_work);  // ~100k FMAs per task at least
  ParallelFor(s.n * plan.bands, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> image(static_cast<size_t>(plan.scratch));  // zeroed: the padding
    std::vector<float> flat(static_cast<size_t>(s.o * plan.positions));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / plan.bands, y0 = t % plan.bands * plan.rows;
      ConvBand(s, plan, x + n * in_image, y0, packed.data(), bias, image.data(), flat.data(),
               out + n * out_image);
    }
  });
}

bool DirectConvBackwardDataF32(const ConvShape& s, const float* dy, const float* w, float* dx) {
  if (s.groups != 1 || s.stride[0] != 1 || s.stride[1] != 1) return false;
  const ConvShape t = UnitStrideInputGradShape(s);
  for (int64_t pad : t.pad)
    if (pad < 0) return false;  // padding past the kernel's reach: rows no tap reads
  if (!DirectConvApplies(t)) return false;
  std::vector<float> flipped(static_cast<size_t>(s.c * s.o * s.kh * s.kw));
  for (int64_t o = 0; o < s.o; ++o)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t i = 0; i < s.kh; ++i)
        for (int64_t j = 0; j < s.kw; ++j)
          flipped[((c * s.o + o) * s.kh + (s.kh - 1 - i)) * s.kw + (s.kw - 1 - j)] =
              w[((o * s.c + c) * s.kh + i) * s.kw + j];
  DirectConvF32(t, dy, flipped.data(), nullptr, dx);
  return true;
}

}  // namespace kiln::cpu
