// test_checkpoint_file.cc - MindSpore .ckpt parsing and writing (engine/checkpoint_file.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "engine/checkpoint_file.h"

namespace kiln::engine {
namespace {

std::string Bytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The message of the kiln::Error `f` throws ("" when it throws none).
template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value);
    return e.what();
  }
  return "";
}

TEST(CheckpointFile, RoundTripsEntriesAndJoinsSlices) {
  const std::string w = Bytes({1, 2, 3, 4, 5, 6});
  // 5-byte slices: the 24-byte tensor is written as 5 values with one name.
  std::string file = SerializeCheckpointEntry("fc.weight", "Float32", {2, 3}, w, 5);
  file += SerializeCheckpointEntry("step", "Int32", {}, std::string("\x07\0\0\0", 4));
  file += SerializeCheckpointEntry("note", "str", {0}, std::string("h\0\0\0i\0\0\0", 8));
  const auto entries = ParseCheckpoint(file);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].name, "fc.weight");
  EXPECT_EQ(entries[0].dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(entries[0].data, w);
  EXPECT_EQ(entries[1].type, "Int32");
  EXPECT_TRUE(entries[1].dims.empty());
  EXPECT_EQ(entries[2].type, "str");
  EXPECT_EQ(entries[2].data.size(), 8u);
}

TEST(CheckpointFile, ReadsTheFilesMindSporeWrote) {
  const auto dir = std::filesystem::path(KILN_SOURCE_DIR) / "tests/fixtures/mindspore";
  for (const char* name : {"ms_dtypes.ckpt", "ms_dtypes_crc.ckpt"}) {
    const auto entries = ParseCheckpoint(ReadFile(dir / name));
    ASSERT_EQ(entries.size(), 16u) << name;
    EXPECT_EQ(entries[0].name, "bool");
    EXPECT_EQ(entries.back().type, "str");
  }
}

TEST(CheckpointFile, ChecksTheCrcTrailer) {
  const auto dir = std::filesystem::path(KILN_SOURCE_DIR) / "tests/fixtures/mindspore";
  std::string file = ReadFile(dir / "ms_dtypes_crc.ckpt");
  file[20] ^= 1;  // a bit of some value's bytes
  EXPECT_NE(ErrorOf([&] { ParseCheckpoint(file); }).find("CRC32"), std::string::npos);
}

TEST(CheckpointFile, RejectsDuplicateNamesAndMismatchedSlices) {
  const std::string a = SerializeCheckpointEntry("a", "Float32", {1}, Bytes({1}));
  const std::string b = SerializeCheckpointEntry("b", "Float32", {1}, Bytes({2}));
  EXPECT_NE(ErrorOf([&] { ParseCheckpoint(a + b + a); }).find("'a' appears twice"),
            std::string::npos);
  // Consecutive values with one name are slices; their bytes must add up to the shape.
  EXPECT_NE(ErrorOf([&] { ParseCheckpoint(a + a); }).find("needs 4"), std::string::npos);
  const std::string other = SerializeCheckpointEntry("a", "Int32", {1}, Bytes({1}));
  EXPECT_NE(ErrorOf([&] { ParseCheckpoint(a + other); }).find("slices"), std::string::npos);
}

TEST(CheckpointFile, RejectsDamagedBytesWithAClearError) {
  const std::string a = SerializeCheckpointEntry("a", "Float32", {2}, Bytes({1, 2}));
  EXPECT_NE(ErrorOf([&] { ParseCheckpoint(""); }).find("empty"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { ParseCheckpoint(a.substr(0, a.size() - 1)); }).find("truncated"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { ParseCheckpoint("KILNCKPT"); }).find("not a MindSpore checkpoint"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] {
              ParseCheckpoint(std::string("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 11));
            }).find("truncated"),
            std::string::npos);
  const std::string weird = SerializeCheckpointEntry("a", "Float32", {1}, Bytes({1}));
  std::string int4 = weird;
  int4.replace(int4.find("Float32"), 7, "Int4xyz");
  EXPECT_NE(ErrorOf([&] { ParseCheckpoint(int4); }).find("not one kiln reads"), std::string::npos);
}

TEST(CheckpointFile, ShapeArithmeticIsChecked) {
  // Dims whose product overflows, a negative dim and too many dims are refused on write and
  // (through a forged file) on read.
  EXPECT_NE(ErrorOf([&] {
              SerializeCheckpointEntry("a", "Float64", {int64_t{1} << 40, int64_t{1} << 30}, "");
            }).find("too large"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { SerializeCheckpointEntry("a", "Float32", {-1}, ""); }).find("negative"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] {
              SerializeCheckpointEntry("a", "Float32", std::vector<int64_t>(65, 1), "");
            }).find("dimensions"),
            std::string::npos);
}

TEST(CheckpointFile, Crc32MatchesZlib) {
  EXPECT_EQ(Crc32("123456789"), 0xCBF43926u);  // the standard check value
  EXPECT_EQ(Crc32("56789", Crc32("1234")), 0xCBF43926u);
}

}  // namespace
}  // namespace kiln::engine
