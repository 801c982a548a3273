// mindir_codec.h - what the MindIR writer and reader share: dtype codes and attribute names.
#pragma once

#include <string>

#include "core/dtype.h"
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

}  // namespace kiln::engine::mindir
