// onnx_export.cc - writes a module as an ONNX model (opset 20) for the ops that have ONNX
// operators; an op without one is an error naming it and its source line (docs/export.md).
//
// Weights become initializers; a free input dimension becomes a named size ("arg0_dim0"); a
// kiln op maps to one ONNX operator or a short sequence (matmul's transposes, rsqrt as
// Reciprocal(Sqrt)). Only the entry function is written: control flow is not mapped.
#include "engine/onnx_export.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <unordered_map>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/mindir_codec.h"
#include "engine/model_file.h"
#include "engine/proto/onnx.pb.h"

namespace kiln::engine {
namespace {

using kiln_onnx::AttributeProto;
using kiln_onnx::NodeProto;

constexpr int64_t kOpset = 20;
constexpr int64_t kIrVersion = 9;  // the ONNX IR version of opset 20

const std::unordered_map<OpKind, const char*>& Direct() {
  static const std::unordered_map<OpKind, const char*> ops = {{OpKind::Add, "Add"},
                                                              {OpKind::Sub, "Sub"},
                                                              {OpKind::Mul, "Mul"},
                                                              {OpKind::Div, "Div"},
                                                              {OpKind::Pow, "Pow"},
                                                              {OpKind::Maximum, "Max"},
                                                              {OpKind::Minimum, "Min"},
                                                              {OpKind::Relu, "Relu"},
                                                              {OpKind::Sigmoid, "Sigmoid"},
                                                              {OpKind::Tanh, "Tanh"},
                                                              {OpKind::Exp, "Exp"},
                                                              {OpKind::Log, "Log"},
                                                              {OpKind::Sqrt, "Sqrt"},
                                                              {OpKind::Neg, "Neg"},
                                                              {OpKind::Abs, "Abs"},
                                                              {OpKind::Floor, "Floor"},
                                                              {OpKind::Sin, "Sin"},
                                                              {OpKind::Cos, "Cos"},
                                                              {OpKind::Sign, "Sign"},
                                                              {OpKind::Equal, "Equal"},
                                                              {OpKind::Less, "Less"},
                                                              {OpKind::Greater, "Greater"},
                                                              {OpKind::Where, "Where"},
                                                              {OpKind::Identity, "Identity"},
                                                              {OpKind::StopGradient, "Identity"}};
  return ops;
}

void SetTensor(kiln_onnx::TensorProto& t, const Tensor& value, const std::string& name) {
  const Tensor dense = value.Contiguous();
  for (int64_t d : dense.shape()) t.add_dims(d);
  t.set_data_type(mindir::DataTypeOf(dense.dtype()));  // ONNX uses the same type codes
  t.set_name(name);
  t.set_raw_data(static_cast<const char*>(dense.raw_data()),
                 ByteCount(dense.shape(), dense.dtype()));
}

void SetType(kiln_onnx::ValueInfoProto& info, const TensorMeta& meta, const std::string& name) {
  info.set_name(name);
  auto* tensor = info.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(mindir::DataTypeOf(meta.dtype));
  auto* shape = tensor->mutable_shape();
  for (size_t d = 0; d < meta.shape.size(); ++d) {
    auto* dim = shape->add_dim();
    if (meta.shape[d] < 0)
      dim->set_dim_param(name + "_dim" + std::to_string(d));
    else
      dim->set_dim_value(meta.shape[d]);
  }
}

class OnnxWriter {
 public:
  OnnxWriter(const ir::Module& module, kiln_onnx::GraphProto& graph)
      : func_(module.entry()), graph_(graph) {}

  void Write(const std::vector<std::string>& param_names) {
    params_ = param_names;
    for (size_t n = 0; n < func_.nodes.size(); ++n) WriteNode(n);
    for (size_t r = 0; r < func_.results.size(); ++r) {
      // An output must be a node's own name: a result that is an input or an alias is copied.
      const std::string name = "output" + std::to_string(r);
      Emit("Identity", {Name(func_.results[r])}, {}, name);
      SetType(*graph_.add_output(), func_.meta(func_.results[r]), name);
    }
  }

 private:
  std::string Name(ir::ValueRef v) const {
    if (v.is_none()) return "";
    if (v.is_param()) return params_.at(v.index);
    return "v" + std::to_string(v.node) + "_" + std::to_string(v.index);
  }

