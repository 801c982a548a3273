// signature.cc - building a module's signature and checking it against the entry function.
#include <string>

#include "core/error.h"
#include "ir/ir.h"

namespace kiln::ir {

const char* InputRoleName(InputRole role) { return role == InputRole::Weight ? "weight" : "input"; }

bool SignatureInput::Accepts(const Tensor& t) const {
  if (t.dtype() != dtype || static_cast<size_t>(t.ndim()) != shape.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] >= 0 && shape[i] != t.shape()[i]) return false;
  return true;
}

std::string SignatureInput::TypeString() const { return ir::TypeString({dtype, shape}); }

OutputTree OutputTree::ResultLeaf(int64_t index) {
  OutputTree t;
  t.kind = Kind::Result;
  t.index = index;
  return t;
}

OutputTree OutputTree::LiteralLeaf(ir::Literal value) {
  OutputTree t;
  t.kind = Kind::Literal;
  t.literal = std::move(value);
  return t;
}

OutputTree OutputTree::OpaqueLeaf(int64_t index) {
  OutputTree t;
  t.kind = Kind::Opaque;
  t.index = index;
  return t;
}

OutputTree OutputTree::Sequence(Kind kind, std::vector<OutputTree> items) {
  KILN_CHECK(kind == Kind::Tuple || kind == Kind::List, Value,
             "output tree: a sequence is a tuple or a list");
  OutputTree t;
  t.kind = kind;
  t.items = std::move(items);
  return t;
}

OutputTree OutputTree::Dict(std::vector<OutputTree> keys, std::vector<OutputTree> values) {
  OutputTree t;
  t.kind = Kind::Dict;
  t.keys = std::move(keys);
  t.items = std::move(values);
  return t;
}

bool OutputTree::operator==(const OutputTree& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::Result:
    case Kind::Opaque:
      return index == o.index;
    case Kind::Literal:
      return literal == o.literal;
    default:
      return items == o.items && keys == o.keys;
  }
}

size_t Signature::CountRole(InputRole role) const {
  size_t n = 0;
  for (const auto& in : inputs) n += in.role == role;
  return n;
}

namespace {

int64_t CountOpaqueIn(const OutputTree& tree) {
  if (tree.kind == OutputTree::Kind::Opaque) return 1;
  int64_t n = 0;
  for (const auto& k : tree.keys) n += CountOpaqueIn(k);
  for (const auto& v : tree.items) n += CountOpaqueIn(v);
  return n;
}

// A bool, int or float literal as a number; long double holds every int64 and double exactly.
bool AsNumber(const Literal& v, long double* out) {
  if (auto* b = std::get_if<bool>(&v)) {
    *out = *b;
  } else if (auto* i = std::get_if<int64_t>(&v)) {
    *out = static_cast<long double>(*i);
  } else if (auto* d = std::get_if<double>(&v)) {
    *out = *d;
  } else {
    return false;
  }
  return true;
}

// Dict keys equal as Python compares them (1 == 1.0 == True), so a tree the front end could
// never have made, with two values for one key, is refused rather than rebuilt with one lost.
bool SameKey(const Literal& a, const Literal& b) {
  long double x = 0, y = 0;
  if (AsNumber(a, &x) && AsNumber(b, &y)) return x == y;
  return a == b;
}

class SignatureVerifier {
 public:
  explicit SignatureVerifier(const Module& m) : entry_(m.entry()), sig_(*m.signature()) {}

  void Run() {
    Require(sig_.inputs.size() == entry_.params.size(), "lists ", sig_.inputs.size(), " inputs, @",
            entry_.name, " takes ", entry_.params.size(), " parameters");
    for (size_t i = 0; i < sig_.inputs.size(); ++i) CheckInput(i);
    CheckTree(sig_.outputs, 1);
    Require(next_result_ == static_cast<int64_t>(entry_.results.size()), "the outputs hold ",
            next_result_, " results, @", entry_.name, " returns ", entry_.results.size());
  }

 private:
  template <typename... Args>
  void Require(bool ok, const Args&... args) {
    if (!ok) Throw(ErrorKind::Value, "ir verifier: signature: ", args...);
  }

