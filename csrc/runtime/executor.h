// executor.h - runs IR functions with the registry's kernels, control flow included.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/ir.h"

namespace kiln {

struct RunOptions {
  // Release each intermediate right after its last use and let elementwise ops write into a
  // dying input's buffer (off only to measure what planning saves).
  bool free_dead_values = true;
  // When set, the entry function's run adds each node's wall time (seconds) at its node index
  // (resized to the node count); regions count as the node that runs them.
  std::vector<double>* node_seconds = nullptr;
};

struct FuncPlan;  // executor.cc: a function's schedule, made once

// A module planned for running: every function's schedule (value slots, resolved kernels, which
// values die after which node, which outputs reuse a dying input's buffer) is computed once here,
// so a call only runs kernels. `module` must outlive the program and not change.
class Program {
 public:
  explicit Program(const ir::Module& module);
  explicit Program(ir::Module&&) = delete;  // the program keeps a reference: no temporaries
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // Runs the entry function on `args` (checked against its parameter types). Print nodes write
  // to stdout; a reached Raise node throws the error it describes.
  std::vector<Tensor> Run(const std::vector<Tensor>& args, const RunOptions& options = {}) const;
  std::vector<Tensor> RunFunc(const std::string& name, const std::vector<Tensor>& args,
                              const RunOptions& options = {}) const;
  const FuncPlan& plan(const std::string& name) const;

 private:
  const ir::Module& module_;
  std::unordered_map<std::string, std::unique_ptr<FuncPlan>> plans_;
};

// Plans `module` and runs `func` once (tools and tests; compiled graphs keep a Program).
std::vector<Tensor> RunFunc(const ir::Module& module, const ir::Func& func,
                            const std::vector<Tensor>& args, const RunOptions& options = {});

inline std::vector<Tensor> Run(const ir::Module& module, const std::vector<Tensor>& args,
                               const RunOptions& options = {}) {
  return RunFunc(module, module.entry(), args, options);
}

// Whether a busy machine runs eligible functions as a team of kiln's threads (dataflow.h; on by
// default). Off, every function runs its nodes in order: for measurements and tests.
void SetTeamRuns(bool on);

// Formats "{}" placeholders in `format` with the values of `args`, as print and raise show them.
std::string FormatWithTensors(const std::string& format, const std::vector<Tensor>& args);

}  // namespace kiln
