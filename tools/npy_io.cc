// npy_io.cc - reads and writes NumPy .npy files (npy_io.h), checking every size first.
#include "npy_io.h"

#include <zip.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

namespace kiln::tools {
namespace {

using kiln::runtime::DType;

[[noreturn]] void Fail(const std::string& what, const std::string& why) {
  throw std::runtime_error(what + ": " + why);
}

// NumPy's type strings for the dtypes kiln has (bfloat16 has none: written as raw uint16 "<u2"
// would lose its meaning, so it is refused).
const std::vector<std::pair<const char*, DType>>& Descrs() {
  static const std::vector<std::pair<const char*, DType>> descrs = {
      {"|b1", DType::Bool},    {"|u1", DType::UInt8},   {"<u2", DType::UInt16},
      {"<u4", DType::UInt32},  {"<u8", DType::UInt64},  {"|i1", DType::Int8},
      {"<i2", DType::Int16},   {"<i4", DType::Int32},   {"<i8", DType::Int64},
      {"<f2", DType::Float16}, {"<f4", DType::Float32}, {"<f8", DType::Float64}};
  return descrs;
}

// The value of `'key': ` in the header dict, up to the next top-level comma or brace.
std::string HeaderField(const std::string& header, const std::string& key,
                        const std::string& what) {
  const std::string quoted = "'" + key + "'";
  size_t at = header.find(quoted);
  if (at == std::string::npos) Fail(what, "the .npy header has no " + quoted);
  at = header.find(':', at + quoted.size());
  if (at == std::string::npos) Fail(what, "the .npy header is malformed");
  size_t end = at + 1;
  int depth = 0;
  while (end < header.size()) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if ((c == ',' || c == '}') && depth == 0) break;
    ++end;
  }
  std::string value = header.substr(at + 1, end - at - 1);
  const size_t first = value.find_first_not_of(' ');
  const size_t last = value.find_last_not_of(' ');
  return first == std::string::npos ? "" : value.substr(first, last - first + 1);
}

std::vector<int64_t> ParseShape(const std::string& text, const std::string& what) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')')
    Fail(what, "the .npy shape '" + text + "' is not a tuple");
  std::vector<int64_t> shape;
  std::stringstream items(text.substr(1, text.size() - 2));
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t first = item.find_first_not_of(' ');
    if (first == std::string::npos) continue;  // the trailing comma of a 1-tuple
    item = item.substr(first, item.find_last_not_of(' ') - first + 1);
    if (item.empty() || item.size() > 18 ||
        item.find_first_not_of("0123456789") != std::string::npos)
      Fail(what, "the .npy shape '" + text + "' has a dimension that is not a size");
    shape.push_back(std::stoll(item));
    if (shape.size() > 64) Fail(what, "the .npy shape has more than 64 dimensions");
  }
  return shape;
}

DType ParseDescr(const std::string& text, const std::string& what) {
  if (text.size() < 2) Fail(what, "the .npy descr is malformed");
  std::string descr = text.substr(1, text.size() - 2);       // strip the quotes
  if (descr.size() == 3 && descr[0] == '=') descr[0] = '<';  // native order is little-endian
  if (descr == "<b1" || descr == "=b1") descr = "|b1";
  if (descr == "<u1" || descr == "<i1") descr[0] = '|';
  for (const auto& [name, dtype] : Descrs())
    if (descr == name) return dtype;
  Fail(what, "dtype '" + descr + "' is not one kiln reads (little-endian bool, ints, floats)");
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) Fail(path, std::string("cannot open: ") + std::strerror(errno));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

kiln::runtime::Tensor ParseNpy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) Fail(what, "not a .npy file");
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3) Fail(what, ".npy version " + std::to_string(major) + " is unknown");
  size_t header_len = static_cast<unsigned char>(bytes[8]) |
                      static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
  size_t start = 10;
  if (major >= 2) {
    if (bytes.size() < 12) Fail(what, "the .npy header is truncated");
    header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[10])) << 16 |
                  static_cast<size_t>(static_cast<unsigned char>(bytes[11])) << 24;
    start = 12;
  }
  if (header_len > bytes.size() - start) Fail(what, "the .npy header is truncated");
  const std::string header = bytes.substr(start, header_len);
  if (HeaderField(header, "fortran_order", what) != "False")
    Fail(what, "Fortran-ordered arrays are not read; save with np.ascontiguousarray");
  const DType dtype = ParseDescr(HeaderField(header, "descr", what), what);
  const std::vector<int64_t> shape = ParseShape(HeaderField(header, "shape", what), what);
  // Checked: the Tensor constructor refuses a byte count past int64; the data must be there.
  kiln::runtime::Tensor tensor(dtype, shape);
  const size_t data_start = start + header_len;
  if (bytes.size() - data_start != tensor.nbytes())
    Fail(what, "holds " + std::to_string(bytes.size() - data_start) + " bytes of data, its " +
                   "shape and dtype need " + std::to_string(tensor.nbytes()));
  if (tensor.nbytes()) std::memcpy(tensor.raw_data(), bytes.data() + data_start, tensor.nbytes());
  return tensor;
}

