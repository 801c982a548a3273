// model_file.h - a module and its weights as one MindIR file: export writes it, load reads it.
//
// The container is MindIR's protobuf (proto/mind_ir.proto); the graph inside uses kiln's op
// vocabulary (domain "kiln", docs/export.md). The file holds every function of the module
// (control-flow regions included), the signature (inputs with unknown dims, weights, how the
// results nest) and the weights as raw little-endian bytes. Weights past the threshold go to
// one external data file beside the model, so a model may exceed protobuf's 2 GB message limit.
//
// Loading trusts nothing in the file: sizes and counts are checked before anything is
// allocated, every name must resolve, the rebuilt module goes through ir::Verify (schema and
// type inference), and nothing in a file is ever executed while it loads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/ir.h"

namespace kiln::engine {

// The version of kiln's graph vocabulary inside the container; a reader refuses newer files.
constexpr int64_t kModelFormatVersion = 1;

struct SavedModel {
  ir::Module module;            // verified, with its signature
  std::vector<Tensor> weights;  // in signature order (the `weight` entries)
};

struct SaveOptions {
  // Weights whose total raw size exceeds this many bytes are written to `<file>.data` instead
  // (protobuf cannot serialize a message of 2 GB or more).
  int64_t external_data_threshold = int64_t{1} << 30;
  std::string producer_version;  // the kiln version writing the file
  // Write the graph in MindSpore's vocabulary when every node has a MindSpore primitive and
  // there is no control flow, so MindSpore can load the file too; else (or when false) in
  // kiln's own.
  bool mindspore_vocabulary = true;
};

// Writes `module` (with a signature whose outputs hold no opaque Python objects) and its
// weights, atomically: a temporary file renamed over `path`, so a failed export never leaves a
// damaged model behind.
// Throws RuntimeError listing the module's run-time interpreter nodes (LAX), if it has any.
void RefuseInterpretNodes(const ir::Module& module);

void SaveModel(const ir::Module& module, const std::vector<Tensor>& weights,
               const std::string& path, const SaveOptions& options = {});
// The bytes SaveModel would write (with every weight inline); for tests and fuzzing seeds.
std::string SerializeModel(const ir::Module& module, const std::vector<Tensor>& weights,
                           const SaveOptions& options = {});

// Reads a model file. ValueError naming the file and what is wrong when it is damaged, not a
// kiln model, or from a newer format version (naming both versions).
SavedModel LoadModel(const std::string& path);
// Reads model bytes; external data (if the file refers to any) is looked up under `directory`
// (empty: refused).
SavedModel ParseModel(const std::string& bytes, const std::string& directory = "");

}  // namespace kiln::engine
