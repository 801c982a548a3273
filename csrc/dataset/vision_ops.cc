// vision_ops.cc - the native vision chain: fused decode+crop, OpenCV resizing, one-pass normalize.
#include "dataset/vision_ops.h"

#include <cmath>
#include <cstring>
#include <iterator>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <utility>

#include "core/error.h"
#include "dataset/vision_jpeg.h"

namespace kiln::dataset::vision {
namespace {

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// An image between two ops: HWC pixels (uint8 after decoding, float32 after Rescale or
// Normalize) and flips drawn but not yet done, which the next op that moves pixels applies
// on the way (Normalize and HWC2CHW read the source mirrored instead of flipping first).
struct Image {
  Decoded decoded;  // owns the pixels `mat` views right after a decode
  cv::Mat mat;
  bool hflip = false, vflip = false;
  Tensor result;  // set by the op that writes the chain's output tensor itself
  const Allocate* allocate = nullptr;

  Tensor NewOutput(const Shape& shape, DType dtype) const {
    return allocate && *allocate ? (*allocate)(shape, dtype) : Tensor::Empty(shape, dtype);
  }
};

void CheckPixels(int64_t h, int64_t w, const char* who) {
  KILN_CHECK(h > 0 && w > 0 && h <= kMaxDecodePixels / w, Runtime, who, ": output size ", h, " x ",
             w, " is empty or larger than ", kMaxDecodePixels, " pixels");
}

void ApplyFlips(Image& im) {
  if (!im.hflip && !im.vflip) return;
  cv::Mat out;
  cv::flip(im.mat, out, im.hflip && im.vflip ? -1 : im.hflip ? 1 : 0);
  im.mat = std::move(out);
  im.hflip = im.vflip = false;
}

void ResizeTo(Image& im, int64_t h, int64_t w, int interpolation, const char* who) {
  CheckPixels(h, w, who);
  cv::Mat out;
  cv::resize(im.mat, out, cv::Size(static_cast<int>(w), static_cast<int>(h)), 0, 0, interpolation);
  im.mat = std::move(out);
}

struct Region {
  int64_t top, left, height, width;
};

// The region RandomResizedCrop takes from an h x w image: the Python transform's algorithm
// (round half to even, like Python's round), drawing from the row's generator.
Region ResizedCropRegion(const OpSpec& op, int64_t h, int64_t w, RowRandom& random) {
  const double area = static_cast<double>(h) * static_cast<double>(w);
  const double log_lo = std::log(op.reals[2]), log_hi = std::log(op.reals[3]);
  for (int64_t attempt = 0; attempt < op.ints[2]; ++attempt) {
    const double target = area * random.Uniform(op.reals[0], op.reals[1]);
    const double aspect = std::exp(random.Uniform(log_lo, log_hi));
    const auto cw = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));
    const auto ch = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
    if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
      const int64_t top = random.Integer(0, h - ch);
      return {top, random.Integer(0, w - cw), ch, cw};
    }
  }
  const double in_ratio = static_cast<double>(w) / static_cast<double>(h);
  int64_t cw = w, ch = h;
  if (in_ratio < op.reals[2])
    ch = static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / op.reals[2]));
  else if (in_ratio > op.reals[3])
    cw = static_cast<int64_t>(std::nearbyint(static_cast<double>(h) * op.reals[3]));
  return {(h - ch) / 2, (w - cw) / 2, ch, cw};
}

Region RandomCropRegion(const OpSpec& op, int64_t h, int64_t w, RowRandom& random) {
  KILN_CHECK(h >= op.ints[0] && w >= op.ints[1], Runtime, "RandomCrop: crop size (", op.ints[0],
             ", ", op.ints[1], ") is larger than the image (", h, ", ", w,
             "); set pad_if_needed=True");
  const int64_t top = random.Integer(0, h - op.ints[0]);
  return {top, random.Integer(0, w - op.ints[1]), op.ints[0], op.ints[1]};
}

