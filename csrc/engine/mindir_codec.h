// mindir_codec.h - what the MindIR writer and reader share: dtype codes and attribute names.
#pragma once

#include <string>
#include <vector>

#include "core/dtype.h"
#include "engine/model_file.h"
#include "engine/proto/mind_ir.pb.h"

namespace kiln::engine::mindir {

// The domain of kiln's nodes, and the model's user_info key holding kModelFormatVersion.
inline constexpr char kDomain[] = "kiln";
inline constexpr char kProducer[] = "kiln";
inline constexpr char kFormatVersionKey[] = "kiln_format_version";
// Graph attributes: the entry's parameter names in order, and how its results nest.
inline constexpr char kEntryParams[] = "kiln_entry_params";
inline constexpr char kOutputTree[] = "kiln_output_tree";
// Node attributes besides the op's own: result types, source location, callees, text.
inline constexpr char kTypes[] = "kiln_types";
inline constexpr char kLoc[] = "kiln_loc";
inline constexpr char kCallees[] = "kiln_callees";
inline constexpr char kText[] = "kiln_text";
inline constexpr char kConstValue[] = "value";
// A tensor type marked as a weak Python scalar (TensorMeta::weak).
inline constexpr char kWeak[] = "weak";

// Limits a file must stay within; each is far above what a real model has.
inline constexpr int kMaxRank = 64;
inline constexpr int kMaxNodeResults = 4096;

int DataTypeOf(DType dtype);  // mind_ir::TensorProto::DataType
// The kiln dtype of a TensorProto data type; ValueError naming `what` for one kiln lacks.
DType DTypeOfDataType(int64_t data_type, const std::string& what);

// user_info[kVocabularyKey] = "mindspore": the graph names MindSpore's primitives, not kiln's
// ops (a kiln export that MindSpore can run too).
inline constexpr char kVocabularyKey[] = "kiln_vocabulary";

// Whether every node of `module` has a MindSpore primitive and it has no control flow, so that
// WriteMindSporeGraph can write it (mindspore_export.cc).
bool MindSporeCanRun(const ir::Module& module);
// The entry function's nodes and outputs into `model`'s graph, in MindSpore's vocabulary; the
// entry's parameters are named `param_names` (inputs and weights are written by the caller).
void WriteMindSporeGraph(const ir::Module& module, const std::vector<std::string>& param_names,
                         mind_ir::ModelProto& model);

// A model MindSpore wrote (mindspore_import.cc): its primitives as kiln ops, verified.
SavedModel ImportMindSporeModel(const mind_ir::ModelProto& model, const std::string& directory);

}  // namespace kiln::engine::mindir
