// mindspore_import.cc - reads a MindIR file that MindSpore wrote: its primitives become kiln's
// registry ops (docs/export.md, "MindSpore's files").
//
// MindSpore's graph names each primitive through the model's `primitives` table
// (op_type "REF::MatMul:4"); a PRIMITIVE_FUNCTION takes its attributes as constant inputs, a
// PRIMITIVE carries them in the table. Its side-effect plumbing (Load, UpdateState, MakeTuple of
// states, Depend) orders reads of parameters, which kiln's graph does by data flow, so those
// nodes pass their value through. A primitive without a mapping is an error naming it. Every node
// is built with ir::Builder, so types come from kiln's own inference and the result is verified.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <unordered_map>

#include "core/error.h"
#include "engine/mindir_codec.h"
#include "engine/model_file.h"

namespace kiln::engine::mindir {
namespace {

using mind_ir::AttributeProto;
using mind_ir::NodeProto;

// A value of MindSpore's graph: a tensor in the kiln graph, a compile-time constant (an
// attribute passed as an input), a tuple, or side-effect state that kiln does not need.
struct MsValue {
  enum class Kind { Tensor, Constant, Tuple, State } kind = Kind::State;
  ir::ValueRef ref;
  AttrValue constant;
  std::vector<MsValue> items;
};

AttrValue ConstantOf(const AttributeProto& a, const std::string& what) {
  switch (a.type()) {
    case AttributeProto::BOOL:
      return a.i() != 0;
    case AttributeProto::INT8:
    case AttributeProto::INT16:
    case AttributeProto::INT32:
    case AttributeProto::INT64:
    case AttributeProto::UINT8:
      return a.ints_size() == 1 ? a.ints(0) : a.i();
    case AttributeProto::FLOAT:
      return static_cast<double>(a.floats_size() == 1 ? a.floats(0) : a.f());
    case AttributeProto::DOUBLE:
      return a.doubles_size() == 1 ? a.doubles(0) : a.d();
    case AttributeProto::STRING:
      return a.strings_size() == 1 ? a.strings(0) : a.s();
    case AttributeProto::NONE:
      return std::monostate{};
    case AttributeProto::TUPLE:
    case AttributeProto::LIST: {
      std::vector<int64_t> ints;
      for (const auto& v : a.values()) {
        const AttrValue item = ConstantOf(v, what);
        KILN_CHECK(std::holds_alternative<int64_t>(item), Value, what,
                   ": a tuple constant of other than integers is not supported");
        ints.push_back(std::get<int64_t>(item));
      }
      return ints;
    }
    default:
      Throw(ErrorKind::Value, what, ": constant of attribute type ", static_cast<int>(a.type()),
            " is not supported");
  }
}

const AttributeProto* FindAttr(const google::protobuf::RepeatedPtrField<AttributeProto>& attrs,
                               const char* name) {
  for (const auto& a : attrs)
    if (a.name() == name) return &a;
  return nullptr;
}

class Importer {
 public:
  Importer(const mind_ir::ModelProto& model, SavedModel& out) : model_(model), out_(out) {
    for (const auto& p : model.primitives()) primitives_.emplace(p.name(), &p);
  }

