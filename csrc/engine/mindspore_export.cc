// mindspore_export.cc - writes a module in MindSpore's own vocabulary when every node has a
// MindSpore primitive, so MindSpore's `load` + `nn.GraphCell` run kiln's export (docs/export.md).
//
// MindSpore names each primitive through the model's `primitives` table; a PRIMITIVE_FUNCTION
// (MatMul, Add, ReLU, Reshape, ...) takes its attributes as Constant inputs, a PRIMITIVE (Conv2D,
// MaxPool) carries them in the table. kiln reads such a file back with mindspore_import.cc and
// restores what MindSpore's graph cannot say (the output tree, input names) from the kiln_*
// graph attributes, which MindSpore ignores. A module with control flow, or an op without a
// primitive here, is written in kiln's own vocabulary instead (model_write.cc).
#include <unordered_map>

#include "core/error.h"
#include "engine/mindir_codec.h"

namespace kiln::engine::mindir {
namespace {

using mind_ir::AttributeProto;
using mind_ir::GraphProto;
using mind_ir::NodeProto;

const std::unordered_map<OpKind, const char*>& Elementwise() {
  static const std::unordered_map<OpKind, const char*> names = {
      {OpKind::Relu, "ReLU"},       {OpKind::Sigmoid, "Sigmoid"}, {OpKind::Tanh, "Tanh"},
      {OpKind::Exp, "Exp"},         {OpKind::Log, "Log"},         {OpKind::Sqrt, "Sqrt"},
      {OpKind::Rsqrt, "Rsqrt"},     {OpKind::Neg, "Neg"},         {OpKind::Abs, "Abs"},
      {OpKind::Square, "Square"},   {OpKind::Floor, "Floor"},     {OpKind::Add, "Add"},
      {OpKind::Sub, "Sub"},         {OpKind::Mul, "Mul"},         {OpKind::Div, "RealDiv"},
      {OpKind::Maximum, "Maximum"}, {OpKind::Minimum, "Minimum"}};
  return names;
}

bool IsZero(const std::vector<int64_t>& v) {
  for (int64_t x : v)
    if (x != 0) return false;
  return true;
}

// Whether the pooling node is one MindSpore's MaxPool/AvgPool "VALID" expresses.
bool PlainPool(const ir::Node& node, const ir::Func& func, size_t index) {
  const Attrs& a = node.attrs;
  if (!IsZero(AttrInts(a, 2))) return false;
  if (node.op == OpKind::MaxPool2d) {
    if (AttrInts(a, 3) != std::vector<int64_t>{1, 1} || AttrBool(a, 4)) return false;
    for (const auto& other : func.nodes)  // the indices output has no MindSpore counterpart
      for (ir::ValueRef v : other.inputs)
        if (v.node == static_cast<int>(index) && v.index == 1) return false;
    for (ir::ValueRef v : func.results)
      if (v.node == static_cast<int>(index) && v.index == 1) return false;
    return true;
  }
  return !AttrBool(a, 3) && AttrIsNone(a, 5);
}

bool Mappable(const ir::Func& func, size_t index) {
  const ir::Node& node = func.nodes[index];
  if (node.kind == ir::NodeKind::Const) return true;
  if (node.kind != ir::NodeKind::Op) return false;
  if (Elementwise().count(node.op)) return true;
  switch (node.op) {
    case OpKind::MatMul:
    case OpKind::Reshape:
    case OpKind::Transpose:
    case OpKind::Softmax:
    case OpKind::Identity:
    case OpKind::Conv2d:
      return true;
    case OpKind::MaxPool2d:
    case OpKind::AvgPool2d:
      return PlainPool(node, func, index);
    default:
      return false;
  }
}

AttributeProto IntTuple(const std::vector<int64_t>& v) {
  AttributeProto a;
  a.set_type(AttributeProto::TUPLE);
  for (int64_t x : v) {
    AttributeProto* item = a.add_values();
    item->set_type(AttributeProto::INT64);
    item->add_ints(x);  // a tuple's integers go in `ints`, as MindSpore writes them
  }
  return a;
}

class Writer {
 public:
  Writer(const ir::Module& module, const std::vector<std::string>& param_names,
         mind_ir::ModelProto& model)
      : func_(module.entry()),
        params_(param_names),
        model_(model),
        graph_(*model.mutable_graph()) {}