void Crop(Image& im, const Region& r) {
  im.mat = im.mat(cv::Rect(static_cast<int>(r.left), static_cast<int>(r.top),
                           static_cast<int>(r.width), static_cast<int>(r.height)));
}

void CenterCrop(Image& im, const OpSpec& op) {
  const int64_t ch = op.ints[0], cw = op.ints[1];
  const int64_t ph = std::max<int64_t>(0, ch - im.mat.rows);
  const int64_t pw = std::max<int64_t>(0, cw - im.mat.cols);
  if (ph || pw) {  // smaller than the crop: zero borders first, the odd pixel on top and left
    CheckPixels(im.mat.rows + ph, im.mat.cols + pw, "CenterCrop");
    cv::Mat out;
    cv::copyMakeBorder(im.mat, out, static_cast<int>(ph - ph / 2), static_cast<int>(ph / 2),
                       static_cast<int>(pw - pw / 2), static_cast<int>(pw / 2), cv::BORDER_CONSTANT,
                       cv::Scalar::all(0));
    im.mat = std::move(out);
  }
  Crop(im, {(im.mat.rows - ch) / 2, (im.mat.cols - cw) / 2, ch, cw});
}

// Decode, fused with the crop after it when there is one: the crop's region is drawn from the
// header's size and only that window is decoded, at 1/2, 1/4 or 1/8 scale when the window is
// at least that many times RandomResizedCrop's output. Returns how many ops it ran.
size_t DecodeStep(const Tensor& encoded, const std::vector<OpSpec>& ops, Image& im,
                  RowRandom& random) {
  const auto* data = static_cast<const uint8_t*>(encoded.raw_data());
  const auto size = static_cast<size_t>(encoded.numel());
  if (!LooksLikeJpeg(data, size)) throw NotNative("not a JPEG");
  const JpegInfo info = ReadJpegInfo(data, size, "Decode");
  if (info.cmyk) throw NotNative("a CMYK JPEG");
  const OpSpec* next = ops.size() > 1 ? &ops[1] : nullptr;
  Window window{0, 0, info.height, info.width};
  int denom = 1;
  size_t ran = 1;
  if (next && next->kind == OpKind::kRandomResizedCrop) {
    const Region r = ResizedCropRegion(*next, info.height, info.width, random);
    window = {r.top, r.left, r.height, r.width};
    while (denom < 8 && r.height / (denom * 2) >= next->ints[0] &&
           r.width / (denom * 2) >= next->ints[1])
      denom *= 2;
    ran = 2;
  } else if (next && next->kind == OpKind::kRandomCrop) {
    const Region r = RandomCropRegion(*next, info.height, info.width, random);
    window = {r.top, r.left, r.height, r.width};
    ran = 2;
  } else if (next && next->kind == OpKind::kCenterCrop && info.height >= next->ints[0] &&
             info.width >= next->ints[1]) {
    window = {(info.height - next->ints[0]) / 2, (info.width - next->ints[1]) / 2, next->ints[0],
              next->ints[1]};
    ran = 2;
  }
  im.decoded = DecodeJpeg(data, size, window, denom, "Decode");
  im.mat = cv::Mat(static_cast<int>(im.decoded.height), static_cast<int>(im.decoded.width), CV_8UC3,
                   im.decoded.pixels.data() + im.decoded.offset, im.decoded.stride);
  if (ran == 2 && next->kind == OpKind::kRandomResizedCrop)
    ResizeTo(im, next->ints[0], next->ints[1], static_cast<int>(next->ints[3]),
             "RandomResizedCrop");
  return ran;
}

