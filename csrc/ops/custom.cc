// custom.cc - custom_aot: a user's compiled C/C++ function as an op (MindSpore's Custom "aot").
//
// The function has MindSpore's CPU signature
//   extern "C" int f(int nparam, void** params, int* ndims, int64_t** shapes,
//                    const char** dtypes, void* stream, void* extra)
// with params = the inputs, then the outputs (contiguous, row-major), dtypes as "float32",
// "int64", ... and stream/extra null; a non-zero return is an error code. The output dtypes and
// shapes come from attributes (Python computes them from Custom's out_shape/out_dtype), so
// inference needs no call into the library. The gradient, when there is one, is Custom's
// bprop, applied in Python; the op itself is not differentiable.
#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>

#include "core/error.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln {
namespace {

using AotFn = int (*)(int, void**, int*, int64_t**, const char**, void*, void*);

// Attribute "out_shapes" packs every output's rank and dims: [rank0, d..., rank1, d..., ...].
std::vector<Shape> UnpackShapes(const Shape& packed, const char* op) {
  std::vector<Shape> shapes;
  for (size_t i = 0; i < packed.size();) {
    const int64_t rank = packed[i++];
    KILN_CHECK(rank >= 0 && static_cast<size_t>(rank) <= packed.size() - i, Value, op,
               ": malformed out_shapes attribute");
    shapes.emplace_back(packed.begin() + i, packed.begin() + i + rank);
    i += static_cast<size_t>(rank);
  }
  return shapes;
}

std::vector<TensorMeta> InferCustomAot(const OpDef& def, const std::vector<TensorMeta>&,
                                       const Attrs& attrs) {
  std::vector<Shape> shapes = UnpackShapes(AttrInts(attrs, 2), def.name);
  const Shape& dtypes = AttrInts(attrs, 3);
  KILN_CHECK(!shapes.empty() && shapes.size() == dtypes.size(), Value, def.name,
             ": out_shapes gives ", shapes.size(), " outputs, out_dtypes ", dtypes.size());
  std::vector<TensorMeta> out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    KILN_CHECK(dtypes[i] >= 0 && dtypes[i] < kNumDTypes, Value, def.name, ": bad output dtype");
    for (int64_t d : shapes[i])
      KILN_CHECK(d >= 0, Value, def.name, ": output ", i, " has shape ", ShapeStr(shapes[i]),
                 "; a custom op's output shape must be known when it is called");
    out.push_back(TensorMeta{static_cast<DType>(dtypes[i]), shapes[i]});
  }
  return out;
}

// dlopen'ed libraries stay loaded for the process: compiled graphs keep calling into them.
AotFn LoadFunction(const std::string& library, const std::string& symbol, const char* op) {
  static std::mutex mutex;
  static std::map<std::string, AotFn> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  const std::string key = library + ":" + symbol;
  auto it = loaded.find(key);
  if (it != loaded.end()) return it->second;
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  KILN_CHECK(handle != nullptr, Runtime, op, ": cannot load '", library, "': ", dlerror());
  void* fn = dlsym(handle, symbol.c_str());
  KILN_CHECK(fn != nullptr, Runtime, op, ": '", library, "' has no function '", symbol,
             "' (declare it extern \"C\")");
  return loaded[key] = reinterpret_cast<AotFn>(fn);
}

void CustomAotKernel(KernelContext& ctx) {
  const std::string& library = AttrString(ctx.attrs, 0);
  const std::string& symbol = AttrString(ctx.attrs, 1);
  AotFn fn = LoadFunction(library, symbol, ctx.def.name);
  std::vector<Tensor> operands;
  for (const Tensor& t : ctx.inputs) operands.push_back(t.Contiguous());
  for (const Tensor& t : ctx.outputs) operands.push_back(t);  // fresh, hence contiguous
  std::vector<void*> params;
  std::vector<int> ndims;
  std::vector<Shape> shapes;
  std::vector<int64_t*> shape_ptrs;
  std::vector<const char*> dtypes;
  for (const Tensor& t : operands) {
    params.push_back(t.raw_data());
    ndims.push_back(static_cast<int>(t.shape().size()));
    shapes.push_back(t.shape());
    dtypes.push_back(DTypeName(t.dtype()));
  }
  for (Shape& s : shapes) shape_ptrs.push_back(s.data());
  const int status = fn(static_cast<int>(operands.size()), params.data(), ndims.data(),
                        shape_ptrs.data(), dtypes.data(), nullptr, nullptr);
  KILN_CHECK(status == 0, Runtime, ctx.def.name, ": '", symbol, "' in '", library,
             "' returned error code ", status);
}

}  // namespace

void RegisterCustomOps(OpRegistry& r) {
  OpDef def;
  def.kind = OpKind::CustomAot;
  def.name = OpName(OpKind::CustomAot);
  def.inputs = {"inputs*"};
  def.attrs = {{"library", std::string()},
               {"symbol", std::string()},
               {"out_shapes", Shape{}},
               {"out_dtypes", Shape{}}};
  def.infer = InferCustomAot;
  def.kernel = CustomAotKernel;
  def.grad = NotDifferentiable;
  r.Add(std::move(def));
}

}  // namespace kiln
