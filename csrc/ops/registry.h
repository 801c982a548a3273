// registry.h - the one op registry: each op's schema, shape/dtype inference and CPU kernel.
//
// Eager dispatch (runtime/eager.cc) and Graph-mode analysis call the same inference functions,
// and the executor calls the same kernels. Ops are registered explicitly, family by family,
// from RegisterAllOps(); there are no static constructors.
#pragma once

#include <initializer_list>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"

namespace kiln {

enum class OpKind : uint16_t {
#define OP(e, n, f) e,
#include "ops/op_list.def"
#undef OP
};
constexpr int kNumOps = 0
#define OP(e, n, f) +1
#include "ops/op_list.def"
#undef OP
    ;

const char* OpName(OpKind kind);
// Finds an op by its text name; throws ValueError if there is none.
OpKind OpKindFromName(const std::string& name);

// An attribute value. std::monostate is Python's None.
using AttrValue =
    std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<int64_t>, DType>;
using Attrs = std::vector<AttrValue>;

struct AttrSpec {
  const char* name;
  AttrValue default_value;
};

// What inference knows about a tensor: dtype and shape, where a dimension may be -1 (known
// only at run time, in Graph mode). `present` is false for an omitted optional input.
struct TensorMeta {
  DType dtype = DType::Float32;
  Shape shape;
  bool weak = false;  // a Python scalar (see PromoteWithScalar)
  bool present = true;
};

// Which inputs the dispatcher casts to one dtype before inference and the kernel run.
enum class Promotion : uint8_t {
  None,         // inputs are used as given; inference checks them
  Common,       // the listed inputs take their promoted type
  CommonFloat,  // ... and integer/bool results become float32 (true division, exp, ...)
};

struct OpDef;
class GradBuilder;
struct GradVar;

struct KernelContext {
  const OpDef& def;
  const std::vector<Tensor>& inputs;
  std::vector<Tensor>& outputs;  // allocated from inference unless the op allocates its own
  const Attrs& attrs;
};

using InferFn = std::vector<TensorMeta> (*)(const OpDef& def, const std::vector<TensorMeta>& inputs,
                                            const Attrs& attrs);
using KernelFn = void (*)(KernelContext& ctx);
// The gradient rule (ops/grad.h): input gradients from output gradients, built from ops.
using GradRuleFn = std::vector<GradVar> (*)(GradBuilder& g);

struct OpDef {
  OpKind kind;
  const char* name = nullptr;
  std::vector<const char*> inputs;  // input names; a trailing "*" marks a variadic last input,
                                    // a trailing "?" an optional one
  std::vector<AttrSpec> attrs;
  InferFn infer = nullptr;
  KernelFn kernel = nullptr;
  GradRuleFn grad = nullptr;  // NotDifferentiable for ops without one; never left null
  Promotion promotion = Promotion::None;
  std::vector<int> promoted_inputs;  // indices the promotion applies to (empty: all)
  // The kernel makes its outputs: views of an input, or shapes known only after running.
  bool allocates_outputs = false;
  // Output i aliases input 0's storage (views); the executor must not reuse input 0 in place.
  bool is_view = false;
  // The kernel writes into these inputs (Assign, IndexPut, BatchNorm's running statistics).
  std::vector<int> mutated_inputs;
  bool is_random = false;  // draws from the global generator (set_seed makes it reproducible)
  // Each output element is computed from the inputs' elements at the same index only, so the
  // executor may give output 0 the buffer of a dying input of the same type (in place).
  bool elementwise = false;
  // Talks to the other ranks (ops/collective.cc): every rank must run the same collectives in
  // the same order, so such a node is never removed, merged, folded or moved.
  bool communicates = false;
  // Takes the next item of an outside queue (get_next, ops/data.cc): each run reads something
  // different, so such a node is never removed, merged, folded or moved either.
  bool reads_queue = false;
  // Whose values the gradient rule reads, beyond their shapes and dtypes (bit k: input or
  // output k; the top bit stands for every later one). PyNative's tape holds only these until
  // the backward sweep, so an activation nothing else needs is freed at once. All unless the
  // family file says less with GradReads; a rule that reads more fails loudly.
  uint64_t grad_reads_inputs = ~uint64_t{0};
  uint64_t grad_reads_outputs = ~uint64_t{0};
  // A product (mul, matmul, conv2d): the rule reads input 0 only for input 1's gradient and
  // input 1 only for input 0's, so a factor that needs no gradient frees the other.
  bool grad_reads_factors_crosswise = false;
};

// def, declaring that its gradient rule reads only these inputs' and outputs' values.
OpDef GradReads(OpDef def, std::initializer_list<int> inputs, std::initializer_list<int> outputs);
// Whether def's gradient rule reads the values of input / output k.
bool GradReadsInput(const OpDef& def, size_t k);
bool GradReadsOutput(const OpDef& def, size_t k);

// An OpDef with its schema and facets set (flags default off); the family files build on it.
OpDef MakeOpDef(OpKind kind, std::vector<const char*> inputs, std::vector<AttrSpec> attrs,
                InferFn infer, KernelFn kernel, GradRuleFn grad = nullptr);

const OpDef& GetOpDef(OpKind kind);
// True once every op in op_list.def has registered; the registry test checks each facet.
bool IsRegistered(OpKind kind);

class OpRegistry {
 public:
  void Add(OpDef def);
  const OpDef* Find(OpKind kind) const;