// (pixel - mean) / std per channel into float32, reading the source mirrored for pending
// flips, written HWC or (chw) CHW: flip, normalize and HWC2CHW in one pass.
template <typename T>
void NormalizeRows(const Image& im, const OpSpec& op, bool chw, float* out) {
  const int h = im.mat.rows, w = im.mat.cols, c = im.mat.channels();
  const size_t n = op.reals.size() / 2;
  float mean[4], stdv[4];
  for (int k = 0; k < c; ++k) {
    mean[k] = static_cast<float>(op.reals[n == 1 ? 0 : k]);
    stdv[k] = static_cast<float>(op.reals[n + (n == 1 ? 0 : k)]);
  }
  const size_t plane = static_cast<size_t>(h) * w;
  for (int y = 0; y < h; ++y) {
    const T* row = im.mat.ptr<T>(im.vflip ? h - 1 - y : y);
    for (int k = 0; k < c; ++k) {
      float* dst = chw ? out + k * plane + static_cast<size_t>(y) * w
                       : out + static_cast<size_t>(y) * w * c + k;
      const size_t step = chw ? 1 : c;
      for (int x = 0; x < w; ++x) {
        const int sx = im.hflip ? w - 1 - x : x;
        dst[x * step] = (static_cast<float>(row[sx * c + k]) - mean[k]) / stdv[k];
      }
    }
  }
}

void Normalize(Image& im, const OpSpec& op, bool chw) {
  const int64_t h = im.mat.rows, w = im.mat.cols, c = im.mat.channels();
  const auto n = static_cast<int64_t>(op.reals.size() / 2);
  KILN_CHECK(n == 1 || n == c, Runtime, "Normalize: ", n, " means for an image of ", c,
             " channels (shape (", h, ", ", w, ", ", c, "))");
  Tensor out;
  cv::Mat hwc;
  float* dst;
  if (chw) {
    out = im.NewOutput(Shape{c, h, w}, DType::Float32);
    dst = static_cast<float*>(out.raw_data());
  } else {
    hwc.create(static_cast<int>(h), static_cast<int>(w), CV_32FC(static_cast<int>(c)));
    dst = hwc.ptr<float>();
  }
  if (im.mat.depth() == CV_8U)
    NormalizeRows<uint8_t>(im, op, chw, dst);
  else
    NormalizeRows<float>(im, op, chw, dst);
  im.hflip = im.vflip = false;
  if (chw)
    im.result = std::move(out);
  else
    im.mat = std::move(hwc);
}

DType DTypeOf(const cv::Mat& m) { return m.depth() == CV_8U ? DType::UInt8 : DType::Float32; }

// The image as a tensor: HWC, or (chw) each channel a plane.
Tensor ToTensor(const Image& im, bool chw) {
  const int64_t h = im.mat.rows, w = im.mat.cols, c = im.mat.channels();
  Tensor out = im.NewOutput(chw ? Shape{c, h, w} : Shape{h, w, c}, DTypeOf(im.mat));
  char* dst = static_cast<char*>(out.raw_data());
  const size_t row_bytes = static_cast<size_t>(w) * c * im.mat.elemSize1();
  if (!chw) {
    for (int y = 0; y < h; ++y) std::memcpy(dst + y * row_bytes, im.mat.ptr(y), row_bytes);
    return out;
  }
  std::vector<cv::Mat> planes;
  for (int64_t k = 0; k < c; ++k)
    planes.emplace_back(static_cast<int>(h), static_cast<int>(w), im.mat.depth(),
                        dst + k * h * w * im.mat.elemSize1());
  cv::split(im.mat, planes);
  return out;
}

