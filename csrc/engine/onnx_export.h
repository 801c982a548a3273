// onnx_export.h - a module and its weights as an ONNX model (opset 20), for ONNX runtimes.
//
// Only what ONNX can say is exported: one function (no control flow) whose ops all have ONNX
// operators (onnx_export.cc lists them); anything else is a ValueError naming the op and its
// source line. Weights are initializers; free input dimensions are named sizes.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/ir.h"

namespace kiln::engine {

std::string SerializeOnnx(const ir::Module& module, const std::vector<Tensor>& weights,
                          const std::string& producer_version);
// Writes atomically (a temporary file renamed over `path`).
void SaveOnnx(const ir::Module& module, const std::vector<Tensor>& weights, const std::string& path,
              const std::string& producer_version);

}  // namespace kiln::engine