  void Write() {
    for (size_t n = 0; n < func_.nodes.size(); ++n) WriteNode(n);
    std::vector<std::string> results;
    for (ir::ValueRef v : func_.results) results.push_back(Name(v));
    std::string out = results.size() == 1 ? results[0] : Emit("MakeTuple", results, {}, true);
    auto* info = graph_.add_output();
    info->set_name(out);
  }

 private:
  std::string Name(ir::ValueRef v) const {
    if (v.is_param()) return params_.at(v.index);
    auto alias = aliases_.find(v.node);
    if (alias != aliases_.end()) return alias->second;
    return "%" + std::to_string(v.node) + "." + std::to_string(v.index);
  }

  std::string Constant(AttributeProto value) {
    const std::string name = "%c" + std::to_string(constants_++);
    NodeProto& node = *graph_.add_node();
    node.set_name(name);
    node.add_output(name);
    node.set_op_type("Constant");
    value.set_name("value");
    *node.add_attribute() = std::move(value);
    return name;
  }
  std::string Bool(bool v) {
    AttributeProto a;
    a.set_type(AttributeProto::BOOL);
    a.set_i(v);
    return Constant(std::move(a));
  }
  std::string Int(int64_t v) {
    AttributeProto a;
    a.set_type(AttributeProto::INT64);
    a.set_i(v);
    return Constant(std::move(a));
  }

  // A node calling primitive `op` (made with `attrs`, a PRIMITIVE_FUNCTION unless `with_attrs`);
  // returns its output's name (`output`, or a fresh one).
  std::string Emit(const std::string& op, const std::vector<std::string>& inputs,
                   const std::vector<std::pair<std::string, AttributeProto>>& attrs,
                   bool with_attrs, std::string output = "") {
    auto* prim = model_.add_primitives();
    prim->set_name(op + ":" + std::to_string(model_.primitives_size()));
    prim->set_op_type(op);
    prim->set_prim_type(with_attrs ? mind_ir::PrimitiveProto::PRIMITIVE
                                   : mind_ir::PrimitiveProto::PRIMITIVE_FUNCTION);
    for (const auto& [name, value] : attrs) {
      AttributeProto* a = prim->add_attribute();
      *a = value;
      a->set_name(name);
    }
    if (output.empty()) output = "%t" + std::to_string(temporaries_++);
    NodeProto& node = *graph_.add_node();
    node.set_name(output);
    node.add_output(output);
    node.set_op_type("REF::" + prim->name());
    for (const auto& in : inputs) node.add_input(in);
    return output;
  }

  static AttributeProto Str(const std::string& s) {
    AttributeProto a;
    a.set_type(AttributeProto::STRING);
    a.set_s(s);
    return a;
  }
  static AttributeProto I64(int64_t v) {
    AttributeProto a;
    a.set_type(AttributeProto::INT64);
    a.set_i(v);
    return a;
  }

  void WriteNode(size_t index) {
    const ir::Node& node = func_.nodes[index];
    const std::string out = Name({static_cast<int>(index), 0});
    if (node.kind == ir::NodeKind::Const) {
      AttributeProto value;
      value.set_type(AttributeProto::TENSOR);
      const Tensor dense = node.value.Contiguous();
      auto* t = value.mutable_t();
      for (int64_t d : dense.shape()) t->add_dims(d);
      t->set_data_type(DataTypeOf(dense.dtype()));
      if (node.outputs[0].weak) t->set_doc_string(kWeak);  // MindSpore ignores it; kiln reads it
      t->set_raw_data(static_cast<const char*>(dense.raw_data()),
                      ByteCount(dense.shape(), dense.dtype()));
      aliases_[static_cast<int>(index)] = Constant(std::move(value));
      return;
    }
    std::vector<std::string> in;
    for (ir::ValueRef v : node.inputs)
      if (!v.is_none()) in.push_back(Name(v));
    const Attrs& a = node.attrs;
    if (auto e = Elementwise().find(node.op); e != Elementwise().end()) {
      Emit(e->second, in, {}, false, out);
    } else if (node.op == OpKind::Identity) {
      aliases_[static_cast<int>(index)] = in[0];
    } else if (node.op == OpKind::MatMul) {
      Emit("MatMul", {in[0], in[1], Bool(AttrBool(a, 0)), Bool(AttrBool(a, 1))}, {}, false, out);
    } else if (node.op == OpKind::Reshape || node.op == OpKind::Transpose) {
      Emit(node.op == OpKind::Reshape ? "Reshape" : "Transpose",
           {in[0], Constant(IntTuple(AttrInts(a, 0)))}, {}, false, out);
    } else if (node.op == OpKind::Softmax) {
      Emit("Softmax", {in[0], Constant(IntTuple({AttrInt(a, 0)}))}, {}, false, out);
    } else if (node.op == OpKind::Conv2d) {
      WriteConv(node, in, out);
    } else {
      WritePool(node, in, out);
    }
  }