  void Run() {
    const auto& graph = model_.graph();
    KILN_CHECK(model_.functions_size() == 0, Value,
               "MindSpore graphs with subgraphs (control flow) are not imported yet");
    ir::Func& main = out_.module.AddFunc("main");
    ir::Builder b(out_.module, main);
    ir::Signature sig;
    for (const auto& in : graph.input()) {
      KILN_CHECK(in.tensor_size() == 1, Value, "input '", in.name(), "' has no tensor type");
      TensorMeta meta{DTypeOfDataType(in.tensor(0).data_type(), in.name()), {}};
      for (int64_t d : in.tensor(0).dims()) meta.shape.push_back(d < 0 ? -1 : d);
      Define(in.name(), TensorValue(b.Param(meta, ShortName(in.name()))));
      sig.inputs.push_back({ir::InputRole::Input, ShortName(in.name()), meta.dtype, meta.shape});
    }
    for (const auto& p : graph.parameter()) {
      const std::string name = p.ref_key().empty() ? ShortName(p.name()) : p.ref_key();
      KILN_CHECK(!p.has_external_data(), Value, "weight '", name,
                 "': MindSpore's external weight files are not imported yet");
      out_.weights.push_back(ReadWeight(p, "weight '" + name + "'"));
      const kiln::Tensor& w = out_.weights.back();
      Define(p.name(), TensorValue(b.Param({w.dtype(), w.shape()}, name)));
      sig.inputs.push_back({ir::InputRole::Weight, name, w.dtype(), w.shape()});
    }
    for (const auto& node : graph.node()) ImportNode(b, node);
    std::vector<ir::ValueRef> results;
    std::vector<ir::OutputTree> leaves;
    for (const auto& out : graph.output()) Flatten(Lookup(out.name()), results, leaves);
    b.Return(results);
    sig.outputs = leaves.size() == 1 && graph.output_size() == 1 &&
                          Lookup(graph.output(0).name()).kind == MsValue::Kind::Tensor
                      ? leaves[0]
                      : ir::OutputTree::Sequence(ir::OutputTree::Kind::Tuple, leaves);
    out_.module.set_signature(std::move(sig));
  }

 private:
  using TensorProto_ = mind_ir::TensorProto;

  static std::string ShortName(const std::string& name) {
    const size_t colon = name.rfind(':');
    return colon == std::string::npos ? name : name.substr(colon + 1);
  }
  static MsValue TensorValue(ir::ValueRef ref) { return {MsValue::Kind::Tensor, ref, {}, {}}; }

  kiln::Tensor ReadWeight(const TensorProto_& p, const std::string& what) {
    TensorMeta meta{DTypeOfDataType(p.data_type(), what), {}};
    KILN_CHECK(p.dims_size() <= kMaxRank, Value, what, ": rank ", p.dims_size(), " is too large");
    for (int64_t d : p.dims()) {
      KILN_CHECK(d >= 0, Value, what, ": dimension ", d, " is not a size");
      meta.shape.push_back(d);
    }
    const size_t nbytes = ByteCount(meta.shape, meta.dtype);
    KILN_CHECK(p.raw_data().size() == nbytes, Value, what, ": holds ", p.raw_data().size(),
               " bytes of data, needs ", nbytes);
    kiln::Tensor t = kiln::Tensor::Empty(meta.shape, meta.dtype);
    if (nbytes) std::memcpy(t.raw_data(), p.raw_data().data(), nbytes);
    return t;
  }

  void Define(const std::string& name, MsValue v) {
    KILN_CHECK(values_.emplace(name, std::move(v)).second, Value, "value '", name,
               "' is defined twice");
  }
  const MsValue& Lookup(const std::string& name) const {
    auto it = values_.find(name);
    KILN_CHECK(it != values_.end(), Value, "value '", name, "' is used before it is defined");
    return it->second;
  }

  void Flatten(const MsValue& v, std::vector<ir::ValueRef>& results,
               std::vector<ir::OutputTree>& leaves) const {
    if (v.kind == MsValue::Kind::Tensor) {
      leaves.push_back(ir::OutputTree::ResultLeaf(static_cast<int64_t>(results.size())));
      results.push_back(v.ref);
    } else if (v.kind == MsValue::Kind::Tuple) {
      for (const auto& item : v.items) Flatten(item, results, leaves);
    } else {
      Throw(ErrorKind::Value, "a MindSpore graph output that is not a tensor is not supported");
    }
  }

