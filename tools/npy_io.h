// npy_io.h - NumPy's .npy format (versions 1-3) for kiln-run: read an array, write one.
//
// Only C-ordered little-endian arrays of the dtypes kiln has are read; anything else (a
// Fortran-ordered or object array, a truncated file, a header that does not parse, a shape
// whose size overflows) is a std::runtime_error naming the file, never a crash.
#pragma once

#include <string>

#include "kiln/runtime.h"

namespace kiln::tools {

kiln::runtime::Tensor ReadNpy(const std::string& path);
// Parses .npy bytes (`what` names them in errors).
kiln::runtime::Tensor ParseNpy(const std::string& bytes, const std::string& what);
void WriteNpy(const std::string& path, const kiln::runtime::Tensor& tensor);

}  // namespace kiln::tools
