// compiled_graph.cc - Compile (verify, passes, plan) and CompiledGraph's runs.
#include "core/allocator.h"
#include "core/error.h"
#include "engine/engine.h"
#include "passes/passes.h"

namespace kiln::engine {

CompiledGraph Compile(ir::Module module, const CompileOptions& options) {
  if (!module.empty() && !module.signature()) module.set_signature(ir::DefaultSignature(module));
  ir::Verify(module);
  passes::RunPipeline(module, options.level, options.verify_each_pass);
  return CompiledGraph(std::move(module));
}

CompiledGraph::CompiledGraph(ir::Module module)
    : module_(std::make_unique<ir::Module>(std::move(module))),
      program_(std::make_unique<Program>(*module_)) {  // Program verifies the module again
  const auto& inputs = signature().inputs;
  for (size_t i = 0; i < inputs.size(); ++i)
    (inputs[i].role == ir::InputRole::Weight ? weight_params_ : input_params_).push_back(i);
}

size_t CompiledGraph::NumNodes() const {
  size_t n = 0;
  for (const auto& f : module_->funcs()) n += f->nodes.size();
  return n;
}

bool CompiledGraph::Accepts(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != input_params_.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!signature().inputs[input_params_[i]].Accepts(inputs[i])) return false;
  return true;
}

// The error names the value by its role and its index among that role's values (what the
// caller passed), with the type the signature accepts and the one it got.
void CompiledGraph::CheckParam(size_t position, const Tensor& t) const {
  const ir::SignatureInput& want = signature().inputs[position];
  if (t.defined() && want.Accepts(t)) return;
  const auto& same_role = want.role == ir::InputRole::Weight ? weight_params_ : input_params_;
  size_t index = 0;
  while (same_role[index] != position) ++index;
  const bool wrong_type = !t.defined() || t.dtype() != want.dtype;
  Throw(wrong_type ? ErrorKind::Type : ErrorKind::Value,
        "compiled graph: ", ir::InputRoleName(want.role), " ", index, " ('", want.name,
        "') expects ", want.TypeString(), ", got ",
        t.defined() ? ir::TypeString({t.dtype(), t.shape()}) : "no tensor");
}

std::vector<Tensor> CompiledGraph::Run(const std::vector<Tensor>& inputs,
                                       const std::vector<Tensor>& weights,
                                       const CallOptions& options, RunStats* stats) const {
  KILN_CHECK(inputs.size() == input_params_.size(), Type, "compiled graph: takes ",
             input_params_.size(), " inputs, got ", inputs.size());
  KILN_CHECK(weights.size() == weight_params_.size(), Type, "compiled graph: binds ",
             weight_params_.size(), " weights, got ", weights.size());
  std::vector<Tensor> params(inputs.size() + weights.size());
  for (size_t i = 0; i < inputs.size(); ++i) params[input_params_[i]] = inputs[i];
  for (size_t i = 0; i < weights.size(); ++i) params[weight_params_[i]] = weights[i];
  for (size_t p = 0; p < params.size(); ++p) CheckParam(p, params[p]);
  return Execute(params, options, stats);
}

std::vector<Tensor> CompiledGraph::RunEntry(const std::vector<Tensor>& params,
                                            const CallOptions& options, RunStats* stats) const {
  KILN_CHECK(params.size() == signature().inputs.size(), Type, "compiled graph: takes ",
             signature().inputs.size(), " parameters (", input_params_.size(), " inputs and ",
             weight_params_.size(), " weights), got ", params.size());
  for (size_t p = 0; p < params.size(); ++p) CheckParam(p, params[p]);
  return Execute(params, options, stats);
}

std::vector<Tensor> CompiledGraph::Execute(const std::vector<Tensor>& params,
                                           const CallOptions& options, RunStats* stats) const {
  RunOptions run;
  run.free_dead_values = options.free_dead_values;
  std::vector<double> seconds;
  if (stats && options.profile) run.node_seconds = &seconds;
  // The allocator's peak is process-wide: measured only when asked, for one run at a time.
  const int64_t before = stats ? GetAllocatorStats().allocated_bytes : 0;
  if (stats) ResetPeakAllocated();
  std::vector<Tensor> outputs = program_->Run(params, run);
  if (!stats) return outputs;
  stats->peak_bytes = GetAllocatorStats().peak_allocated_bytes - before;
  stats->profile.clear();
  const auto& nodes = module_->entry().nodes;
  for (size_t n = 0; n < seconds.size() && n < nodes.size(); ++n)
    stats->profile.push_back({NodeSummary(nodes[n]), seconds[n]});
  return outputs;
}

std::string NodeSummary(const ir::Node& node) {
  std::string what;
  switch (node.kind) {
    case ir::NodeKind::Op:
      what = GetOpDef(node.op).name;
      break;
    case ir::NodeKind::Call:
      what = "call @" + node.callees[0];
      break;
    default:
      what = ir::NodeKindName(node.kind);
  }
  if (!node.outputs.empty()) what += " " + ir::TypeString(node.outputs[0]);
  return what;
}

}  // namespace kiln::engine