  void ImportNode(ir::Builder& b, const NodeProto& node) {
    KILN_CHECK(node.output_size() == 1, Value, "node '", node.name(), "' has ", node.output_size(),
               " outputs; MindSpore nodes have one");
    if (node.op_type() == "Constant") {
      const AttributeProto* value = FindAttr(node.attribute(), "value");
      KILN_CHECK(value != nullptr, Value, "constant '", node.name(), "' has no value");
      MsValue v;
      if (value->type() == AttributeProto::UMONAD || value->type() == AttributeProto::IOMONAD) {
        v.kind = MsValue::Kind::State;
      } else if (value->type() == AttributeProto::TENSOR) {
        const std::string what = "constant '" + node.name() + "'";
        v = TensorValue(b.Const(ReadWeight(value->t(), what)));
        b.func().nodes[v.ref.node].outputs[0].weak = value->t().doc_string() == kWeak;
      } else {
        v.kind = MsValue::Kind::Constant;
        v.constant = ConstantOf(*value, "constant '" + node.name() + "'");
      }
      Define(node.output(0), std::move(v));
      return;
    }
    const std::string prefix = "REF::";
    KILN_CHECK(node.op_type().rfind(prefix, 0) == 0, Value, "node '", node.name(), "': op '",
               node.op_type(), "' is not a MindSpore primitive reference");
    auto prim = primitives_.find(node.op_type().substr(prefix.size()));
    KILN_CHECK(prim != primitives_.end(), Value, "node '", node.name(), "' names primitive '",
               node.op_type(), "', which the file does not list");
    std::vector<const MsValue*> inputs;
    for (const auto& in : node.input()) inputs.push_back(&Lookup(in));
    Define(node.output(0), Map(b, *prim->second, inputs, node.name()));
  }

  // ---- the primitives kiln maps, by MindSpore's name ----
  MsValue Map(ir::Builder& b, const mind_ir::PrimitiveProto& prim,
              const std::vector<const MsValue*>& in, const std::string& where) {
    const std::string& op = prim.op_type();
    const std::string what = "MindSpore primitive " + op + " (node '" + where + "')";
    auto input = [&](size_t i) -> const MsValue& {
      KILN_CHECK(i < in.size(), Value, what, ": has ", in.size(), " inputs, needs ", i + 1);
      return *in[i];
    };
    auto tensor = [&](size_t i) {
      KILN_CHECK(i < in.size() && in[i]->kind == MsValue::Kind::Tensor, Value, what, ": input ", i,
                 " is not a tensor");
      return in[i]->ref;
    };
    auto constant = [&](size_t i) -> const AttrValue& {
      KILN_CHECK(i < in.size() && in[i]->kind == MsValue::Kind::Constant, Value, what, ": input ",
                 i, " is not a constant");
      return in[i]->constant;
    };
    if (op == "Load" || op == "Depend") return input(0);
    if (op == "UpdateState") return {};
    if (op == "MakeTuple") {
      MsValue t{MsValue::Kind::Tuple, {}, {}, {}};
      for (const MsValue* v : in) t.items.push_back(*v);
      return t;
    }
    static const std::unordered_map<std::string, OpKind> unary = {
        {"ReLU", OpKind::Relu},     {"Sigmoid", OpKind::Sigmoid}, {"Tanh", OpKind::Tanh},
        {"Exp", OpKind::Exp},       {"Log", OpKind::Log},         {"Sqrt", OpKind::Sqrt},
        {"Rsqrt", OpKind::Rsqrt},   {"Neg", OpKind::Neg},         {"Abs", OpKind::Abs},
        {"Square", OpKind::Square}, {"SiLU", OpKind::Silu},       {"Floor", OpKind::Floor}};
    static const std::unordered_map<std::string, OpKind> binary = {
        {"Add", OpKind::Add},         {"Sub", OpKind::Sub}, {"Mul", OpKind::Mul},
        {"RealDiv", OpKind::Div},     {"Div", OpKind::Div}, {"Maximum", OpKind::Maximum},
        {"Minimum", OpKind::Minimum}, {"Pow", OpKind::Pow}, {"Muls", OpKind::Mul},
        {"Adds", OpKind::Add}};
    if (auto u = unary.find(op); u != unary.end())
      return TensorValue(b.Op1(u->second, {tensor(0)}));
    if (auto bin = binary.find(op); bin != binary.end())
      return TensorValue(
          b.Op1(bin->second, {Operand(b, input(0), what), Operand(b, input(1), what)}));
    if (op == "MatMul")
      return TensorValue(b.Op1(OpKind::MatMul, {tensor(0), tensor(1)},
                               {AttrBool({constant(2)}, 0), AttrBool({constant(3)}, 0)}));
    if (op == "BiasAdd") return BiasAdd(b, tensor(0), tensor(1));
    if (op == "Flatten") {
      const TensorMeta& x = b.func().meta(tensor(0));
      KILN_CHECK(!x.shape.empty(), Value, what, ": flattens a scalar");
      return TensorValue(b.Op1(OpKind::Reshape, {tensor(0)}, {Shape{x.shape[0], -1}}));
    }
    if (op == "Reshape") return TensorValue(b.Op1(OpKind::Reshape, {tensor(0)}, {constant(1)}));
    if (op == "Transpose") return TensorValue(b.Op1(OpKind::Transpose, {tensor(0)}, {constant(1)}));
    if (op == "Softmax") {
      const AttrValue& axis = constant(1);
      const bool one = std::holds_alternative<int64_t>(axis);
      KILN_CHECK(one || AttrInts({axis}, 0).size() == 1, Value, what, ": takes one axis");
      const int64_t a = one ? std::get<int64_t>(axis) : AttrInts({axis}, 0)[0];
      return TensorValue(b.Op1(OpKind::Softmax, {tensor(0)}, {a}));
    }
    if (op == "Conv2D") return Conv2D(b, prim, tensor(0), tensor(1), what);
    if (op == "MaxPool" || op == "AvgPool") return Pool(b, prim, tensor(0), what);
    Throw(ErrorKind::Value, what, ": kiln has no mapping for this primitive yet");
  }