kiln::runtime::Tensor ReadNpy(const std::string& path) { return ParseNpy(ReadAll(path), path); }

std::string NpyBytes(const kiln::runtime::Tensor& tensor, const std::string& what) {
  const char* descr = nullptr;
  for (const auto& [name, dtype] : Descrs())
    if (dtype == tensor.dtype()) descr = name;
  if (!descr)
    Fail(what, std::string("NumPy has no dtype for ") + kiln::runtime::DTypeName(tensor.dtype()));
  std::string shape = "(";
  for (int64_t d : tensor.shape()) shape += std::to_string(d) + ", ";
  if (tensor.shape().size() > 1) shape.resize(shape.size() - 2);
  if (tensor.shape().size() == 1) shape.resize(shape.size() - 1);
  shape += ")";
  std::string header =
      "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append(63 - (10 + header.size()) % 64, ' ');  // data starts 64-byte aligned
  header += '\n';
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes.append(static_cast<const char*>(tensor.raw_data()), tensor.nbytes());
  return bytes;
}

void WriteNpy(const std::string& path, const kiln::runtime::Tensor& tensor) {
  const std::string bytes = NpyBytes(tensor, path);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out.good()) Fail(path, std::string("cannot write: ") + std::strerror(errno));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.good()) Fail(path, "writing failed");
}

namespace {

// An .npz member may not claim more than this (a zip bomb is refused before inflating it).
constexpr zip_uint64_t kMaxMemberBytes = zip_uint64_t{1} << 34;

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};

std::string ZipError(zip_t* z) { return zip_strerror(z); }

}  // namespace

std::vector<std::pair<std::string, kiln::runtime::Tensor>> ReadNpz(const std::string& path) {
  int code = 0;
  std::unique_ptr<zip_t, ZipCloser> zip(zip_open(path.c_str(), ZIP_RDONLY, &code));
  if (!zip) {
    zip_error_t error;
    zip_error_init_with_code(&error, code);
    const std::string why = zip_error_strerror(&error);
    zip_error_fini(&error);
    Fail(path, "not a readable .npz: " + why);
  }
  std::vector<std::pair<std::string, kiln::runtime::Tensor>> arrays;
  const zip_int64_t count = zip_get_num_entries(zip.get(), 0);
  for (zip_int64_t i = 0; i < count; ++i) {
    zip_stat_t st;
    if (zip_stat_index(zip.get(), i, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) || !st.name)
      Fail(path, "member " + std::to_string(i) + ": " + ZipError(zip.get()));
    std::string name = st.name;
    const std::string what = path + ":" + name;
    if (st.size > kMaxMemberBytes) Fail(what, "claims " + std::to_string(st.size) + " bytes");
    std::string bytes(st.size, '\0');
    zip_file_t* file = zip_fopen_index(zip.get(), i, 0);
    if (!file) Fail(what, ZipError(zip.get()));
    const zip_int64_t got = zip_fread(file, bytes.data(), st.size);
    zip_fclose(file);
    if (got < 0 || static_cast<zip_uint64_t>(got) != st.size) Fail(what, "truncated member");
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    arrays.emplace_back(name, ParseNpy(bytes, what));
  }
  return arrays;
}

void WriteNpz(const std::string& path,
              const std::vector<std::pair<std::string, kiln::runtime::Tensor>>& arrays) {
  int code = 0;
  std::unique_ptr<zip_t, ZipCloser> zip(zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code));
  if (!zip) Fail(path, "cannot create (libzip error " + std::to_string(code) + ")");
  std::vector<std::string> members;  // the buffers stay alive until zip_close writes them
  members.reserve(arrays.size());
  for (const auto& [name, tensor] : arrays) {
    members.push_back(NpyBytes(tensor, path + ":" + name));
    zip_source_t* source =
        zip_source_buffer(zip.get(), members.back().data(), members.back().size(), 0);
    const zip_int64_t index =
        source ? zip_file_add(zip.get(), (name + ".npy").c_str(), source, ZIP_FL_ENC_UTF_8) : -1;
    if (index < 0) {
      if (source) zip_source_free(source);
      Fail(path, "adding " + name + ": " + ZipError(zip.get()));
    }
    zip_set_file_compression(zip.get(), index, ZIP_CM_STORE, 0);
  }
  if (zip_close(zip.get()) != 0) Fail(path, "writing failed: " + ZipError(zip.get()));
  zip.release();  // closed
}

}  // namespace kiln::tools
