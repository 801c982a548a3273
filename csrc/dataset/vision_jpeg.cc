// vision_jpeg.cc - libjpeg-turbo behind setjmp: errors and warnings become exceptions, not aborts.
#include "dataset/vision_jpeg.h"

// clang-format off: jpeglib.h needs <cstdio> (FILE) before it.
#include <csetjmp>
#include <cstdio>
#include <jpeglib.h>
// clang-format on

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace kiln::dataset::vision {
namespace {

// libjpeg reports an error by calling error_exit, which must not return: it jumps back to the
// setjmp of the phase that called libjpeg. Warnings (emit_message at level -1) are corrupt or
// missing data ("premature end of JPEG file"): they jump too, so a truncated file is an error
// instead of an image padded with grey.
struct ErrorState {
  jpeg_error_mgr mgr;  // first: libjpeg's err pointer is cast back to ErrorState
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void OnError(j_common_ptr cinfo) {
  auto* state = reinterpret_cast<ErrorState*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, state->message);
  std::longjmp(state->jump, 1);
}

void OnMessage(j_common_ptr cinfo, int level) {
  if (level < 0) OnError(cinfo);  // a warning: the data is damaged
}

void Silent(j_common_ptr) {}

// One decompression. The phases below call libjpeg between a setjmp and its return and hold
// only trivially destructible locals, so the longjmp out of libjpeg skips no destructor; this
// object, owned by the caller, is released by its destructor whatever happened.
struct Session {
  jpeg_decompress_struct cinfo{};
  ErrorState err{};
  bool created = false;

  Session() {
    cinfo.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = OnError;
    err.mgr.emit_message = OnMessage;
    err.mgr.output_message = Silent;
  }
  ~Session() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

bool BeginPhase(Session* s, const uint8_t* data, size_t size) {
  if (setjmp(s->err.jump)) return false;
  jpeg_create_decompress(&s->cinfo);
  s->created = true;
  jpeg_mem_src(&s->cinfo, data, static_cast<unsigned long>(size));  // NOLINT: libjpeg's type
  jpeg_read_header(&s->cinfo, TRUE);
  return true;
}

// Starts decompression at 1/denom scale, crops each output row to [*x, *x + *w) (libjpeg widens
// it to whole iMCUs and returns the widened one) and skips the rows above `top`.
bool StartPhase(Session* s, int denom, JDIMENSION top, JDIMENSION* x, JDIMENSION* w) {
  if (setjmp(s->err.jump)) return false;
  s->cinfo.out_color_space = JCS_RGB;
  s->cinfo.scale_num = 1;
  s->cinfo.scale_denom = static_cast<unsigned>(denom);
  jpeg_start_decompress(&s->cinfo);
  if (*w < s->cinfo.output_width) jpeg_crop_scanline(&s->cinfo, x, w);
  if (top > 0 && jpeg_skip_scanlines(&s->cinfo, top) != top) OnError((j_common_ptr)&s->cinfo);
  return true;
}

bool ReadPhase(Session* s, JDIMENSION rows, uint8_t* out, size_t stride) {
  if (setjmp(s->err.jump)) return false;
  for (JDIMENSION r = 0; r < rows; ++r) {
    JSAMPROW row = out + r * stride;
    if (jpeg_read_scanlines(&s->cinfo, &row, 1) != 1) OnError((j_common_ptr)&s->cinfo);
  }
  // The rows below the window are not needed: abort instead of decoding them.
  jpeg_abort_decompress(&s->cinfo);
  return true;
}

[[noreturn]] void Fail(const Session& s, const std::string& who) {
  Throw(ErrorKind::Runtime, who, ": cannot decode the JPEG data: ", s.err.message);
}

void Begin(Session* s, const uint8_t* data, size_t size, const std::string& who) {
  KILN_CHECK(LooksLikeJpeg(data, size), Runtime, who, ": the data is not a JPEG image");
  if (!BeginPhase(s, data, size)) Fail(*s, who);
  const int64_t h = s->cinfo.image_height, w = s->cinfo.image_width;
  KILN_CHECK(h > 0 && w > 0, Runtime, who, ": the JPEG header gives an empty image");
  KILN_CHECK(h <= kMaxDecodePixels / w, Runtime, who, ": the JPEG image is ", h, " x ", w,
             " pixels, more than the limit of ", kMaxDecodePixels);
}

bool IsCmyk(const Session& s) {
  return s.cinfo.jpeg_color_space == JCS_CMYK || s.cinfo.jpeg_color_space == JCS_YCCK;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

bool LooksLikeJpeg(const uint8_t* data, size_t size) {
  return size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

JpegInfo ReadJpegInfo(const uint8_t* data, size_t size, const std::string& who) {
  Session s;
  Begin(&s, data, size, who);
  return {static_cast<int64_t>(s.cinfo.image_height), static_cast<int64_t>(s.cinfo.image_width),
          IsCmyk(s)};
}

Decoded DecodeJpeg(const uint8_t* data, size_t size, const Window& window, int scale_denom,
                   const std::string& who) {
  KILN_CHECK(scale_denom == 1 || scale_denom == 2 || scale_denom == 4 || scale_denom == 8, Value,
             who, ": JPEG scale 1/", scale_denom, " is not 1, 1/2, 1/4 or 1/8");
  Session s;
  Begin(&s, data, size, who);
  KILN_CHECK(!IsCmyk(s), Runtime, who,
             ": CMYK JPEG images are not supported by the native decoder");
  const int64_t full_h = s.cinfo.image_height, full_w = s.cinfo.image_width;
  KILN_CHECK(window.top >= 0 && window.left >= 0 && window.height > 0 && window.width > 0 &&
                 window.height <= full_h - window.top && window.width <= full_w - window.left,
             Value, who, ": window (", window.top, ", ", window.left, ", ", window.height, ", ",
             window.width, ") is outside the ", full_h, " x ", full_w, " image");
  // The window at the output scale (libjpeg's scaled size is the full size divided, rounded up).
  const int64_t d = scale_denom;
  const int64_t out_h = CeilDiv(full_h, d), out_w = CeilDiv(full_w, d);
  const int64_t top = window.top / d, left = window.left / d;
  const int64_t bottom = std::min(out_h, CeilDiv(window.top + window.height, d));
  const int64_t right = std::min(out_w, CeilDiv(window.left + window.width, d));
  // One column more on each side: libjpeg's fancy (smooth) chroma upsampling treats the edge of
  // a cropped row as the image's edge, so the edge column differs from a whole decode; the
  // column next to it does not.
  const int64_t margin_left = std::max<int64_t>(0, left - 1);
  auto x = static_cast<JDIMENSION>(margin_left);
  auto w = static_cast<JDIMENSION>(std::min(out_w, right + 1) - margin_left);
  if (!StartPhase(&s, d, static_cast<JDIMENSION>(top), &x, &w)) Fail(s, who);
  KILN_CHECK(s.cinfo.output_components == 3 && x <= left && x + w >= right, Runtime, who,
             ": libjpeg returned an unexpected layout");
  Decoded out;
  out.height = bottom - top;
  out.width = right - left;
  const size_t stride = static_cast<size_t>(w) * 3;  // w <= 65500: no overflow
  out.pixels.resize(stride * static_cast<size_t>(out.height));
  if (!ReadPhase(&s, static_cast<JDIMENSION>(out.height), out.pixels.data(), stride)) Fail(s, who);
  // The columns libjpeg added to reach whole iMCUs stay in the buffer: the window starts
  // `offset` bytes into each row.
  out.offset = static_cast<size_t>(left - x) * 3;
  out.stride = stride;
  return out;
}

}  // namespace kiln::dataset::vision