  // A constant operand of an elementwise op is a weak scalar, as a Python number is.
  static ir::ValueRef Operand(ir::Builder& b, const MsValue& v, const std::string& what) {
    if (v.kind == MsValue::Kind::Tensor) return v.ref;
    KILN_CHECK(v.kind == MsValue::Kind::Constant, Value, what, ": an operand is not a value");
    kiln::Tensor t;
    if (std::holds_alternative<double>(v.constant)) {
      t = kiln::Tensor::Empty({}, DType::Float32);
      t.data<float>()[0] = static_cast<float>(std::get<double>(v.constant));
    } else {
      t = kiln::Tensor::Empty({}, DType::Int64);
      t.data<int64_t>()[0] = AttrInt({v.constant}, 0);
    }
    ir::ValueRef c = b.Const(t);
    b.func().nodes[c.node].outputs[0].weak = true;
    return c;
  }

  static MsValue BiasAdd(ir::Builder& b, ir::ValueRef x, ir::ValueRef bias) {
    const size_t rank = b.func().meta(x).shape.size();
    if (rank > 2) {  // NC...: the bias runs along axis 1
      Shape shape{-1};
      shape.resize(rank - 1, 1);
      bias = b.Op1(OpKind::Reshape, {bias}, {shape});
    }
    return TensorValue(b.Op1(OpKind::Add, {x, bias}));
  }

  static std::vector<int64_t> Pair(const mind_ir::PrimitiveProto& prim, const char* name,
                                   const std::string& what) {
    const AttributeProto* a = FindAttr(prim.attribute(), name);
    KILN_CHECK(a != nullptr, Value, what, ": has no '", name, "' attribute");
    std::vector<int64_t> v = AttrInts({ConstantOf(*a, what)}, 0);
    if (v.size() == 4) v = {v[2], v[3]};  // (1, 1, h, w) as NCHW primitives give them
    KILN_CHECK(v.size() == 2, Value, what, ": '", name, "' should hold 2 or 4 values");
    KILN_CHECK(v[0] > 0 && v[1] > 0 && v[0] < (int64_t{1} << 31) && v[1] < (int64_t{1} << 31),
               Value, what, ": '", name, "' (", v[0], ", ", v[1], ") must be positive sizes");
    return v;
  }

