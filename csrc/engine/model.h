// model.h - a loaded model: its compiled graph and the weights it binds, run as one object.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "analysis/effects.h"
#include "engine/engine.h"
#include "engine/model_file.h"

namespace kiln::engine {

// Compiled once from a SavedModel. Run keeps no state between calls, so one LoadedModel serves
// several threads at once; a graph that writes its weights in place (a counter, running
// statistics in training mode) shares them across calls, so its runs take turns instead.
class LoadedModel {
 public:
  explicit LoadedModel(SavedModel saved, const CompileOptions& options = {})
      : writes_(analysis::ModuleEffects(saved.module).OfFunc(saved.module.entry().name).writes),
        graph_(Compile(std::move(saved.module), options)),
        weights_(std::move(saved.weights)) {}

  std::vector<Tensor> Run(const std::vector<Tensor>& inputs) const {
    if (!writes_) return graph_.Run(inputs, weights_);
    std::lock_guard<std::mutex> lock(*turn_);
    return graph_.Run(inputs, weights_);
  }
  const CompiledGraph& graph() const { return graph_; }
  const std::vector<Tensor>& weights() const { return weights_; }
  bool writes_weights() const { return writes_; }

 private:
  bool writes_;
  CompiledGraph graph_;
  std::vector<Tensor> weights_;
  std::unique_ptr<std::mutex> turn_ = std::make_unique<std::mutex>();
};

}  // namespace kiln::engine
