// test_dataset_vision.cc - the native vision ops: JPEG windows, bad data, the chain and its seeds.
#include <gtest/gtest.h>

// clang-format off: jpeglib.h needs <cstdio> (FILE) before it.
#include <cstdio>
#include <jpeglib.h>
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "dataset/pipeline.h"
#include "dataset/vision_jpeg.h"
#include "dataset/vision_ops.h"

namespace kiln::dataset::vision {
namespace {

// A smooth RGB test image (h x w) encoded by libjpeg with 4:2:0 chroma at quality 90.
std::vector<uint8_t> EncodeJpeg(int h, int w, bool progressive = false) {
  std::vector<uint8_t> rgb(static_cast<size_t>(h) * w * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        rgb[(static_cast<size_t>(y) * w + x) * 3 + c] =
            static_cast<uint8_t>(127 + 120 * std::sin(0.11 * x * (c + 1) + 0.07 * y * (3 - c)));
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr err{};
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* out = nullptr;
  unsigned long size = 0;  // NOLINT: libjpeg's type
  jpeg_mem_dest(&cinfo, &out, &size);
  cinfo.image_width = w;
  cinfo.image_height = h;
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 90, TRUE);
  if (progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = rgb.data() + static_cast<size_t>(cinfo.next_scanline) * w * 3;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::vector<uint8_t> bytes(out, out + size);
  jpeg_destroy_compress(&cinfo);
  std::free(out);
  return bytes;
}

uint8_t At(const Decoded& d, int64_t y, int64_t x, int c) {
  return d.pixels[y * d.stride + d.offset + x * 3 + c];
}

// Every window of the image decodes to exactly the whole decode's pixels there, including the
// window's edges (libjpeg's crop treats its edge as the image's; the decoder keeps a margin).
TEST(DatasetVision, JpegWindowsEqualTheWholeDecode) {
  for (bool progressive : {false, true}) {
    const auto jpeg = EncodeJpeg(37, 70, progressive);
    const JpegInfo info = ReadJpegInfo(jpeg.data(), jpeg.size(), "test");
    ASSERT_EQ(info.height, 37);
    ASSERT_EQ(info.width, 70);
    const Decoded whole = DecodeJpeg(jpeg.data(), jpeg.size(), {0, 0, 37, 70}, 1, "test");
    for (int64_t top : {0, 1, 8, 16, 17, 30})
      for (int64_t left : {0, 1, 15, 16, 17, 33, 48}) {
        const Window w{top, left, std::min<int64_t>(7, 37 - top), std::min<int64_t>(21, 70 - left)};
        const Decoded part = DecodeJpeg(jpeg.data(), jpeg.size(), w, 1, "test");
        ASSERT_EQ(part.height, w.height);
        ASSERT_EQ(part.width, w.width);
        for (int64_t y = 0; y < w.height; ++y)
          for (int64_t x = 0; x < w.width; ++x)
            for (int c = 0; c < 3; ++c)
              ASSERT_EQ(At(part, y, x, c), At(whole, top + y, left + x, c))
                  << "window at " << top << ", " << left << " pixel " << y << ", " << x;
      }
  }
}

TEST(DatasetVision, ScaledDecodeCoversTheWindow) {
  const auto jpeg = EncodeJpeg(64, 96);
  const Decoded d = DecodeJpeg(jpeg.data(), jpeg.size(), {8, 16, 40, 64}, 4, "test");
  EXPECT_EQ(d.height, 10);
  EXPECT_EQ(d.width, 16);
  EXPECT_THROW(DecodeJpeg(jpeg.data(), jpeg.size(), {8, 16, 40, 64}, 3, "test"), Error);
  EXPECT_THROW(DecodeJpeg(jpeg.data(), jpeg.size(), {30, 0, 40, 8}, 1, "test"), Error);
}

TEST(DatasetVision, DamagedDataThrowsInsteadOfAborting) {
  const auto jpeg = EncodeJpeg(32, 32);
  for (size_t keep : {size_t{2}, size_t{20}, jpeg.size() / 2, jpeg.size() - 2}) {
    std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + keep);
    EXPECT_THROW(DecodeJpeg(cut.data(), cut.size(), {0, 0, 32, 32}, 1, "Decode"), Error) << keep;
  }
  std::vector<uint8_t> garbage = jpeg;
  for (size_t i = garbage.size() / 2; i < garbage.size() - 2; ++i) garbage[i] = 0x5A;
  try {
    DecodeJpeg(garbage.data(), garbage.size(), {0, 0, 32, 32}, 1, "Decode");
    FAIL() << "garbage decoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Decode: cannot decode the JPEG data"), std::string::npos)
        << e.what();
  }
}

// A header claiming 65000 x 65000 pixels is refused before anything is allocated.
TEST(DatasetVision, AHugeHeaderIsRefused) {
  auto jpeg = EncodeJpeg(16, 16);
  size_t sof = 0;
  for (size_t i = 2; i + 9 < jpeg.size() && sof == 0; ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) sof = i;
  ASSERT_NE(sof, 0u);
  for (size_t at : {sof + 5, sof + 7}) jpeg[at] = 0xFD, jpeg[at + 1] = 0xE8;  // height, width
  try {
    ReadJpegInfo(jpeg.data(), jpeg.size(), "Decode");
    FAIL() << "a 65000 x 65000 header was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than the limit"), std::string::npos) << e.what();
  }
}

