// signature.h - what a compiled entry function means to its caller, recorded in its Module.
//
// Which entry parameters are the user's inputs and which are weights the model binds (its
// Parameters and other state tensors), the type each accepts (-1 for a dimension of any size),
// and how the flat results nest into the tuples, lists and dicts the caller gets back, with the
// constants a result may hold. It names Python objects it cannot hold only by index (`opaque k`),
// so a module with its signature is self-contained: what export and load will save.
//
//   signature {
//     input %0 "x" : f32[?,3]
//     weight %1 "fc.weight" : f32[3,2]
//     outputs (result 0, {"sum": result 1, "n": 3})
//   }
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "ops/registry.h"

namespace kiln::ir {

class Module;
namespace text {
class TokenCursor;
}

enum class InputRole : uint8_t { Input, Weight };
const char* InputRoleName(InputRole role);  // "input" or "weight", as the text form spells them

struct SignatureInput {
  InputRole role = InputRole::Input;
  // The argument's name ("arg0", "arg1[2]", a keyword) or the weight's ("fc.weight"); may be
  // empty (a tensor the function read from a global) and need not be unique.
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;  // -1 where any size is accepted

  // Whether `t` may be passed here: the dtype, the rank, and every dimension that is not -1.
  bool Accepts(const Tensor& t) const;
  std::string TypeString() const;  // "f32[?,3]"
  bool operator==(const SignatureInput& o) const {
    return role == o.role && name == o.name && dtype == o.dtype && shape == o.shape;
  }
};

// A constant leaf of the output tree, or a dict key: None, bool, int, float or str.
using Literal = std::variant<std::monostate, bool, int64_t, double, std::string>;

// How the entry's flat results nest. Leaves: `result k` (the entry's k-th result), a literal,
// or `opaque k` (the k-th Python object the front end keeps, passed back on every call). Result
// and opaque leaves are numbered in tree order (a dict's key before its value), each once.
struct OutputTree {
  enum class Kind : uint8_t { Result, Literal, Opaque, Tuple, List, Dict };
  Kind kind = Kind::Tuple;
  int64_t index = 0;              // Result, Opaque
  ir::Literal literal;            // Literal
  std::vector<OutputTree> items;  // Tuple, List: the elements; Dict: the values
  std::vector<OutputTree> keys;   // Dict: one Literal or Opaque leaf per value

  static OutputTree ResultLeaf(int64_t index);
  static OutputTree LiteralLeaf(ir::Literal value);
  static OutputTree OpaqueLeaf(int64_t index);
  static OutputTree Sequence(Kind kind, std::vector<OutputTree> items);  // Tuple or List
  static OutputTree Dict(std::vector<OutputTree> keys, std::vector<OutputTree> values);
  bool is_leaf() const {
    return kind == Kind::Result || kind == Kind::Literal || kind == Kind::Opaque;
  }
  bool operator==(const OutputTree& o) const;
};

// Trees deeper than this are refused (the reader and every walk recurse once per level).
constexpr int kMaxOutputDepth = 256;

struct Signature {
  std::vector<SignatureInput> inputs;  // one per entry parameter, in order
  OutputTree outputs;

  size_t CountRole(InputRole role) const;
  int64_t CountOpaque() const;  // opaque leaves of `outputs`
  bool operator==(const Signature& o) const { return inputs == o.inputs && outputs == o.outputs; }
};

// The signature of `module`'s entry function: every parameter a user input except the
// positions in `weights`, named and typed as the parameters are; `outputs` nests the results.
Signature EntrySignature(const Module& module, const std::vector<int>& weights, OutputTree outputs);
// What an entry without a recorded signature means: every parameter an input, one result
// returned bare and several as a tuple.
Signature DefaultSignature(const Module& module);
// Checks the module's signature (when it has one) against its entry function; throws
// ValueError naming the input or the tree node that does not fit. ir::Verify runs it.
void VerifySignature(const Module& module);

// The `signature { ... }` block of the text form (signature_text.cc), and its reader.
std::string PrintSignature(const Signature& signature);
Signature ParseSignature(text::TokenCursor& cursor);
std::string LiteralText(const Literal& value);  // None, True, 3, 2.5, "text"

}  // namespace kiln::ir