  static std::string PadMode(const mind_ir::PrimitiveProto& prim) {
    const AttributeProto* a = FindAttr(prim.attribute(), "pad_mode");
    std::string mode = a ? (a->type() == AttributeProto::STRING ? a->s() : "") : "valid";
    for (char& c : mode) c = static_cast<char>(std::tolower(c));
    return mode;
  }

  // MindSpore's "same": the output is ceil(in / stride); the padding that needs is split with
  // the smaller half first (top, left).
  static std::vector<int64_t> SamePadding(const Shape& in, const std::vector<int64_t>& kernel,
                                          const std::vector<int64_t>& stride,
                                          const std::vector<int64_t>& dilation) {
    std::vector<int64_t> pad;
    for (int d = 0; d < 2; ++d) {
      const int64_t size = in[2 + d];
      const int64_t out = (size + stride[d] - 1) / stride[d];
      const int64_t need =
          std::max<int64_t>(0, (out - 1) * stride[d] + (kernel[d] - 1) * dilation[d] + 1 - size);
      pad.push_back(need / 2);
      pad.push_back(need - need / 2);
    }
    return pad;  // top, bottom, left, right
  }

  MsValue Conv2D(ir::Builder& b, const mind_ir::PrimitiveProto& prim, ir::ValueRef x,
                 ir::ValueRef w, const std::string& what) {
    const std::vector<int64_t> stride = Pair(prim, "stride", what);
    const std::vector<int64_t> dilation = Pair(prim, "dilation", what);
    const std::vector<int64_t> kernel = Pair(prim, "kernel_size", what);
    const AttributeProto* group = FindAttr(prim.attribute(), "group");
    const int64_t groups = group ? group->i() : 1;
    const std::string mode = PadMode(prim);
    std::vector<int64_t> pad = {0, 0, 0, 0};
    const TensorMeta& in = b.func().meta(x);
    KILN_CHECK(in.shape.size() == 4, Value, what, ": input must be NCHW");
    if (mode == "same") {
      KILN_CHECK(in.shape[2] >= 0 && in.shape[3] >= 0, Value, what,
                 ": 'same' padding needs a known height and width");
      pad = SamePadding(in.shape, kernel, stride, dilation);
    } else if (mode == "pad") {
      const AttributeProto* list = FindAttr(prim.attribute(), "pad_list");
      if (list) pad = AttrInts({ConstantOf(*list, what)}, 0);
      KILN_CHECK(pad.size() == 4, Value, what, ": 'pad_list' should hold 4 values");
    }
    return TensorValue(b.Op1(OpKind::Conv2d, {x, w, ir::ValueRef::None()},
                             {Shape(stride), Shape(pad), Shape(dilation), groups}));
  }

  MsValue Pool(ir::Builder& b, const mind_ir::PrimitiveProto& prim, ir::ValueRef x,
               const std::string& what) {
    const std::vector<int64_t> kernel = Pair(prim, "kernel_size", what);
    const std::vector<int64_t> stride = Pair(prim, "strides", what);
    const std::string mode = PadMode(prim);
    KILN_CHECK(mode == "valid", Value, what, ": pooling with pad_mode '", mode,
               "' is not imported yet");
    if (prim.op_type() == "MaxPool")
      return TensorValue(
          b.Op1(OpKind::MaxPool2d, {x}, {Shape(kernel), Shape(stride), Shape{0, 0}}));
    return TensorValue(b.Op1(OpKind::AvgPool2d, {x}, {Shape(kernel), Shape(stride), Shape{0, 0}}));
  }

  const mind_ir::ModelProto& model_;
  SavedModel& out_;
  std::unordered_map<std::string, const mind_ir::PrimitiveProto*> primitives_;
  std::unordered_map<std::string, MsValue> values_;
};

}  // namespace

SavedModel ImportMindSporeModel(const mind_ir::ModelProto& model, const std::string& directory) {
  (void)directory;  // where external weight files would be read; the importer refuses them yet
  SavedModel saved;
  Importer(model, saved).Run();
  ir::Verify(saved.module);
  return saved;
}

}  // namespace kiln::engine::mindir
