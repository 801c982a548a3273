// model_write.cc - writes a module and its weights as a MindIR protobuf file (model_file.h).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unordered_set>

#include "core/error.h"
#include "engine/mindir_codec.h"
#include "engine/model_file.h"
#include "runtime/interpret.h"

namespace kiln::engine {
namespace mindir {

int DataTypeOf(DType dtype) {
  using P = ::mind_ir::TensorProto;
  switch (dtype) {
    case DType::Bool:
      return P::BOOL;
    case DType::UInt8:
      return P::UINT8;
    case DType::UInt16:
      return P::UINT16;
    case DType::UInt32:
      return P::UINT32;
    case DType::UInt64:
      return P::UINT64;
    case DType::Int8:
      return P::INT8;
    case DType::Int16:
      return P::INT16;
    case DType::Int32:
      return P::INT32;
    case DType::Int64:
      return P::INT64;
    case DType::Float16:
      return P::FLOAT16;
    case DType::BFloat16:
      return P::BFLOAT16;
    case DType::Float32:
      return P::FLOAT;
    case DType::Float64:
      return P::DOUBLE;
  }
  Throw(ErrorKind::Value, "export: unknown dtype");
}

}  // namespace mindir

namespace {

using mind_ir::AttributeProto;
using mind_ir::GraphProto;
using mind_ir::NodeProto;
using mind_ir::TensorProto;

void SetType(TensorProto& t, const TensorMeta& meta) {
  for (int64_t d : meta.shape) t.add_dims(d);
  t.set_data_type(mindir::DataTypeOf(meta.dtype));
  if (meta.weak) t.set_doc_string(mindir::kWeak);
}

void SetValue(TensorProto& t, const Tensor& value) {
  const Tensor dense = value.Contiguous();
  SetType(t, {dense.dtype(), dense.shape()});
  t.set_raw_data(static_cast<const char*>(dense.raw_data()),
                 ByteCount(dense.shape(), dense.dtype()));
}

void SetAttrValue(AttributeProto& a, const AttrValue& value) {
  std::visit(
      [&a](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          a.set_type(AttributeProto::NONE);
        } else if constexpr (std::is_same_v<T, bool>) {
          a.set_type(AttributeProto::BOOL);
          a.set_i(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          a.set_type(AttributeProto::INT64);
          a.set_i(v);
        } else if constexpr (std::is_same_v<T, double>) {
          a.set_type(AttributeProto::DOUBLE);
          a.set_d(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          a.set_type(AttributeProto::STRING);
          a.set_s(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          a.set_type(AttributeProto::TUPLE);  // ints hold the items
          for (int64_t i : v) a.add_ints(i);
        } else {  // DType: a tensor type without dims or data
          a.set_type(AttributeProto::TENSOR);
          a.mutable_t()->set_data_type(mindir::DataTypeOf(v));
        }
      },
      value);
}

void SetLiteral(AttributeProto& a, const ir::Literal& value) {
  a.set_name("literal");
  std::visit(
      [&a](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          a.set_type(AttributeProto::NONE);
        } else if constexpr (std::is_same_v<T, bool>) {
          a.set_type(AttributeProto::BOOL);
          a.set_i(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          a.set_type(AttributeProto::INT64);
          a.set_i(v);
        } else if constexpr (std::is_same_v<T, double>) {
          a.set_type(AttributeProto::DOUBLE);
          a.set_d(v);
        } else {
          a.set_type(AttributeProto::STRING);
          a.set_s(v);
        }
      },
      value);
}

// A tree leaf `result k` is an INT64 named "result"; literals are named "literal"; tuples,
// lists and dicts hold their items in `values` (a dict: key, value, key, value, ...).
void SetTree(AttributeProto& a, const ir::OutputTree& tree) {
  using K = ir::OutputTree::Kind;
  switch (tree.kind) {
    case K::Result:
      a.set_name("result");
      a.set_type(AttributeProto::INT64);
      a.set_i(tree.index);
      return;
    case K::Literal:
      SetLiteral(a, tree.literal);
      return;
    case K::Opaque:
      Throw(ErrorKind::Type,
            "export: the network returns a Python object that is neither a tensor nor a "
            "constant (None, bool, int, float, str); only those can be saved in a model file");
    case K::Tuple:
    case K::List:
      a.set_type(tree.kind == K::Tuple ? AttributeProto::TUPLE : AttributeProto::LIST);
      for (const auto& item : tree.items) SetTree(*a.add_values(), item);
      return;
    case K::Dict:
      a.set_type(AttributeProto::DICT);
      for (size_t i = 0; i < tree.items.size(); ++i) {
        SetTree(*a.add_values(), tree.keys[i]);
        SetTree(*a.add_values(), tree.items[i]);
      }
      return;
  }
}

const char* NodeOpType(const ir::Node& node) {
  switch (node.kind) {
    case ir::NodeKind::Op:
      return OpName(node.op);
    case ir::NodeKind::Const:
      return "Constant";
    case ir::NodeKind::If:
      return "If";
    case ir::NodeKind::While:
      return "While";
    case ir::NodeKind::Call:
      return "Call";
    case ir::NodeKind::Print:
      return "Print";
    case ir::NodeKind::Raise:
      return "Raise";
    case ir::NodeKind::Interpret:  // refused before writing (RefuseInterpretNodes)
      return "Interpret";
  }
  return "";
}

// One function as a GraphProto: values are named by their parameter names or "%node.k".
class FuncWriter {
 public:
  FuncWriter(const ir::Func& func, std::vector<std::string> param_names, GraphProto& graph)
      : func_(func), params_(std::move(param_names)), graph_(graph) {}

  void Write() {
    graph_.set_name(func_.name);
    for (size_t n = 0; n < func_.nodes.size(); ++n) WriteNode(static_cast<int>(n));
    for (ir::ValueRef v : func_.results) {
      auto* out = graph_.add_output();
      out->set_name(Name(v));
      SetType(*out->add_tensor(), func_.meta(v));
    }
  }

  std::string Name(ir::ValueRef v) const {
    if (v.is_none()) return "";
    if (v.is_param()) return params_.at(v.index);
    return "%" + std::to_string(v.node) + "." + std::to_string(v.index);
  }

 private:
  void WriteNode(int index) {
    const ir::Node& node = func_.nodes[index];
    NodeProto& out = *graph_.add_node();
    out.set_name("%" + std::to_string(index));
    out.set_op_type(NodeOpType(node));
    out.set_domain(mindir::kDomain);
    for (ir::ValueRef v : node.inputs) out.add_input(Name(v));
    for (size_t k = 0; k < node.outputs.size(); ++k) out.add_output(Name({index, int(k)}));
    if (node.kind == ir::NodeKind::Op) {
      const OpDef& def = GetOpDef(node.op);
      for (size_t i = 0; i < def.attrs.size() && i < node.attrs.size(); ++i) {
        AttributeProto& a = *out.add_attribute();
        a.set_name(def.attrs[i].name);
        SetAttrValue(a, node.attrs[i]);
      }
    }
    if (node.kind == ir::NodeKind::Const) {
      AttributeProto& a = *out.add_attribute();
      a.set_name(mindir::kConstValue);
      a.set_type(AttributeProto::TENSOR);
      SetValue(*a.mutable_t(), node.value);
    }
    if (!node.callees.empty()) AddStrings(out, mindir::kCallees, node.callees);
    if (node.kind == ir::NodeKind::Print || node.kind == ir::NodeKind::Raise) {
      AttributeProto& a = *out.add_attribute();
      a.set_name(mindir::kText);
      a.set_type(AttributeProto::STRING);
      a.set_s(node.text);
    }
    AttributeProto& types = *out.add_attribute();
    types.set_name(mindir::kTypes);
    types.set_type(AttributeProto::TENSORS);
    for (const TensorMeta& m : node.outputs) SetType(*types.add_tensors(), m);
    if (node.loc.known()) {
      AttributeProto& loc = *out.add_attribute();
      loc.set_name(mindir::kLoc);
      loc.set_type(AttributeProto::TUPLE);
      loc.add_strings(node.loc.file);
      loc.add_ints(node.loc.line);
      loc.add_ints(node.loc.column);
    }
  }

  static void AddStrings(NodeProto& node, const char* name, const std::vector<std::string>& s) {
    AttributeProto& a = *node.add_attribute();
    a.set_name(name);
    a.set_type(AttributeProto::LIST);
    for (const auto& item : s) a.add_strings(item);
  }

  const ir::Func& func_;
  std::vector<std::string> params_;
  GraphProto& graph_;
};

// Names for the entry's parameters: the signature's, made unique and never mistaken for a
// node value ("%..."); an empty or clashing name becomes "input3" / "weight3" (its position).
std::vector<std::string> EntryParamNames(const ir::Signature& sig) {
  std::vector<std::string> names;
  std::unordered_set<std::string> taken;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    std::string name = sig.inputs[i].name;
    if (name.empty() || name[0] == '%' || taken.count(name))
      name = std::string(ir::InputRoleName(sig.inputs[i].role)) + std::to_string(i);
    while (taken.count(name)) name += "_";
    taken.insert(name);
    names.push_back(name);
  }
  return names;
}

struct ExternalData {
  std::string location;  // file name, beside the model
  std::string bytes;
};

void WriteEntry(const ir::Module& module, const std::vector<Tensor>& weights,
                mind_ir::ModelProto& model, ExternalData* external) {
  GraphProto& graph = *model.mutable_graph();
  const ir::Signature& sig = *module.signature();
  const std::vector<std::string> names = EntryParamNames(sig);
  AttributeProto& order = *graph.add_attribute();
  order.set_name(mindir::kEntryParams);
  order.set_type(AttributeProto::LIST);
  size_t w = 0;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    order.add_strings(names[i]);
    const ir::SignatureInput& in = sig.inputs[i];
    if (in.role == ir::InputRole::Input) {
      auto* info = graph.add_input();
      info->set_name(names[i]);
      SetType(*info->add_tensor(), module.entry().params[i]);
      continue;
    }
    const Tensor& value = weights.at(w++);
    KILN_CHECK(in.Accepts(value), Value, "export: weight '", in.name, "' is ",
               ir::TypeString({value.dtype(), value.shape()}), ", the graph takes ",
               in.TypeString());
    TensorProto& p = *graph.add_parameter();
    if (external) {
      const Tensor dense = value.Contiguous();
      const size_t nbytes = ByteCount(dense.shape(), dense.dtype());
      external->bytes.resize((external->bytes.size() + 63) / 64 * 64);  // aligned for mmap
      auto* ext = p.mutable_external_data();
      ext->set_location(external->location);
      ext->set_offset(static_cast<int64_t>(external->bytes.size()));
      ext->set_length(static_cast<int64_t>(nbytes));
      external->bytes.append(static_cast<const char*>(dense.raw_data()), nbytes);
      SetType(p, {dense.dtype(), dense.shape()});
    } else {
      SetValue(p, value);
    }
    p.set_name(names[i]);
  }
  // The tree as the bytes of one AttributeProto in a STRING attribute: MindSpore parses every
  // graph attribute by its own rules and refuses kiln's tree, but passes strings over.
  AttributeProto tree_value;
  SetTree(tree_value, sig.outputs);
  AttributeProto& tree = *graph.add_attribute();
  tree.set_name(mindir::kOutputTree);
  tree.set_type(AttributeProto::STRING);
  tree.set_s(tree_value.SerializeAsString());
  if ((*model.mutable_user_info())[mindir::kVocabularyKey] == "mindspore") {
    graph.set_name(module.entry().name);
    mindir::WriteMindSporeGraph(module, names, model);
  } else {
    FuncWriter(module.entry(), names, graph).Write();
  }
}

mind_ir::ModelProto BuildModel(const ir::Module& module, const std::vector<Tensor>& weights,
                               const SaveOptions& options, ExternalData* external) {
  KILN_CHECK(!module.empty(), Value, "export: the module has no function");
  KILN_CHECK(module.signature().has_value(), Value, "export: the module has no signature");
  const size_t num_weights = module.signature()->CountRole(ir::InputRole::Weight);
  KILN_CHECK(weights.size() == num_weights, Value, "export: the graph binds ", num_weights,
             " weights, got ", weights.size());
  mind_ir::ModelProto model;
  // The MindIR versions MindSpore 2.10 writes: its loader checks them (docs/export.md).
  model.set_ir_version("1.1");
  model.set_mind_ir_version(3);
  model.set_producer_name(mindir::kProducer);
  model.set_producer_version(options.producer_version);
  model.set_model_version("1");
  model.set_little_endian(true);
  (*model.mutable_user_info())[mindir::kFormatVersionKey] = std::to_string(kModelFormatVersion);
  const bool mindspore = options.mindspore_vocabulary && mindir::MindSporeCanRun(module);
  (*model.mutable_user_info())[mindir::kVocabularyKey] = mindspore ? "mindspore" : "kiln";
  WriteEntry(module, weights, model, external);
  const auto& funcs = module.funcs();
  for (size_t f = 1; f < funcs.size(); ++f) {
    GraphProto& g = *model.add_functions();
    std::vector<std::string> names;
    for (size_t p = 0; p < funcs[f]->params.size(); ++p) {
      names.push_back("p" + std::to_string(p));
      auto* info = g.add_input();
      info->set_name(names.back());
      SetType(*info->add_tensor(), funcs[f]->params[p]);
    }
    FuncWriter(*funcs[f], names, g).Write();
  }
  return model;
}

std::string Serialize(const mind_ir::ModelProto& model) {
  std::string bytes;
  KILN_CHECK(model.SerializeToString(&bytes), Value,
             "export: the model does not fit one protobuf message (2 GB); lower "
             "the external data threshold");
  return bytes;
}

int64_t TotalWeightBytes(const std::vector<Tensor>& weights) {
  int64_t total = 0;
  for (const Tensor& w : weights) total += static_cast<int64_t>(ByteCount(w.shape(), w.dtype()));
  return total;
}

// Writes `bytes` to `path` through a temporary file in the same folder and a rename, so a
// reader never sees half a file and an old model survives a failed write.
void WriteAtomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    KILN_CHECK(out.good(), Value, "export: cannot write '", tmp, "': ", std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out.good()) {
      std::remove(tmp.c_str());
      Throw(ErrorKind::Value, "export: writing '", path, "' failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    Throw(ErrorKind::Value, "export: cannot rename '", tmp, "' to '", path,
          "': ", std::strerror(errno));
  }
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

void RefuseInterpretNodes(const ir::Module& module) {
  std::vector<std::string> sites = InterpretSites(module);
  if (sites.empty()) return;
  std::string list;
  for (const auto& s : sites) list += "\n  " + s;
  KILN_CHECK(false, Runtime,
             "export: the graph runs Python code when it runs (LAX run-time interpreter "
             "nodes), which a model file cannot hold:",
             list,
             "\nCompute these with kiln operations (or move them out of the exported function).");
}

std::string SerializeModel(const ir::Module& module, const std::vector<Tensor>& weights,
                           const SaveOptions& options) {
  RefuseInterpretNodes(module);
  return Serialize(BuildModel(module, weights, options, nullptr));
}

void SaveModel(const ir::Module& module, const std::vector<Tensor>& weights,
               const std::string& path, const SaveOptions& options) {
  RefuseInterpretNodes(module);
  if (TotalWeightBytes(weights) <= options.external_data_threshold) {
    WriteAtomically(path, SerializeModel(module, weights, options));
    return;
  }
  ExternalData external{BaseName(path) + ".data", {}};
  const std::string bytes = Serialize(BuildModel(module, weights, options, &external));
  WriteAtomically(path + ".data", external.bytes);  // first: the model must never point at
  WriteAtomically(path, bytes);                     // data that is not there yet
}

}  // namespace kiln::engine