  std::string Emit(const std::string& op, const std::vector<std::string>& inputs,
                   std::vector<AttributeProto> attrs, std::string output = "") {
    if (output.empty()) output = "t" + std::to_string(temporaries_++);
    NodeProto& node = *graph_.add_node();
    node.set_op_type(op);
    node.set_name(output);
    for (const auto& in : inputs) node.add_input(in);
    node.add_output(output);
    for (auto& a : attrs) *node.add_attribute() = std::move(a);
    return output;
  }

  std::string Initializer(const Tensor& value) {
    const std::string name = "c" + std::to_string(constants_++);
    SetTensor(*graph_.add_initializer(), value, name);
    return name;
  }
  std::string Int64s(const std::vector<int64_t>& values) {
    Tensor t = Tensor::Empty({static_cast<int64_t>(values.size())}, DType::Int64);
    for (size_t i = 0; i < values.size(); ++i) t.data<int64_t>()[i] = values[i];
    return Initializer(t);
  }

  static AttributeProto Int(const char* name, int64_t v) {
    AttributeProto a;
    a.set_name(name);
    a.set_type(AttributeProto::INT);
    a.set_i(v);
    return a;
  }
  static AttributeProto Ints(const char* name, const std::vector<int64_t>& v) {
    AttributeProto a;
    a.set_name(name);
    a.set_type(AttributeProto::INTS);
    for (int64_t x : v) a.add_ints(x);
    return a;
  }
  static AttributeProto Float(const char* name, double v) {
    AttributeProto a;
    a.set_name(name);
    a.set_type(AttributeProto::FLOAT);
    a.set_f(static_cast<float>(v));
    return a;
  }
  static AttributeProto String(const char* name, const std::string& v) {
    AttributeProto a;
    a.set_name(name);
    a.set_type(AttributeProto::STRING);
    a.set_s(v);
    return a;
  }

  [[noreturn]] void Unsupported(const ir::Node& node, const std::string& why) const {
    std::string where;
    if (node.loc.known()) where = " at " + node.loc.file + ":" + std::to_string(node.loc.line);
    Throw(ErrorKind::Value, "export: ONNX: ", NodeSummary(node), where, ": ", why);
  }

  bool OutputUsed(size_t index, int output) const {
    for (const auto& other : func_.nodes)
      for (ir::ValueRef v : other.inputs)
        if (v.node == static_cast<int>(index) && v.index == output) return true;
    for (ir::ValueRef v : func_.results)
      if (v.node == static_cast<int>(index) && v.index == output) return true;
    return false;
  }

  std::string SwapLastTwo(const std::string& x, ir::ValueRef v) {
    const size_t rank = func_.meta(v).shape.size();
    std::vector<int64_t> perm(rank);
    for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
    std::swap(perm[rank - 1], perm[rank - 2]);
    return Emit("Transpose", {x}, {Ints("perm", perm)});
  }

