// model_read.cc - reads a MindIR model file back into a verified module and its weights.
//
// The file is untrusted: every count, rank, dimension and byte length is checked before it
// sizes an allocation, names must resolve within their function, and the rebuilt module is
// verified (schema, attribute types, type inference, callees, no recursion) before use.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "engine/mindir_codec.h"
#include "engine/model_file.h"

namespace kiln::engine {
namespace mindir {

DType DTypeOfDataType(int64_t data_type, const std::string& what) {
  using P = ::mind_ir::TensorProto;
  switch (data_type) {
    case P::BOOL:
      return DType::Bool;
    case P::UINT8:
      return DType::UInt8;
    case P::UINT16:
      return DType::UInt16;
    case P::UINT32:
      return DType::UInt32;
    case P::UINT64:
      return DType::UInt64;
    case P::INT8:
      return DType::Int8;
    case P::INT16:
      return DType::Int16;
    case P::INT32:
      return DType::Int32;
    case P::INT64:
      return DType::Int64;
    case P::FLOAT16:
      return DType::Float16;
    case P::BFLOAT16:
      return DType::BFloat16;
    case P::FLOAT:
      return DType::Float32;
    case P::DOUBLE:
    case P::FLOAT64:
      return DType::Float64;
    default:
      Throw(ErrorKind::Value, what, ": data type ", data_type, " is not one kiln has");
  }
}

}  // namespace mindir

namespace {

using mind_ir::AttributeProto;
using mind_ir::GraphProto;
using mind_ir::NodeProto;
using mind_ir::TensorProto;

TensorMeta ReadType(const TensorProto& t, const std::string& what, bool allow_unknown) {
  KILN_CHECK(t.dims_size() <= mindir::kMaxRank, Value, what, ": rank ", t.dims_size(),
             " is more than ", mindir::kMaxRank);
  TensorMeta meta;
  meta.dtype = mindir::DTypeOfDataType(t.data_type(), what);
  for (int64_t d : t.dims()) {
    KILN_CHECK(d >= 0 || (allow_unknown && d == -1), Value, what, ": dimension ", d,
               " is not a size");
    meta.shape.push_back(d);
  }
  meta.weak = t.doc_string() == mindir::kWeak;
  if (!allow_unknown) CheckShapeSize(what.c_str(), meta.shape, meta.dtype);
  return meta;
}

// Reads external data referred to by `t` from `directory`: a plain file name beside the model,
// never a path that could leave that folder.
std::string ReadExternal(const TensorProto& t, const std::string& directory, size_t nbytes,
                         const std::string& what) {
  const auto& ext = t.external_data();
  const std::string& name = ext.location();
  KILN_CHECK(!directory.empty(), Value, what, ": refers to external data '", name,
             "', which is only read beside a model file");
  KILN_CHECK(!name.empty() && name != "." && name != ".." &&
                 name.find_first_of("/\\") == std::string::npos,
             Value, what, ": external data location '", name, "' is not a file name");
  KILN_CHECK(
      ext.offset() >= 0 && ext.length() >= 0 && static_cast<uint64_t>(ext.length()) == nbytes,
      Value, what, ": external data holds ", ext.length(), " bytes at offset ", ext.offset(),
      ", the tensor needs ", nbytes);
  std::ifstream in(directory + "/" + name, std::ios::binary | std::ios::ate);
  KILN_CHECK(in.good(), Value, what, ": cannot open external data '", name, "'");
  const auto size = static_cast<uint64_t>(in.tellg());
  KILN_CHECK(static_cast<uint64_t>(ext.offset()) <= size &&
                 nbytes <= size - static_cast<uint64_t>(ext.offset()),
             Value, what, ": external data '", name, "' has ", size, " bytes, the tensor lies at ",
             ext.offset(), "..", ext.offset() + ext.length());
  std::string bytes(nbytes, '\0');
  in.seekg(ext.offset());
  in.read(bytes.data(), static_cast<std::streamsize>(nbytes));
  KILN_CHECK(in.good(), Value, what, ": reading external data '", name, "' failed");
  return bytes;
}

Tensor ReadValue(const TensorProto& t, const std::string& directory, const std::string& what) {
  const TensorMeta meta = ReadType(t, what, false);
  const size_t nbytes = ByteCount(meta.shape, meta.dtype);
  Tensor value = Tensor::Empty(meta.shape, meta.dtype);
  if (t.has_external_data()) {
    const std::string bytes = ReadExternal(t, directory, nbytes, what);
    if (nbytes) std::memcpy(value.raw_data(), bytes.data(), nbytes);
    return value;
  }
  KILN_CHECK(t.raw_data().size() == nbytes, Value, what, ": holds ", t.raw_data().size(),
             " bytes of data, ", ir::TypeString(meta), " needs ", nbytes);
  if (nbytes) std::memcpy(value.raw_data(), t.raw_data().data(), nbytes);
  return value;
}

AttrValue ReadAttr(const AttributeProto& a, const std::string& what) {
  switch (a.type()) {
    case AttributeProto::NONE:
      return std::monostate{};
    case AttributeProto::BOOL:
      return a.i() != 0;
    case AttributeProto::INT64:
      return a.i();
    case AttributeProto::DOUBLE:
      return a.d();
    case AttributeProto::STRING:
      return a.s();
    case AttributeProto::TUPLE:
      return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case AttributeProto::TENSOR:
      return mindir::DTypeOfDataType(a.t().data_type(), what);
    default:
      Throw(ErrorKind::Value, what, ": attribute type ", static_cast<int>(a.type()),
            " is not one kiln's ops take");
  }
}

ir::Literal ReadLiteral(const AttributeProto& a, const std::string& what) {
  switch (a.type()) {
    case AttributeProto::NONE:
      return std::monostate{};
    case AttributeProto::BOOL:
      return a.i() != 0;
    case AttributeProto::INT64:
      return a.i();
    case AttributeProto::DOUBLE:
      return a.d();
    case AttributeProto::STRING:
      return a.s();
    default:
      Throw(ErrorKind::Value, what, ": output constant of attribute type ",
            static_cast<int>(a.type()), " is not a literal");
  }
}

ir::OutputTree ReadTree(const AttributeProto& a, int depth, const std::string& what) {
  KILN_CHECK(depth < ir::kMaxOutputDepth, Value, what, ": outputs nest deeper than ",
             ir::kMaxOutputDepth);
  if (a.name() == "result") return ir::OutputTree::ResultLeaf(a.i());
  using K = ir::OutputTree::Kind;
  std::vector<ir::OutputTree> items;
  switch (a.type()) {
    case AttributeProto::TUPLE:
    case AttributeProto::LIST:
      for (const auto& v : a.values()) items.push_back(ReadTree(v, depth + 1, what));
      return ir::OutputTree::Sequence(a.type() == AttributeProto::TUPLE ? K::Tuple : K::List,
                                      std::move(items));
    case AttributeProto::DICT: {
      KILN_CHECK(a.values_size() % 2 == 0, Value, what, ": a dict output needs key/value pairs");
      std::vector<ir::OutputTree> keys;
      for (int i = 0; i < a.values_size(); i += 2) {
        keys.push_back(ir::OutputTree::LiteralLeaf(ReadLiteral(a.values(i), what)));
        items.push_back(ReadTree(a.values(i + 1), depth + 1, what));
      }
      return ir::OutputTree::Dict(std::move(keys), std::move(items));
    }
    default:
      return ir::OutputTree::LiteralLeaf(ReadLiteral(a, what));
  }
}

// Protobuf's nesting limit for parsed messages: an output tree nests one message per level.
constexpr int kRecursionLimit = ir::kMaxOutputDepth + 32;

// The output tree, stored as the bytes of one AttributeProto in a STRING attribute.
ir::OutputTree ReadTreeAttr(const AttributeProto& attr) {
  KILN_CHECK(attr.type() == AttributeProto::STRING, Value, "the output tree is not a string");
  AttributeProto tree;
  google::protobuf::io::ArrayInputStream raw(attr.s().data(), static_cast<int>(attr.s().size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetRecursionLimit(kRecursionLimit);
  KILN_CHECK(tree.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage(), Value,
             "the output tree is damaged");
  return ReadTree(tree, 0, "outputs");
}

const AttributeProto* FindAttr(const NodeProto& node, const char* name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

ir::NodeKind KindOf(const std::string& op_type) {
  static const std::unordered_map<std::string, ir::NodeKind> kinds = {
      {"Constant", ir::NodeKind::Const}, {"If", ir::NodeKind::If},
      {"While", ir::NodeKind::While},    {"Call", ir::NodeKind::Call},
      {"Print", ir::NodeKind::Print},    {"Raise", ir::NodeKind::Raise}};
  auto it = kinds.find(op_type);
  return it == kinds.end() ? ir::NodeKind::Op : it->second;
}

// Rebuilds one function's parameters and nodes; values resolve by name within the function.
class FuncReader {
 public:
  // Constants inside functions are stored inline (never as external data), so a reader needs
  // no directory; only the entry's weights do (ReadEntry).
  FuncReader(const GraphProto& graph, ir::Func& func) : graph_(graph), func_(func) {}

  void AddParam(const std::string& name, const TensorMeta& meta) {
    Define(name, {-1, static_cast<int>(func_.params.size())});
    func_.params.push_back(meta);
    func_.param_names.push_back(name);
  }

  void ReadBody() {
    for (int n = 0; n < graph_.node_size(); ++n) ReadNode(graph_.node(n), n);
    for (const auto& out : graph_.output()) func_.results.push_back(Resolve(out.name()));
  }

 private:
  std::string Where() const { return "function '" + func_.name + "'"; }

  void Define(const std::string& name, ir::ValueRef v) {
    KILN_CHECK(!name.empty() && values_.emplace(name, v).second, Value, Where(), ": value name '",
               name, "' is empty or defined twice");
  }

  ir::ValueRef Resolve(const std::string& name) const {
    if (name.empty()) return ir::ValueRef::None();
    auto it = values_.find(name);
    KILN_CHECK(it != values_.end(), Value, Where(), ": value '", name,
               "' is used before it is defined");
    return it->second;
  }

  void ReadNode(const NodeProto& proto, int index) {
    const std::string what =
        Where() + " node " + std::to_string(index) + " (" + proto.op_type() + ")";
    KILN_CHECK(proto.domain() == mindir::kDomain, Value, what, ": domain '", proto.domain(),
               "' is not kiln's");
    ir::Node node;
    node.kind = KindOf(proto.op_type());
    for (const auto& in : proto.input()) node.inputs.push_back(Resolve(in));
    const AttributeProto* types = FindAttr(proto, mindir::kTypes);
    KILN_CHECK(types && types->tensors_size() == proto.output_size() &&
                   proto.output_size() <= mindir::kMaxNodeResults,
               Value, what, ": needs one result type per output");
    for (const auto& t : types->tensors()) node.outputs.push_back(ReadType(t, what, true));
    if (node.kind == ir::NodeKind::Op) ReadOp(proto, node, what);
    if (node.kind == ir::NodeKind::Const) {
      const AttributeProto* value = FindAttr(proto, mindir::kConstValue);
      KILN_CHECK(value && value->type() == AttributeProto::TENSOR, Value, what,
                 ": has no tensor value");
      node.value = ReadValue(value->t(), "", what);
    }
    if (const AttributeProto* callees = FindAttr(proto, mindir::kCallees))
      node.callees.assign(callees->strings().begin(), callees->strings().end());
    if (const AttributeProto* text = FindAttr(proto, mindir::kText)) node.text = text->s();
    ReadLoc(proto, node);
    func_.nodes.push_back(std::move(node));
    for (int k = 0; k < proto.output_size(); ++k) Define(proto.output(k), {index, k});
  }

  static void ReadOp(const NodeProto& proto, ir::Node& node, const std::string& what) {
    try {
      node.op = OpKindFromName(proto.op_type());
    } catch (const Error&) {
      Throw(ErrorKind::Value, what, ": op '", proto.op_type(), "' is not one this kiln has");
    }
    const OpDef& def = GetOpDef(node.op);
    for (const AttrSpec& spec : def.attrs) {
      const AttributeProto* a = FindAttr(proto, spec.name);
      node.attrs.push_back(a ? ReadAttr(*a, what + " attribute '" + spec.name + "'")
                             : spec.default_value);
    }
  }

  static void ReadLoc(const NodeProto& proto, ir::Node& node) {
    const AttributeProto* loc = FindAttr(proto, mindir::kLoc);
    if (!loc || loc->strings_size() != 1 || loc->ints_size() != 2) return;
    node.loc.file = loc->strings(0);
    node.loc.line = static_cast<int>(std::clamp<int64_t>(loc->ints(0), 0, 1 << 30));
    node.loc.column = static_cast<int>(std::clamp<int64_t>(loc->ints(1), 0, 1 << 30));
  }

  const GraphProto& graph_;
  ir::Func& func_;
  std::unordered_map<std::string, ir::ValueRef> values_;
};

const AttributeProto* FindGraphAttr(const GraphProto& graph, const char* name) {
  for (const auto& a : graph.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// The entry: its parameters in the recorded order, each a user input (graph.input) or a weight
// (graph.parameter, whose value is read too), then the signature.
void ReadEntry(const GraphProto& graph, ir::Module& module, const std::string& directory,
               std::vector<Tensor>& weights, FuncReader& reader) {
  const AttributeProto* order = FindGraphAttr(graph, mindir::kEntryParams);
  KILN_CHECK(order != nullptr, Value, "the main graph does not list its parameters");
  std::unordered_map<std::string, const mind_ir::ValueInfoProto*> inputs;
  std::unordered_map<std::string, const TensorProto*> params;
  for (const auto& in : graph.input()) inputs.emplace(in.name(), &in);
  for (const auto& p : graph.parameter()) params.emplace(p.name(), &p);
  KILN_CHECK(static_cast<size_t>(order->strings_size()) == inputs.size() + params.size(), Value,
             "the main graph lists ", order->strings_size(), " parameters but has ", inputs.size(),
             " inputs and ", params.size(), " weights");
  ir::Signature sig;
  std::unordered_set<std::string> seen;
  for (const std::string& name : order->strings()) {
    KILN_CHECK(seen.insert(name).second, Value, "parameter '", name, "' is listed twice");
    ir::SignatureInput in;
    in.name = name;
    TensorMeta meta;
    if (auto it = inputs.find(name); it != inputs.end()) {
      KILN_CHECK(it->second->tensor_size() == 1, Value, "input '", name, "' has no type");
      meta = ReadType(it->second->tensor(0), "input '" + name + "'", true);
    } else {
      auto p = params.find(name);
      KILN_CHECK(p != params.end(), Value, "parameter '", name, "' is neither input nor weight");
      in.role = ir::InputRole::Weight;
      weights.push_back(ReadValue(*p->second, directory, "weight '" + name + "'"));
      meta = {weights.back().dtype(), weights.back().shape()};
    }
    in.dtype = meta.dtype;
    in.shape = meta.shape;
    sig.inputs.push_back(std::move(in));
    reader.AddParam(name, meta);
  }
  const AttributeProto* tree = FindGraphAttr(graph, mindir::kOutputTree);
  KILN_CHECK(tree != nullptr, Value, "the main graph does not say how its results nest");
  sig.outputs = ReadTreeAttr(*tree);
  module.set_signature(std::move(sig));
}

// Whether the file is kiln's own (true) or MindSpore's (false); anything else is refused.
bool CheckHeader(const mind_ir::ModelProto& model) {
  const auto& info = model.user_info();
  auto version = info.find(mindir::kFormatVersionKey);
  if (version == info.end() && model.producer_name() == "MindSpore") return false;
  KILN_CHECK(version != info.end(), Value, "not a kiln or MindSpore model (written by '",
             model.producer_name(), "'; docs/export.md)");
  int64_t v = 0;
  try {
    size_t used = 0;
    v = std::stoll(version->second, &used);
    KILN_CHECK(used == version->second.size(), Value, "");
  } catch (const std::exception&) {
    Throw(ErrorKind::Value, "format version '", version->second, "' is not a number");
  }
  KILN_CHECK(v <= kModelFormatVersion && v >= 1, Value, "the file has format version ", v,
             ", this kiln reads versions 1 to ", kModelFormatVersion,
             v > kModelFormatVersion ? ": it was written by a newer kiln, upgrade to load it" : "");
  KILN_CHECK(!model.has_little_endian() || model.little_endian(), Value,
             "the file holds big-endian data");
  return true;
}

// A kiln export written in MindSpore's vocabulary: imported as MindSpore's files are, then
// given back what kiln recorded beside it (how the results nest).
SavedModel ImportKilnInMindSporeVocabulary(const mind_ir::ModelProto& model,
                                           const std::string& directory) {
  SavedModel saved = mindir::ImportMindSporeModel(model, directory);
  const AttributeProto* tree = FindGraphAttr(model.graph(), mindir::kOutputTree);
  if (tree != nullptr) {
    ir::Signature sig = *saved.module.signature();
    sig.outputs = ReadTreeAttr(*tree);
    saved.module.set_signature(std::move(sig));
    ir::Verify(saved.module);
  }
  return saved;
}

}  // namespace

SavedModel ParseModel(const std::string& bytes, const std::string& directory) {
  mind_ir::ModelProto model;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  // Output trees nest one message per level; the default limit (100) would refuse deep ones
  // that ir::kMaxOutputDepth allows. Still bounded, so a hostile file cannot exhaust the stack.
  coded.SetRecursionLimit(kRecursionLimit);
  KILN_CHECK(bytes.size() < (size_t{1} << 31) && model.ParseFromCodedStream(&coded) &&
                 coded.ConsumedEntireMessage(),
             Value, "not a MindIR file (the protobuf is damaged)");
  if (!CheckHeader(model)) return mindir::ImportMindSporeModel(model, directory);
  auto vocabulary = model.user_info().find(mindir::kVocabularyKey);
  if (vocabulary != model.user_info().end() && vocabulary->second == "mindspore")
    return ImportKilnInMindSporeVocabulary(model, directory);
  SavedModel saved;
  std::vector<const GraphProto*> graphs = {&model.graph()};
  for (const auto& g : model.functions()) graphs.push_back(&g);
  std::vector<ir::Func*> funcs;
  for (const GraphProto* g : graphs) {
    KILN_CHECK(!g->name().empty() && !saved.module.Find(g->name()), Value, "function name '",
               g->name(), "' is empty or used twice");
    funcs.push_back(&saved.module.AddFunc(g->name()));
  }
  for (size_t f = 0; f < graphs.size(); ++f) {
    FuncReader reader(*graphs[f], *funcs[f]);
    if (f == 0) {
      ReadEntry(*graphs[0], saved.module, directory, saved.weights, reader);
    } else {
      for (const auto& in : graphs[f]->input()) {
        KILN_CHECK(in.tensor_size() == 1, Value, "function '", graphs[f]->name(), "': parameter '",
                   in.name(), "' has no type");
        reader.AddParam(in.name(), ReadType(in.tensor(0), "parameter '" + in.name() + "'", true));
      }
    }
    reader.ReadBody();
  }
  ir::Verify(saved.module);
  return saved;
}

SavedModel LoadModel(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  KILN_CHECK(in.good(), Value, "load: cannot open '", path, "': ", std::strerror(errno));
  const auto size = static_cast<uint64_t>(in.tellg());
  KILN_CHECK(size < (uint64_t{1} << 31), Value, "load: '", path, "' has ", size,
             " bytes; a MindIR file holds at most 2 GB (larger weights go to external data)");
  std::string bytes(size, '\0');
  in.seekg(0);
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  KILN_CHECK(in.good(), Value, "load: reading '", path, "' failed");
  const size_t slash = path.find_last_of('/');
  const std::string directory = slash == std::string::npos ? "." : path.substr(0, slash);
  try {
    return ParseModel(bytes, directory.empty() ? "/" : directory);
  } catch (const Error& e) {
    Throw(e.kind(), "load: '", path, "': ", e.what());
  }
}

}  // namespace kiln::engine