 private:
  std::vector<OpDef> defs_ = std::vector<OpDef>(kNumOps);
  std::vector<bool> present_ = std::vector<bool>(kNumOps, false);
};

// Family registration functions, one per ops/<family>.cc.
void RegisterElementwiseOps(OpRegistry& registry);
void RegisterUnaryOps(OpRegistry& registry);
void RegisterMathOps(OpRegistry& registry);
void RegisterSortingOps(OpRegistry& registry);
void RegisterReduceOps(OpRegistry& registry);
void RegisterNormalizationOps(OpRegistry& registry);
void RegisterShapeOps(OpRegistry& registry);
void RegisterIndexingOps(OpRegistry& registry);
void RegisterResizeOps(OpRegistry& registry);
void RegisterCreationOps(OpRegistry& registry);
void RegisterLinalgOps(OpRegistry& registry);
void RegisterLinalgDecompOps(OpRegistry& registry);
void RegisterSpecialOps(OpRegistry& registry);
void RegisterConvOps(OpRegistry& registry);
void RegisterOptimOps(OpRegistry& registry);
void RegisterCollectiveOps(OpRegistry& registry);
void RegisterDataOps(OpRegistry& registry);
void RegisterCustomOps(OpRegistry& registry);
void RegisterRecurrentOps(OpRegistry& registry);

// ---- Attribute access by schema position (ops check types at the edge, in the dispatcher) ----
inline bool AttrIsNone(const Attrs& a, size_t i) {
  return std::holds_alternative<std::monostate>(a[i]);
}
int64_t AttrInt(const Attrs& a, size_t i);
double AttrFloat(const Attrs& a, size_t i);  // accepts ints too
bool AttrBool(const Attrs& a, size_t i);
const std::string& AttrString(const Attrs& a, size_t i);
const std::vector<int64_t>& AttrInts(const Attrs& a, size_t i);
DType AttrDType(const Attrs& a, size_t i);
std::string AttrToString(const AttrValue& value);

// ---- Schema checks (eager dispatch and the IR verifier, before any inference runs) ----
// `given[i]` says whether input i is present (false for an omitted optional one). Required inputs
// must be given, surplus ones are refused, and a variadic last input ("tensors*") takes any
// number of present tensors. TypeError naming the op otherwise.
void CheckInputArity(const OpDef& def, const std::vector<bool>& given);
// Each attribute has the type of its schema default (an int attribute also takes a bool, a
// float one an int or bool); a None default accepts any type. `attrs` must be complete.
// TypeError naming the op and the attribute otherwise.
void CheckAttrTypes(const OpDef& def, const Attrs& attrs);
// The attributes completed with their schema defaults; TypeError naming the op when there are
// more than the schema has.
Attrs CompleteAttrs(const OpDef& def, Attrs attrs);

// ---- Shared inference helpers ----
// Every dimension is known at compile time (none is -1).
bool IsStaticShape(const Shape& shape);
// NumPy broadcasting of two shapes; -1 (unknown) joins with anything but a mismatch.
Shape BroadcastShapes(const Shape& a, const Shape& b, const char* op);
// What inference sees of a tensor (absent for an undefined one, weak for a Python scalar).
TensorMeta MetaOf(const Tensor& t);
// The dtype the listed inputs promote to, weak scalars joining by category.
DType PromotedType(const std::vector<TensorMeta>& metas, const std::vector<int>& which);
// The dtype an op's promoted inputs are cast to before it runs (its Promotion rule); eager
// dispatch casts tensors and the IR builder inserts cast nodes, so both modes compute alike.
DType PromotionTarget(const OpDef& def, const std::vector<TensorMeta>& metas);
// Checks `meta` is a floating type; TypeError naming the op otherwise.
void RequireFloating(const TensorMeta& meta, const char* op);

}  // namespace kiln