Tensor Bytes(const std::vector<uint8_t>& data) {
  Tensor t = Tensor::Empty({static_cast<int64_t>(data.size())}, DType::UInt8);
  std::copy(data.begin(), data.end(), static_cast<uint8_t*>(t.raw_data()));
  return t;
}

TEST(DatasetVision, ChainRunsAndDrawsFromTheRowsSeed) {
  Chain chain({{OpKind::kDecode, {}, {}},
               {OpKind::kRandomResizedCrop, {16, 20, 10, 1}, {0.08, 1.0, 0.75, 4.0 / 3}},
               {OpKind::kHorizontalFlip, {}, {0.5}},
               {OpKind::kNormalize, {}, {100, 110, 120, 50, 60, 70}},
               {OpKind::kHWC2CHW, {}, {}}});
  const Tensor input = Bytes(EncodeJpeg(48, 64));
  auto run = [&](int64_t epoch, int64_t index) {
    RowRandom random(42, epoch, index);
    return chain.Apply(input, random);
  };
  const Tensor a = run(0, 3), b = run(0, 3), c = run(0, 4);
  ASSERT_EQ(a.shape(), (Shape{3, 16, 20}));
  ASSERT_EQ(a.dtype(), DType::Float32);
  const auto* pa = static_cast<const float*>(a.raw_data());
  const auto* pb = static_cast<const float*>(b.raw_data());
  const auto* pc = static_cast<const float*>(c.raw_data());
  EXPECT_TRUE(std::equal(pa, pa + a.numel(), pb));
  EXPECT_FALSE(std::equal(pa, pa + a.numel(), pc));
  RowRandom random(1, 0, 0);
  EXPECT_THROW(chain.Apply(Bytes({0x89, 'P', 'N', 'G'}), random), NotNative);
}

TEST(DatasetVision, ChainChecksItsOps) {
  EXPECT_THROW(Chain({{OpKind::kHWC2CHW, {}, {}}}), Error);  // no Decode first
  EXPECT_THROW(Chain({{OpKind::kDecode, {}, {}},
                      {OpKind::kHWC2CHW, {}, {}},
                      {OpKind::kHorizontalFlip, {}, {0.5}}}),
               Error);  // HWC2CHW not last
  EXPECT_THROW(Chain({{OpKind::kDecode, {}, {}}, {OpKind::kResize, {0, 5, 0, 1}, {}}}), Error);
  EXPECT_THROW(Chain({{OpKind::kDecode, {}, {}}, {OpKind::kNormalize, {}, {1, 0}}}), Error);
  EXPECT_THROW(Chain({{OpKind::kDecode, {}, {}}, {OpKind::kResize, {1 << 20, 1 << 20, 0, 1}, {}}}),
               Error);  // more pixels than a decode may make
}

TEST(DatasetVision, RowRandomIsUniformAndPerRow) {
  RowRandom r(7, 1, 2);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = r.Uniform(0, 1);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    const int64_t k = r.Integer(3, 5);
    ASSERT_TRUE(k >= 3 && k <= 5);
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
  RowRandom x(7, 1, 2), y(7, 2, 1);
  EXPECT_NE(x.Next(), y.Next());
}

// A map before a batch writes rows into BatchSlots; the batch then takes them as one view.
TEST(DatasetVision, BatchSlotsHandTheBatchOverWithoutACopy) {
  BatchSlots slots(3);
  std::vector<Row> parts(3);
  for (int64_t i = 0; i < 3; ++i) {
    Tensor t = slots.Slot(0, i, {2, 2}, DType::Float32);
    static_cast<float*>(t.raw_data())[0] = static_cast<float>(i);
    parts[i].columns.emplace_back(t);
  }
  EXPECT_EQ(slots.live(), 0u);  // every row of the batch claimed its place
  std::vector<Value> columns;
  ASSERT_TRUE(StackTensorColumns(parts, &columns));
  const Tensor& batch = columns[0].tensor;
  EXPECT_EQ(batch.shape(), (Shape{3, 2, 2}));
  EXPECT_TRUE(batch.same_storage(parts[0].columns[0].tensor));
  EXPECT_EQ(static_cast<float*>(batch.raw_data())[8], 2.0f);
  // A row of another shape, or written elsewhere (Skip): the batch is copied instead.
  Tensor odd = slots.Slot(0, 3, {2, 2}, DType::Float32);
  Tensor other = slots.Slot(0, 4, {3, 3}, DType::Float32);
  slots.Skip(0, 5);
  EXPECT_FALSE(other.same_storage(odd));
  EXPECT_EQ(slots.live(), 0u);
  std::vector<Row> mixed(2);
  mixed[0].columns.emplace_back(odd);
  mixed[1].columns.emplace_back(Tensor::Empty({2, 2}, DType::Float32));
  ASSERT_TRUE(StackTensorColumns(mixed, &columns));
  EXPECT_FALSE(columns[0].tensor.same_storage(odd));
  // A pass's shorter last batch never fills: dropped once two newer passes have begun.
  slots.Slot(0, 6, {2, 2}, DType::Float32);
  slots.Slot(1, 0, {2, 2}, DType::Float32);
  EXPECT_EQ(slots.live(), 2u);
  slots.Slot(2, 0, {2, 2}, DType::Float32);
  EXPECT_EQ(slots.live(), 2u);  // pass 0's entry went, passes 1 and 2 remain
}

}  // namespace
}  // namespace kiln::dataset::vision
