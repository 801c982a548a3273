// executor.h - runs IR functions with the registry's kernels, control flow included.
#pragma once

#include <vector>

#include "ir/ir.h"

namespace kiln {

struct RunOptions {
  // Release each intermediate right after its last use (off only to measure what it saves).
  bool free_dead_values = true;
};

// Runs `func` of `module` on `args` (checked against its parameter types). Print nodes write to
// stdout; a reached Raise node throws the error it describes.
std::vector<Tensor> RunFunc(const ir::Module& module, const ir::Func& func,
                            const std::vector<Tensor>& args, const RunOptions& options = {});

inline std::vector<Tensor> Run(const ir::Module& module, const std::vector<Tensor>& args,
                               const RunOptions& options = {}) {
  return RunFunc(module, module.entry(), args, options);
}

// Formats "{}" placeholders in `format` with the values of `args`, as print and raise show them.
std::string FormatWithTensors(const std::string& format, const std::vector<Tensor>& args);

}  // namespace kiln
