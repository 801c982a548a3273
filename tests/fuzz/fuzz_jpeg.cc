// fuzz_jpeg.cc - libFuzzer target: bytes -> the dataset's native JPEG decode of a crop window.
//
// The first 5 bytes choose the window (top, left, height, width as fractions of the image the
// header gives) and the DCT scale; the rest is the JPEG data. A refused input is a kiln::Error
// (RuntimeError in Python); anything else (a crash, a sanitizer report, a result of the wrong
// size) is a finding. Seeds: tests/fuzz/corpus_jpeg. Run: `FUZZ_TARGET=jpeg scripts/fuzz_ir.sh N`.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "dataset/vision_jpeg.h"

namespace vision = kiln::dataset::vision;

namespace {

// A position in [0, n) from a byte.
int64_t Scaled(uint8_t b, int64_t n) { return n * b / 256; }

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const uint8_t* jpeg = data + 5;
  const size_t length = size - 5;
  try {
    const vision::JpegInfo info = vision::ReadJpegInfo(jpeg, length, "fuzz");
    if (info.cmyk) return 0;
    vision::Window w;
    w.top = Scaled(data[0], info.height);
    w.left = Scaled(data[1], info.width);
    w.height = 1 + Scaled(data[2], info.height - w.top);
    w.width = 1 + Scaled(data[3], info.width - w.left);
    const int denom = 1 << (data[4] % 4);
    const vision::Decoded out = vision::DecodeJpeg(jpeg, length, w, denom, "fuzz");
    const int64_t want_h =
        std::min(CeilDiv(info.height, denom), CeilDiv(w.top + w.height, denom)) - w.top / denom;
    const int64_t want_w =
        std::min(CeilDiv(info.width, denom), CeilDiv(w.left + w.width, denom)) - w.left / denom;
    if (out.height != want_h || out.width != want_w ||
        out.pixels.size() < out.stride * static_cast<size_t>(out.height) ||
        out.offset + static_cast<size_t>(out.width) * 3 > out.stride) {
      std::fprintf(stderr, "finding: window %lldx%lld decoded as %lldx%lld\n",
                   static_cast<long long>(want_h), static_cast<long long>(want_w),
                   static_cast<long long>(out.height), static_cast<long long>(out.width));
      std::abort();
    }
  } catch (const kiln::Error&) {
    // refused with a message: what a bad file should get
  }
  return 0;
}