  void WriteNode(size_t index) {
    const ir::Node& node = func_.nodes[index];
    const std::string out = Name({static_cast<int>(index), 0});
    if (node.kind == ir::NodeKind::Const) {
      Emit("Identity", {Initializer(node.value)}, {}, out);
      return;
    }
    if (node.kind != ir::NodeKind::Op) Unsupported(node, "control flow is not exported to ONNX");
    for (size_t k = 1; k < node.outputs.size(); ++k)
      if (OutputUsed(index, static_cast<int>(k)) && node.op != OpKind::Split)
        Unsupported(node, "its output " + std::to_string(k) + " has no ONNX counterpart");
    std::vector<std::string> in;
    for (ir::ValueRef v : node.inputs) in.push_back(Name(v));
    const Attrs& a = node.attrs;
    if (auto d = Direct().find(node.op); d != Direct().end()) {
      Emit(d->second, in, {}, out);
      return;
    }
    switch (node.op) {
      case OpKind::Rsqrt:
        Emit("Reciprocal", {Emit("Sqrt", in, {})}, {}, out);
        return;
      case OpKind::Square:
        Emit("Mul", {in[0], in[0]}, {}, out);
        return;
      case OpKind::Gelu:
        Emit("Gelu", in, {String("approximate", AttrString(a, 0))}, out);
        return;
      case OpKind::MatMul: {
        std::string x = AttrBool(a, 0) ? SwapLastTwo(in[0], node.inputs[0]) : in[0];
        std::string y = AttrBool(a, 1) ? SwapLastTwo(in[1], node.inputs[1]) : in[1];
        Emit("MatMul", {x, y}, {}, out);
        return;
      }
      case OpKind::Reshape:
        Emit("Reshape", {in[0], Int64s(AttrInts(a, 0))}, {}, out);
        return;
      case OpKind::Transpose:
        Emit("Transpose", in, {Ints("perm", AttrInts(a, 0))}, out);
        return;
      case OpKind::Softmax:
      case OpKind::LogSoftmax:
        Emit(node.op == OpKind::Softmax ? "Softmax" : "LogSoftmax", in,
             {Int("axis", AttrInt(a, 0))}, out);
        return;
      case OpKind::Cast:
      case OpKind::CachedCast: {  // a mixed-precision weight read: a cast to the file
        AttributeProto to = Int("to", mindir::DataTypeOf(AttrDType(a, 0)));
        Emit("Cast", in, {to}, out);
        return;
      }
      case OpKind::LayerNorm:
        WriteLayerNorm(node, in, out);
        return;
      case OpKind::ReduceSum:
      case OpKind::ReduceMean:
      case OpKind::ReduceMax:
      case OpKind::ReduceMin:
        WriteReduce(node, in, out);
        return;
      case OpKind::Split:
        WriteSplit(index, node, in);
        return;
      case OpKind::Conv2d:
        WriteConv(node, in, out);
        return;
      case OpKind::MaxPool2d:
      case OpKind::AvgPool2d:
        WritePool(node, in, out);
        return;
      default:
        Unsupported(node, "this op has no ONNX mapping yet");
    }
  }

  void WriteLayerNorm(const ir::Node& node, std::vector<std::string> in, const std::string& out) {
    const TensorMeta& x = func_.meta(node.inputs[0]);
    const int64_t axis = AttrInt(node.attrs, 0);
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    const int64_t first = axis < 0 ? axis + rank : axis;
    Shape normalized(x.shape.begin() + first, x.shape.end());
    for (int64_t d : normalized)
      if (d < 0) Unsupported(node, "the normalized dimensions must have known sizes");
    if (in.size() < 2 || in[1].empty()) {  // ONNX needs a scale: ones
      Tensor ones =
          Tensor::Empty(normalized, x.dtype == DType::Float64 ? DType::Float64 : DType::Float32);
      for (int64_t i = 0; i < ones.numel(); ++i)
        ones.dtype() == DType::Float64 ? void(ones.data<double>()[i] = 1)
                                       : void(ones.data<float>()[i] = 1);
      in.resize(std::max<size_t>(in.size(), 2));
      in[1] = Initializer(ones);
    }
    Emit("LayerNormalization", in, {Int("axis", axis), Float("epsilon", AttrFloat(node.attrs, 1))},
         out);
  }

  void WriteReduce(const ir::Node& node, const std::vector<std::string>& in,
                   const std::string& out) {
    static const std::unordered_map<OpKind, const char*> names = {
        {OpKind::ReduceSum, "ReduceSum"},
        {OpKind::ReduceMean, "ReduceMean"},
        {OpKind::ReduceMax, "ReduceMax"},
        {OpKind::ReduceMin, "ReduceMin"}};
    if (node.attrs.size() > 2 && !AttrIsNone(node.attrs, 2))
      Unsupported(node, "a reduction with a dtype has no ONNX mapping yet");
    std::vector<std::string> inputs = {in[0]};
    if (!AttrIsNone(node.attrs, 0)) inputs.push_back(Int64s(AttrInts(node.attrs, 0)));
    Emit(names.at(node.op), inputs, {Int("keepdims", AttrBool(node.attrs, 1))}, out);
  }

  void WriteSplit(size_t index, const ir::Node& node, const std::vector<std::string>& in) {
    NodeProto& split = *graph_.add_node();
    split.set_op_type("Split");
    split.set_name("split" + std::to_string(index));
    split.add_input(in[0]);
    split.add_input(Int64s(AttrInts(node.attrs, 1)));
    for (size_t k = 0; k < node.outputs.size(); ++k)
      split.add_output(Name({static_cast<int>(index), static_cast<int>(k)}));
    *split.add_attribute() = Int("axis", AttrInt(node.attrs, 0));
  }