void Step(Image& im, const OpSpec& op, RowRandom& random) {
  switch (op.kind) {
    case OpKind::kResize: {
      ApplyFlips(im);
      int64_t h = op.ints[0], w = op.ints[1];
      if (op.ints[2]) {  // the shorter side to `size`, keeping the aspect ratio
        const double s = static_cast<double>(h), rows = im.mat.rows, cols = im.mat.cols;
        if (rows <= cols)
          w = static_cast<int64_t>(cols * s / rows);
        else
          h = static_cast<int64_t>(rows * s / cols), w = op.ints[0];
      }
      ResizeTo(im, h, w, static_cast<int>(op.ints[3]), "Resize");
      return;
    }
    case OpKind::kRandomResizedCrop:
      ApplyFlips(im);
      Crop(im, ResizedCropRegion(op, im.mat.rows, im.mat.cols, random));
      ResizeTo(im, op.ints[0], op.ints[1], static_cast<int>(op.ints[3]), "RandomResizedCrop");
      return;
    case OpKind::kCenterCrop:
      ApplyFlips(im);
      CenterCrop(im, op);
      return;
    case OpKind::kRandomCrop:
      ApplyFlips(im);
      Crop(im, RandomCropRegion(op, im.mat.rows, im.mat.cols, random));
      return;
    case OpKind::kHorizontalFlip:
      if (random.Uniform(0, 1) < op.reals[0]) im.hflip = !im.hflip;
      return;
    case OpKind::kVerticalFlip:
      if (random.Uniform(0, 1) < op.reals[0]) im.vflip = !im.vflip;
      return;
    case OpKind::kRescale: {
      ApplyFlips(im);
      cv::Mat out;
      im.mat.convertTo(out, CV_32F, op.reals[0], op.reals[1]);
      im.mat = std::move(out);
      return;
    }
    case OpKind::kNormalize:
      Normalize(im, op, false);
      return;
    case OpKind::kHWC2CHW:
      ApplyFlips(im);
      im.result = ToTensor(im, true);
      return;
    case OpKind::kDecode:
      Throw(ErrorKind::Value, "Decode: the image is decoded already");
  }
}

void CheckSpec(const OpSpec& op, size_t position, size_t count) {
  const char* name = OpName(op.kind);
  auto need = [&](size_t ints, size_t reals) {
    KILN_CHECK(op.ints.size() == ints && op.reals.size() == reals, Value, "native ", name,
               ": expected ", ints, " ints and ", reals, " reals");
  };
  KILN_CHECK((op.kind == OpKind::kDecode) == (position == 0), Value,
             "native vision chain: Decode must be its first op and only its first, got ", name,
             " at ", position);
  KILN_CHECK(op.kind != OpKind::kHWC2CHW || position + 1 == count, Value,
             "native vision chain: HWC2CHW must be its last op");
  switch (op.kind) {
    case OpKind::kResize:
    case OpKind::kRandomResizedCrop:
      need(4, op.kind == OpKind::kResize ? 0 : 4);
      KILN_CHECK(op.ints[3] >= cv::INTER_NEAREST && op.ints[3] <= cv::INTER_AREA, Value, name,
                 ": unsupported interpolation ", op.ints[3]);
      KILN_CHECK(op.kind == OpKind::kResize ||
                     (op.ints[2] >= 1 && 0 <= op.reals[0] && op.reals[0] <= op.reals[1] &&
                      0 < op.reals[2] && op.reals[2] <= op.reals[3]),
                 Value, name, ": bad scale, ratio or max_attempts");
      break;
    case OpKind::kCenterCrop:
    case OpKind::kRandomCrop:
      need(2, 0);
      break;
    case OpKind::kHorizontalFlip:
    case OpKind::kVerticalFlip:
      need(0, 1);
      break;
    case OpKind::kRescale:
      need(0, 2);
      break;
    case OpKind::kNormalize:
      KILN_CHECK(
          op.ints.empty() && !op.reals.empty() && op.reals.size() % 2 == 0 && op.reals.size() <= 8,
          Value, "native Normalize: expected 1 to 4 means and as many stds");
      for (size_t k = op.reals.size() / 2; k < op.reals.size(); ++k)
        KILN_CHECK(op.reals[k] > 0, Value, "Normalize: std must be positive");
      break;
    default:
      need(0, 0);
  }
  if (op.kind == OpKind::kResize || op.kind == OpKind::kRandomResizedCrop ||
      op.kind == OpKind::kCenterCrop || op.kind == OpKind::kRandomCrop)
    CheckPixels(op.ints[0], op.ints[1], name);
}

}  // namespace

