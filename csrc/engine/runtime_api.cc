// runtime_api.cc - include/kiln/runtime.h (the public C++ API) over the engine's own types.
#include <cstring>

#include "core/error.h"
#include "engine/model.h"
#include "kiln/runtime.h"

namespace kiln::runtime {

// The public enum lists the dtypes in the engine's order, so a cast converts them.
#define KILN_CHECK_DTYPE_ORDER(e, t, n)                                                  \
  static_assert(static_cast<int>(runtime::DType::e) == static_cast<int>(kiln::DType::e), \
                "runtime.h's DType must follow KILN_FORALL_DTYPES");
KILN_FORALL_DTYPES(KILN_CHECK_DTYPE_ORDER)
#undef KILN_CHECK_DTYPE_ORDER

namespace {
kiln::DType Internal(DType d) { return static_cast<kiln::DType>(d); }
DType Public(kiln::DType d) { return static_cast<DType>(d); }
}  // namespace

const char* DTypeName(DType dtype) { return kiln::DTypeName(Internal(dtype)); }
size_t ItemSize(DType dtype) { return kiln::ItemSize(Internal(dtype)); }

struct Tensor::Impl {
  kiln::Tensor tensor;
};

Tensor::Tensor() = default;
Tensor::Tensor(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Tensor::Tensor(DType dtype, const std::vector<int64_t>& shape) : impl_(std::make_shared<Impl>()) {
  for (int64_t d : shape) KILN_CHECK(d >= 0, Value, "Tensor: dimension ", d, " is negative");
  const size_t nbytes = kiln::ByteCount(shape, Internal(dtype));
  impl_->tensor = kiln::Tensor::Empty(shape, Internal(dtype));
  if (nbytes) std::memset(impl_->tensor.raw_data(), 0, nbytes);
}

Tensor::Tensor(DType dtype, const std::vector<int64_t>& shape, const void* data, size_t nbytes)
    : Tensor(dtype, shape) {
  KILN_CHECK(nbytes == this->nbytes(), Value, "Tensor: ", kiln::DTypeName(Internal(dtype)),
             kiln::ShapeStr(shape), " needs ", this->nbytes(), " bytes, got ", nbytes);
  if (nbytes) std::memcpy(raw_data(), data, nbytes);
}

bool Tensor::defined() const { return impl_ && impl_->tensor.defined(); }
DType Tensor::dtype() const { return Public(impl_->tensor.dtype()); }
const std::vector<int64_t>& Tensor::shape() const { return impl_->tensor.shape(); }
int64_t Tensor::num_elements() const { return impl_->tensor.numel(); }
size_t Tensor::nbytes() const {
  return kiln::ByteCount(impl_->tensor.shape(), impl_->tensor.dtype());
}
void* Tensor::raw_data() { return impl_->tensor.raw_data(); }
const void* Tensor::raw_data() const { return impl_->tensor.raw_data(); }

struct Model::Impl {
  explicit Impl(engine::LoadedModel m) : model(std::move(m)) {}
  engine::LoadedModel model;
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
};

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Model Model::Load(const std::string& path) {
  auto impl = std::make_shared<Impl>(engine::LoadedModel(engine::LoadModel(path)));
  const ir::Signature& sig = impl->model.graph().signature();
  const ir::Func& entry = impl->model.graph().module().entry();
  for (const auto& in : sig.inputs)
    if (in.role == ir::InputRole::Input)
      impl->inputs.push_back({in.name, Public(in.dtype), in.shape});
  for (size_t r = 0; r < entry.results.size(); ++r) {
    const TensorMeta& m = entry.meta(entry.results[r]);
    impl->outputs.push_back({"output" + std::to_string(r), Public(m.dtype), m.shape});
  }
  return Model(std::move(impl));
}

const std::vector<TensorInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Model::outputs() const { return impl_->outputs; }

std::vector<Tensor> Model::Run(const std::vector<Tensor>& inputs) const {
  std::vector<kiln::Tensor> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].defined(), Value, "Model::Run: input ", i, " is an empty Tensor");
    in.push_back(inputs[i].impl_->tensor);
  }
  std::vector<Tensor> out;
  for (kiln::Tensor& t : impl_->model.Run(in)) {
    auto impl = std::make_shared<Tensor::Impl>();
    impl->tensor = t.is_contiguous() ? std::move(t) : t.Contiguous();
    out.push_back(Tensor(std::move(impl)));
  }
  return out;
}

}  // namespace kiln::runtime