  void WriteConv(const ir::Node& node, const std::vector<std::string>& in, const std::string& out) {
    const Attrs& a = node.attrs;
    const std::vector<int64_t> pad = AttrInts(a, 1);  // top, bottom, left, right
    const Shape& w = func_.meta(node.inputs[1]).shape;
    std::vector<std::string> inputs = {in[0], in[1]};
    if (in.size() > 2 && !in[2].empty()) inputs.push_back(in[2]);
    Emit("Conv", inputs,
         {Ints("kernel_shape", {w[2], w[3]}), Ints("strides", AttrInts(a, 0)),
          Ints("pads", {pad[0], pad[2], pad[1], pad[3]}), Ints("dilations", AttrInts(a, 2)),
          Int("group", AttrInt(a, 3))},
         out);
  }

  void WritePool(const ir::Node& node, const std::vector<std::string>& in, const std::string& out) {
    const Attrs& a = node.attrs;
    const std::vector<int64_t> pad = AttrInts(a, 2);  // height, width: both sides
    std::vector<AttributeProto> attrs = {Ints("kernel_shape", AttrInts(a, 0)),
                                         Ints("strides", AttrInts(a, 1)),
                                         Ints("pads", {pad[0], pad[1], pad[0], pad[1]})};
    if (node.op == OpKind::MaxPool2d) {
      attrs.push_back(Ints("dilations", AttrInts(a, 3)));
      attrs.push_back(Int("ceil_mode", AttrBool(a, 4)));
      Emit("MaxPool", {in[0]}, std::move(attrs), out);
      return;
    }
    if (!AttrIsNone(a, 5)) Unsupported(node, "divisor_override has no ONNX counterpart");
    attrs.push_back(Int("ceil_mode", AttrBool(a, 3)));
    attrs.push_back(Int("count_include_pad", AttrBool(a, 4)));
    Emit("AveragePool", {in[0]}, std::move(attrs), out);
  }

  const ir::Func& func_;
  kiln_onnx::GraphProto& graph_;
  std::vector<std::string> params_;
  int temporaries_ = 0, constants_ = 0;
};

}  // namespace

std::string SerializeOnnx(const ir::Module& module, const std::vector<Tensor>& weights,
                          const std::string& producer_version) {
  KILN_CHECK(!module.empty() && module.signature(), Value, "export: the module has no signature");
  RefuseInterpretNodes(module);
  const ir::Signature& sig = *module.signature();
  for (const auto& f : module.funcs())
    KILN_CHECK(f.get() == &module.entry(), Value, "export: ONNX: control flow (function @", f->name,
               ") is not exported to ONNX; use file_format='MINDIR'");
  kiln_onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  model.set_producer_name("kiln");
  model.set_producer_version(producer_version);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  kiln_onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name(module.entry().name);
  std::vector<std::string> names;
  size_t w = 0;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    const bool weight = sig.inputs[i].role == ir::InputRole::Weight;
    names.push_back((weight ? "weight" : "input") + std::to_string(i) + "_" + sig.inputs[i].name);
    if (weight) {
      KILN_CHECK(w < weights.size(), Value, "export: fewer weights than the graph binds");
      SetTensor(*graph.add_initializer(), weights[w++], names.back());
    } else {
      SetType(*graph.add_input(), module.entry().params[i], names.back());
    }
  }
  KILN_CHECK(w == weights.size(), Value, "export: the graph binds ", w, " weights, got ",
             weights.size());
  OnnxWriter(module, graph).Write(names);
  std::string bytes;
  KILN_CHECK(model.SerializeToString(&bytes), Value,
             "export: ONNX: the model does not fit one protobuf message (2 GB)");
  return bytes;
}

void SaveOnnx(const ir::Module& module, const std::vector<Tensor>& weights, const std::string& path,
              const std::string& producer_version) {
  const std::string bytes = SerializeOnnx(module, weights, producer_version);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    KILN_CHECK(out.good(), Value, "export: cannot write '", tmp, "'");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    KILN_CHECK(out.good(), Value, "export: writing '", path, "' failed (disk full?)");
  }
  KILN_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, Value, "export: cannot rename '", tmp,
             "' to '", path, "'");
}

}  // namespace kiln::engine
