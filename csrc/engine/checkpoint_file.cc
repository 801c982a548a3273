// checkpoint_file.cc - parse and serialize MindSpore's .ckpt protobuf (checkpoint_file.h).
#include "engine/checkpoint_file.h"

#include <algorithm>
#include <array>
#include <climits>
#include <unordered_set>
#include <utility>

#include "core/error.h"
#include "engine/proto/checkpoint.pb.h"

namespace kiln::engine {
namespace {

// MindSpore's optional trailer: these 7 bytes, then the CRC32 as a 10-byte big-endian number.
constexpr std::string_view kCrcMarker = "crc_num";
constexpr size_t kCrcTrailer = 7 + 10;

struct TypeInfo {
  const char* name;
  size_t size;
};
// The tensor_type strings MindSpore writes (str(dtype)) and their element sizes.
constexpr std::array<TypeInfo, 14> kTypes = {{{"Bool", 1},
                                              {"Int8", 1},
                                              {"UInt8", 1},
                                              {"Int16", 2},
                                              {"UInt16", 2},
                                              {"Int32", 4},
                                              {"UInt32", 4},
                                              {"Int64", 8},
                                              {"UInt64", 8},
                                              {"Float16", 2},
                                              {"BFloat16", 2},
                                              {"Float32", 4},
                                              {"Float64", 8},
                                              {"str", 4}}};

bool ValidUtf8(std::string_view s) {
  // The smallest code point each sequence length may encode (shorter forms are overlong).
  static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    size_t extra = 0;
    if (lead >= 0x80) {
      if ((lead & 0xE0) == 0xC0)
        extra = 1;
      else if ((lead & 0xF0) == 0xE0)
        extra = 2;
      else if ((lead & 0xF8) == 0xF0)
        extra = 3;
      else
        return false;
    }
    if (extra >= s.size() - i) return false;  // the sequence runs past the end
    uint32_t cp = extra == 0 ? lead : lead & (0x3Fu >> extra);
    for (size_t k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(s[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (next & 0x3F);
    }
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

// Dims as NumPy prints a shape, e.g. (2, 3); local so the parser links without the engine.
std::string DimsStr(const std::vector<int64_t>& dims) {
  std::string out = "(";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + (dims.size() == 1 ? ",)" : ")");
}

// The element count of `dims` times `item`, or Value when a dim is negative, the rank is too
// large or the product overflows.
size_t ByteCount(const std::string& name, const std::vector<int64_t>& dims, size_t item) {
  KILN_CHECK(dims.size() <= kCheckpointMaxRank, Value, "entry '", name, "' has ", dims.size(),
             " dimensions (at most ", kCheckpointMaxRank, ")");
  size_t total = item;
  for (int64_t d : dims) {
    KILN_CHECK(d >= 0, Value, "entry '", name, "' has a negative dimension ", d);
    KILN_CHECK(!__builtin_mul_overflow(total, static_cast<uint64_t>(d), &total), Value, "entry '",
               name, "' has a shape too large to exist");
  }
  return total;
}

// Checks an entry once all its slices are joined: the bytes its dims and type imply.
void CheckEntry(CheckpointEntry& e) {
  const size_t item = CheckpointItemSize(e.type);
  if (e.type == "str") {
    KILN_CHECK(e.dims.empty() || e.dims == std::vector<int64_t>{0}, Value, "str entry '", e.name,
               "' has dims of rank ", e.dims.size());
    KILN_CHECK(e.data.size() % 4 == 0, Value, "str entry '", e.name, "' has ", e.data.size(),
               " bytes, not a whole number of UTF-32 code units");
    return;
  }
  // MindSpore loads dims (0,) as a scalar; its writer never writes a scalar that way, but a
  // scalar's bytes under (0,) are taken as MindSpore takes them.
  if (e.dims == std::vector<int64_t>{0} && e.data.size() == item) e.dims.clear();
  const size_t expected = ByteCount(e.name, e.dims, item);
  KILN_CHECK(e.data.size() == expected, Value, "entry '", e.name, "' has ", e.data.size(),
             " data bytes; its shape ", DimsStr(e.dims), " of ", e.type, " needs ", expected);
}

// Strips and verifies MindSpore's CRC trailer when the bytes end with one.
std::string_view CheckCrcTrailer(std::string_view bytes) {
  if (bytes.size() < kCrcTrailer ||
      bytes.substr(bytes.size() - kCrcTrailer, kCrcMarker.size()) != kCrcMarker)
    return bytes;
  uint64_t stored = 0;
  for (size_t i = bytes.size() - 10; i < bytes.size(); ++i) {
    KILN_CHECK(stored >> 56 == 0, Value, "the crc_num trailer holds a number too large");
    stored = (stored << 8) | static_cast<unsigned char>(bytes[i]);
  }
  const std::string_view body = bytes.substr(0, bytes.size() - kCrcTrailer);
  KILN_CHECK(stored == Crc32(body), Value, "damaged: its CRC32 (crc_num ", stored,
             ") does not match the contents (", Crc32(body), ")");
  return body;
}

// The key of Checkpoint.value: field 1, wire type 2 (length-delimited).
constexpr unsigned char kValueKey = (1 << 3) | 2;

// A base-128 varint from the front of `rest` (consumed); Value when it is cut off or too long.
uint64_t ReadVarint(std::string_view& rest, size_t offset) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    KILN_CHECK(!rest.empty(), Value, "truncated: the length of the value at byte ", offset);
    const auto byte = static_cast<unsigned char>(rest[0]);
    rest.remove_prefix(1);
    result |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if (!(byte & 0x80)) return result;
  }
  Throw(ErrorKind::Value, "damaged: the length of the value at byte ", offset, " is too long");
}

// Adds one parsed value: a new entry, or the next slice of the entry before it.
void AddValue(kiln_ckpt::Checkpoint::Value& value, std::vector<CheckpointEntry>& entries,
              std::unordered_set<std::string>& seen) {
  const std::string& tag = value.tag();
  KILN_CHECK(!tag.empty() && ValidUtf8(tag), Value, "an entry's name is empty or not UTF-8");
  KILN_CHECK(!value.has_maptensor(), Value, "entry '", tag,
             "' is a MapParameter, which kiln does not have");
  KILN_CHECK(value.has_tensor(), Value, "entry '", tag, "' holds no tensor");
  auto* tensor = value.mutable_tensor();
  std::vector<int64_t> dims(tensor->dims().begin(), tensor->dims().end());
  if (!entries.empty() && entries.back().name == tag) {  // the next slice of the same tensor
    CheckpointEntry& last = entries.back();
    KILN_CHECK(last.type == tensor->tensor_type() && last.dims == dims, Value, "entry '", tag,
               "' has slices of different types or shapes");
    last.data += tensor->tensor_content();
    return;
  }
  if (!entries.empty()) CheckEntry(entries.back());
  KILN_CHECK(seen.insert(tag).second, Value, "the name '", tag, "' appears twice");
  CheckpointItemSize(tensor->tensor_type());  // an unknown type is refused at once
  entries.push_back(
      {tag, tensor->tensor_type(), std::move(dims), std::move(*tensor->mutable_tensor_content())});
}

}  // namespace

uint32_t Crc32(std::string_view bytes, uint32_t crc) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (char ch : bytes) crc = table[(crc ^ static_cast<unsigned char>(ch)) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

size_t CheckpointItemSize(const std::string& type) {
  for (const TypeInfo& t : kTypes)
    if (type == t.name) return t.size;
  Throw(ErrorKind::Value, "tensor type '", type, "' is not one kiln reads");
}

std::vector<CheckpointEntry> ParseCheckpoint(std::string_view bytes) {
  KILN_CHECK(!bytes.empty(), Value, "empty (0 bytes)");
  std::string_view rest = CheckCrcTrailer(bytes);
  std::vector<CheckpointEntry> entries;
  std::unordered_set<std::string> seen;
  // The top level is walked here, one value at a time, so a file may exceed protobuf's 2 GiB
  // message limit as MindSpore's large checkpoints do; each value is parsed by protobuf.
  while (!rest.empty()) {
    const size_t offset = bytes.size() - rest.size();
    KILN_CHECK(static_cast<unsigned char>(rest[0]) == kValueKey, Value,
               "not a MindSpore checkpoint (byte ", offset, " starts no checkpoint value)");
    rest.remove_prefix(1);
    const uint64_t length = ReadVarint(rest, offset);
    KILN_CHECK(length <= rest.size(), Value, "truncated: the value at byte ", offset, " needs ",
               length, " bytes, ", rest.size(), " remain");
    kiln_ckpt::Checkpoint::Value value;
    // ParsePartial + IsInitialized: the same checks as ParseFromArray, without protobuf logging
    // a message of its own to stderr for each damaged file.
    KILN_CHECK(length < (uint64_t{1} << 31) &&
                   value.ParsePartialFromArray(rest.data(), static_cast<int>(length)),
               Value, "damaged: the value at byte ", offset, " is not a valid checkpoint value");
    KILN_CHECK(value.IsInitialized(), Value, "damaged: the value at byte ", offset, " lacks ",
               value.InitializationErrorString());
    rest.remove_prefix(length);
    AddValue(value, entries, seen);
  }
  if (!entries.empty()) CheckEntry(entries.back());
  return entries;
}

std::string SerializeCheckpointEntry(const std::string& name, const std::string& type,
                                     const std::vector<int64_t>& dims, std::string_view data,
                                     size_t slice_bytes) {
  KILN_CHECK(!name.empty() && ValidUtf8(name), Value, "a checkpoint name must be non-empty UTF-8");
  KILN_CHECK(slice_bytes > 0, Value, "slice_bytes must be positive");
  const size_t item = CheckpointItemSize(type);
  if (type == "str") {
    KILN_CHECK(data.size() % 4 == 0, Value, "str entry '", name, "' is not UTF-32");
  } else {
    const size_t expected = ByteCount(name, dims, item);
    KILN_CHECK(data.size() == expected, Value, "entry '", name, "' has ", data.size(),
               " bytes; its shape ", DimsStr(dims), " of ", type, " needs ", expected);
  }
  std::string out;
  size_t offset = 0;
  do {  // an empty tensor is still one value
    const size_t n = std::min(slice_bytes, data.size() - offset);
    kiln_ckpt::Checkpoint message;
    auto* value = message.add_value();
    value->set_tag(name);
    auto* tensor = value->mutable_tensor();
    for (int64_t d : dims) tensor->add_dims(d);
    tensor->set_tensor_type(type);
    tensor->set_tensor_content(data.data() + offset, n);
    KILN_CHECK(message.AppendToString(&out), Value, "entry '", name, "' could not be serialized");
    offset += n;
  } while (offset < data.size());
  return out;
}

}  // namespace kiln::engine