  // A signature may accept fewer sizes than the parameter (pin a dimension the graph leaves
  // open) but never more: the graph was compiled for what the parameter says.
  void CheckInput(size_t i) {
    const SignatureInput& in = sig_.inputs[i];
    const TensorMeta& param = entry_.params[i];
    bool fits = in.dtype == param.dtype && in.shape.size() == param.shape.size();
    for (size_t d = 0; fits && d < in.shape.size(); ++d)
      fits = in.shape[d] >= -1 && (param.shape[d] < 0 || in.shape[d] == param.shape[d]);
    Require(fits, InputRoleName(in.role), " ", i, " ('", in.name, "') accepts ", in.TypeString(),
            " but @", entry_.name, "'s parameter %", i, " is ", TypeString(param));
  }

  void CheckTree(const OutputTree& t, int depth) {
    Require(depth <= kMaxOutputDepth, "the outputs nest deeper than ", kMaxOutputDepth);
    using Kind = OutputTree::Kind;
    switch (t.kind) {
      case Kind::Result:
        Require(t.index == next_result_, "output leaf 'result ", t.index, "' should be 'result ",
                next_result_, "' (results are numbered in tree order, each once)");
        ++next_result_;
        return;
      case Kind::Opaque:
        Require(t.index == next_opaque_, "output leaf 'opaque ", t.index, "' should be 'opaque ",
                next_opaque_, "' (opaque values are numbered in tree order, each once)");
        ++next_opaque_;
        return;
      case Kind::Literal:
        return;
      case Kind::Tuple:
      case Kind::List:
        Require(t.keys.empty(), "a tuple or list has no keys");
        for (const auto& item : t.items) CheckTree(item, depth + 1);
        return;
      case Kind::Dict:
        CheckDict(t, depth);
        return;
    }
    Require(false, "an output node of unknown kind");
  }

  void CheckDict(const OutputTree& t, int depth) {
    Require(t.keys.size() == t.items.size(), "a dict has ", t.keys.size(), " keys and ",
            t.items.size(), " values");
    for (size_t i = 0; i < t.keys.size(); ++i) {
      const OutputTree& key = t.keys[i];
      Require(key.kind == OutputTree::Kind::Literal || key.kind == OutputTree::Kind::Opaque,
              "a dict key must be a literal or an opaque value");
      for (size_t j = 0; j < i && key.kind == OutputTree::Kind::Literal; ++j)
        Require(
            t.keys[j].kind != OutputTree::Kind::Literal || !SameKey(t.keys[j].literal, key.literal),
            "a dict has the key ", LiteralText(key.literal), " twice");
      CheckTree(key, depth + 1);
      CheckTree(t.items[i], depth + 1);
    }
  }

  const Func& entry_;
  const Signature& sig_;
  int64_t next_result_ = 0;
  int64_t next_opaque_ = 0;
};

}  // namespace

int64_t Signature::CountOpaque() const { return CountOpaqueIn(outputs); }

Signature EntrySignature(const Module& module, const std::vector<int>& weights,
                         OutputTree outputs) {
  const Func& entry = module.entry();
  Signature sig;
  for (size_t i = 0; i < entry.params.size(); ++i) {
    SignatureInput in;
    in.name = i < entry.param_names.size() ? entry.param_names[i] : "";
    in.dtype = entry.params[i].dtype;
    in.shape = entry.params[i].shape;
    sig.inputs.push_back(std::move(in));
  }
  for (int w : weights) {
    KILN_CHECK(w >= 0 && w < static_cast<int>(sig.inputs.size()), Value, "signature: weight ", w,
               " is not a parameter of @", entry.name, " (it takes ", sig.inputs.size(), ")");
    sig.inputs[w].role = InputRole::Weight;
  }
  sig.outputs = std::move(outputs);
  return sig;
}

Signature DefaultSignature(const Module& module) {
  const int64_t n = static_cast<int64_t>(module.entry().results.size());
  if (n == 1) return EntrySignature(module, {}, OutputTree::ResultLeaf(0));
  std::vector<OutputTree> items;
  for (int64_t k = 0; k < n; ++k) items.push_back(OutputTree::ResultLeaf(k));
  return EntrySignature(module, {},
                        OutputTree::Sequence(OutputTree::Kind::Tuple, std::move(items)));
}

void VerifySignature(const Module& module) {
  if (module.signature()) SignatureVerifier(module).Run();
}

}  // namespace kiln::ir
