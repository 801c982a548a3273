// engine.h - a compiled graph as one C++ object: compile a module, run it on tensors.
//
// Compile verifies the module (its signature included), runs the jit level's pass pipeline
// (passes/pipeline.cc) and plans it for the executor (runtime/executor.h). A CompiledGraph owns
// the optimized module and that plan; Run checks its inputs against the signature and runs the
// plan. Nothing here knows about Python: the bindings only convert arguments and results, and
// the C++ tests compile and run IR text directly.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "runtime/executor.h"

namespace kiln::engine {

struct CompileOptions {
  std::string level = "O1";  // jit_level: "O0" (only what correctness needs), "O1", "O2"
  bool verify_each_pass = true;
};

struct CallOptions {
  // Release intermediates after their last use and reuse dying buffers (off only to measure
  // what that planning saves).
  bool free_dead_values = true;
  bool profile = false;  // time each node of the entry function (RunStats::profile)
};

// One entry node of a profiled run: what it is ("exp f32[64,64]", "call @f") and its seconds.
struct NodeTime {
  std::string what;
  double seconds = 0;
};

// What a run measured when the caller asks for it.
struct RunStats {
  int64_t peak_bytes = 0;         // the most memory the run held above what it started with
  std::vector<NodeTime> profile;  // one per entry node, with CallOptions::profile
};

class CompiledGraph {
 public:
  // Runs on the user's inputs and the weights, each in signature order (the roles say how they
  // interleave into the entry's parameters). A count, dtype or shape that does not fit the
  // signature is an error naming the input, what it accepts and what it got.
  std::vector<Tensor> Run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& weights,
                          const CallOptions& options = {}, RunStats* stats = nullptr) const;
  // Runs on every entry parameter in order (inputs and weights as the signature interleaves
  // them), checked the same way.
  std::vector<Tensor> RunEntry(const std::vector<Tensor>& params, const CallOptions& options = {},
                               RunStats* stats = nullptr) const;
  // Whether `inputs` fit the signature's user inputs exactly, without throwing: the check of a
  // steady-state call that falls back to recompiling when it fails.
  bool Accepts(const std::vector<Tensor>& inputs) const;

  const ir::Module& module() const { return *module_; }
  const ir::Signature& signature() const { return *module_->signature(); }
  size_t num_inputs() const { return input_params_.size(); }
  size_t num_weights() const { return weight_params_.size(); }
  std::string Text() const { return ir::Print(*module_); }  // the optimized IR, signature first
  size_t NumNodes() const;                                  // across every function

 private:
  friend CompiledGraph Compile(ir::Module module, const CompileOptions& options);
  explicit CompiledGraph(ir::Module module);
  void CheckParam(size_t position, const Tensor& t) const;
  std::vector<Tensor> Execute(const std::vector<Tensor>& params, const CallOptions& options,
                              RunStats* stats) const;

  std::unique_ptr<ir::Module> module_;  // on the heap: program_ points into it
  std::unique_ptr<Program> program_;
  std::vector<size_t> input_params_;   // entry parameter position of each user input
  std::vector<size_t> weight_params_;  // and of each weight
};

// Verifies `module`, runs the level's passes (verifying after each one when asked) and plans
// it. A module without a signature gets ir::DefaultSignature (every parameter a user input).
CompiledGraph Compile(ir::Module module, const CompileOptions& options = {});

// "op f32[8,128]" for a node, as a profile lists it.
std::string NodeSummary(const ir::Node& node);

}  // namespace kiln::engine