RowRandom::RowRandom(uint64_t stage_seed, int64_t epoch, int64_t index)
    : state_(Mix(Mix(stage_seed ^ Mix(static_cast<uint64_t>(epoch) + 0x632BE59BD9B4E019ull)) +
                 static_cast<uint64_t>(index))) {}

uint64_t RowRandom::Next() {
  state_ += 0x9E3779B97F4A7C15ull;
  return Mix(state_);
}

double RowRandom::Uniform(double low, double high) {
  const double unit = static_cast<double>(Next() >> 11) * 0x1.0p-53;
  return low + (high - low) * unit;
}

int64_t RowRandom::Integer(int64_t low, int64_t high) {
  const auto span = static_cast<uint64_t>(high - low) + 1;
  return low + static_cast<int64_t>(Next() % span);
}

BatchSlots::Entry& BatchSlots::Claim(int64_t epoch, int64_t index) {
  if (epoch > newest_epoch_) {
    newest_epoch_ = epoch;
    // A pass's last, shorter batch never fills: dropped once two newer passes have begun (a
    // late row of it, if any, then gets a tensor of its own).
    for (auto it = entries_.begin(); it != entries_.end();)
      it = it->first.first < epoch - 1 ? entries_.erase(it) : std::next(it);
  }
  return entries_[{epoch, index / batch_size_}];
}

void BatchSlots::Done(int64_t epoch, int64_t index) {
  auto it = entries_.find({epoch, index / batch_size_});
  if (it != entries_.end() && ++it->second.claimed >= batch_size_) entries_.erase(it);
}

Tensor BatchSlots::Slot(int64_t epoch, int64_t index, const Shape& shape, DType dtype) {
  Tensor slot;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& entry = Claim(epoch, index);
    if (!entry.buffer.defined()) {
      Shape whole = shape;
      whole.insert(whole.begin(), batch_size_);
      entry.buffer = Tensor::Empty(whole, dtype);  // NumElements checks the product
    }
    const Shape& held = entry.buffer.shape();
    if (entry.buffer.dtype() == dtype && Shape(held.begin() + 1, held.end()) == shape)
      slot = entry.buffer.Select(0, index % batch_size_);
    Done(epoch, index);
  }
  return slot.defined() ? slot : Tensor::Empty(shape, dtype);
}

void BatchSlots::Skip(int64_t epoch, int64_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  Claim(epoch, index);
  Done(epoch, index);
}

size_t BatchSlots::live() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

const char* OpName(OpKind kind) {
  static const char* const names[] = {"Decode",
                                      "Resize",
                                      "RandomResizedCrop",
                                      "CenterCrop",
                                      "RandomCrop",
                                      "RandomHorizontalFlip",
                                      "RandomVerticalFlip",
                                      "Rescale",
                                      "Normalize",
                                      "HWC2CHW"};
  return names[static_cast<int>(kind)];
}

Chain::Chain(std::vector<OpSpec> ops) : ops_(std::move(ops)) {
  KILN_CHECK(!ops_.empty(), Value, "native vision chain: no ops");
  for (size_t i = 0; i < ops_.size(); ++i) CheckSpec(ops_[i], i, ops_.size());
}

Tensor Chain::Apply(const Tensor& encoded, RowRandom& random, const Allocate& allocate) const {
  if (encoded.dtype() != DType::UInt8 || encoded.ndim() != 1 || !encoded.is_contiguous())
    throw NotNative("not a 1-D uint8 tensor");
  Image im;
  im.allocate = &allocate;
  size_t i = DecodeStep(encoded, ops_, im, random);
  for (; i < ops_.size(); ++i) {
    const OpSpec& op = ops_[i];
    if (op.kind == OpKind::kNormalize && i + 1 < ops_.size() &&
        ops_[i + 1].kind == OpKind::kHWC2CHW) {
      Normalize(im, op, true);  // fused with the HWC2CHW after it
      ++i;
      continue;
    }
    Step(im, op, random);
  }
  if (im.result.defined()) return im.result;
  ApplyFlips(im);
  return ToTensor(im, false);
}

}  // namespace kiln::dataset::vision
