// checkpoint_file.h - MindSpore's .ckpt layout (proto/checkpoint.proto): parse and serialize.
//
// The parser trusts nothing in the bytes: it walks the file's top level one value at a time
// (every length checked against what remains, so files may pass protobuf's 2 GiB limit) and
// protobuf decodes each value; then every entry is checked here: a known type, dims that are not
// negative, a byte count that equals the dims' product times the element size (computed with
// overflow checks), names that are valid UTF-8 and appear once (consecutive values with one name
// are slices of one tensor, as MindSpore writes large tensors), and the CRC32 trailer when there
// is one. Any problem is a kiln::Error of kind Value saying what is wrong; the caller adds the
// file name. Nothing in a file is ever executed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::engine {

// One parameter (or appended value) of a checkpoint.
struct CheckpointEntry {
  std::string name;
  std::string type;           // MindSpore's tensor_type: "Float32", "BFloat16", "str", ...
  std::vector<int64_t> dims;  // () for a scalar; (0,) for a str value, as MindSpore writes it
  std::string data;           // raw little-endian bytes (UTF-32-LE code units for "str")
};

// MindSpore writes tensors larger than this many bytes as several values (slices).
constexpr size_t kCheckpointSliceBytes = size_t{512} << 20;
// The most dimensions an entry may have.
constexpr size_t kCheckpointMaxRank = 64;

// The byte size of one element of a MindSpore tensor_type ("str": one UTF-32 code unit);
// throws Value for a type kiln does not read (e.g. "Int4", or a name it does not know).
size_t CheckpointItemSize(const std::string& type);

// Every entry of a .ckpt file's bytes, in file order, slices joined.
std::vector<CheckpointEntry> ParseCheckpoint(std::string_view bytes);

// The bytes MindSpore would write for one entry: one serialized Checkpoint message per slice of
// at most `slice_bytes`. Checks the type and that `data` fits `dims` (Value otherwise).
std::string SerializeCheckpointEntry(const std::string& name, const std::string& type,
                                     const std::vector<int64_t>& dims, std::string_view data,
                                     size_t slice_bytes = kCheckpointSliceBytes);

// CRC32 (zlib's polynomial), the checksum of MindSpore's "crc_num" trailer.
uint32_t Crc32(std::string_view bytes, uint32_t crc = 0);

}  // namespace kiln::engine
