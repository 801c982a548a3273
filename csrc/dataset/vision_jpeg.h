// vision_jpeg.h - JPEG decoding through libjpeg-turbo: the header, a whole image or a window of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::dataset::vision {

// The most pixels one decode may produce (16384 x 16384): a header can claim 65500 x 65500,
// which would allocate 12 GB before a single row of data is read.
constexpr int64_t kMaxDecodePixels = int64_t{1} << 28;

// Whether `data` starts like a JPEG (SOI marker): other formats go to the Python decoder.
bool LooksLikeJpeg(const uint8_t* data, size_t size);

struct JpegInfo {
  int64_t height = 0, width = 0;
  bool cmyk = false;  // CMYK or YCCK: libjpeg cannot convert these to RGB
};

// A region of the full-size image, rows [top, top + height) and columns [left, left + width).
struct Window {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// The decoded RGB pixels (HWC uint8, rows of `width * 3` bytes) of `window`, after libjpeg-turbo's
// DCT scaling by 1/`scale_denom` (1, 2, 4 or 8): the window is in full-size coordinates and the
// result covers its scaled extent (rounded outward), so it is window / scale_denom in size. Row r
// of the result starts at pixels[r * stride + offset] (libjpeg decodes whole iMCUs across).
struct Decoded {
  std::vector<uint8_t> pixels;
  int64_t height = 0, width = 0;
  size_t offset = 0, stride = 0;
};

// Throws RuntimeError "<who>: ..." on anything libjpeg refuses or warns about (a corrupt or
// truncated stream), never aborting the process; `who` names the op for the message.
JpegInfo ReadJpegInfo(const uint8_t* data, size_t size, const std::string& who);
Decoded DecodeJpeg(const uint8_t* data, size_t size, const Window& window, int scale_denom,
                   const std::string& who);

}  // namespace kiln::dataset::vision
