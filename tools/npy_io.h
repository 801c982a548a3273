// npy_io.h - NumPy's .npy (versions 1-3) and .npz formats for kiln-run: read arrays, write them.
// An .npz is a zip of .npy members (np.savez, np.savez_compressed), read and written through
// libzip.
//
// Only C-ordered little-endian arrays of the dtypes kiln has are read; anything else (a
// Fortran-ordered or object array, a truncated file, a header that does not parse, a shape
// whose size overflows) is a std::runtime_error naming the file, never a crash.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/runtime.h"

namespace kiln::tools {

kiln::runtime::Tensor ReadNpy(const std::string& path);
// Parses .npy bytes (`what` names them in errors).
kiln::runtime::Tensor ParseNpy(const std::string& bytes, const std::string& what);
void WriteNpy(const std::string& path, const kiln::runtime::Tensor& tensor);
// The .npy bytes of `tensor` (what WriteNpy writes).
std::string NpyBytes(const kiln::runtime::Tensor& tensor, const std::string& what);

// The arrays of an .npz file in archive order, each with its name (the member name without
// ".npy"). Members are read in full only after their stated size is checked against the limit.
std::vector<std::pair<std::string, kiln::runtime::Tensor>> ReadNpz(const std::string& path);
// Writes `arrays` as an uncompressed .npz (as np.savez does).
void WriteNpz(const std::string& path,
              const std::vector<std::pair<std::string, kiln::runtime::Tensor>>& arrays);

}  // namespace kiln::tools