  void WriteConv(const ir::Node& node, const std::vector<std::string>& in, const std::string& out) {
    const Attrs& a = node.attrs;
    const Shape& w = func_.meta(node.inputs[1]).shape;
    const std::vector<int64_t> stride = AttrInts(a, 0), pad = AttrInts(a, 1),
                               dilation = AttrInts(a, 2);
    std::vector<std::pair<std::string, AttributeProto>> attrs = {
        {"kernel_size", IntTuple({w[2], w[3]})},
        {"mode", I64(1)},
        {"out_channel", I64(w[0])},
        {"pad_mode", Str("pad")},
        {"pad", IntTuple(pad)},
        {"pad_list", IntTuple(pad)},
        {"stride", IntTuple({1, 1, stride[0], stride[1]})},
        {"dilation", IntTuple({1, 1, dilation[0], dilation[1]})},
        {"group", I64(AttrInt(a, 3))},
        {"groups", I64(AttrInt(a, 3))},
        {"format", Str("NCHW")}};
    const bool bias = in.size() == 3;
    const std::string conv = Emit("Conv2D", {in[0], in[1]}, attrs, true, bias ? "" : out);
    if (bias) Emit("BiasAdd", {conv, in[2], Int(0)}, {}, false, out);  // data format 0: NCHW
  }

  void WritePool(const ir::Node& node, const std::vector<std::string>& in, const std::string& out) {
    const std::vector<int64_t> k = AttrInts(node.attrs, 0), s = AttrInts(node.attrs, 1);
    std::vector<std::pair<std::string, AttributeProto>> attrs = {
        {"kernel_size", IntTuple({1, 1, k[0], k[1]})},
        {"strides", IntTuple({1, 1, s[0], s[1]})},
        {"pad_mode", Str("VALID")},
        {"format", Str("NCHW")}};
    Emit(node.op == OpKind::MaxPool2d ? "MaxPool" : "AvgPool", {in[0]}, attrs, true, out);
  }

  const ir::Func& func_;
  const std::vector<std::string>& params_;
  mind_ir::ModelProto& model_;
  GraphProto& graph_;
  std::unordered_map<int, std::string> aliases_;  // node -> the name its value goes by
  int constants_ = 0, temporaries_ = 0;
};

}  // namespace

bool MindSporeCanRun(const ir::Module& module) {
  if (module.funcs().size() != 1) return false;
  const ir::Func& entry = module.entry();
  for (size_t n = 0; n < entry.nodes.size(); ++n)
    if (!Mappable(entry, n)) return false;
  const ir::OutputTree& tree = module.signature()->outputs;
  if (tree.kind == ir::OutputTree::Kind::Result) return true;
  if (tree.kind != ir::OutputTree::Kind::Tuple || tree.items.empty()) return false;
  for (const auto& item : tree.items)
    if (item.kind != ir::OutputTree::Kind::Result) return false;
  return true;
}

void WriteMindSporeGraph(const ir::Module& module, const std::vector<std::string>& param_names,
                         mind_ir::ModelProto& model) {
  Writer(module, param_names, model).Write();
}

}  // namespace kiln::engine::mindir
