// comm.cc - loads the communication library, keeps the named groups, and runs collectives on
// tensors through the library's function table (or as the identity on a single rank).
#include "core/comm.h"

#include <dlfcn.h>

#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "core/error.h"

namespace kiln::comm {
namespace {

struct Group {
  int32_t handle = 0;          // the library's handle; 0 is the world
  std::vector<int64_t> ranks;  // world ranks in group order (empty: the world)
};

// A started all-reduce: its buffers stay alive until it is waited for.
struct Pending {
  Tensor send, recv;
  DType dtype;          // the input's dtype, which the result takes back
  int64_t request = 0;  // the library's request; 0 on a single rank (recv is the result)
  std::string group;
};

struct State {
  std::mutex mutex;  // guards loading, the group and pending tables; collectives run on the caller
  const KilnCommApi* api = nullptr;
  std::map<std::string, Group> groups;
  std::map<int64_t, Pending> pending;
  int64_t next_handle = 1;
};

State& S() {
  static State state;
  return state;
}

const KilnCommApi* Api() { return S().api; }

[[noreturn]] void Fail(const char* op, const std::string& group, const char* err) {
  Throw(ErrorKind::Runtime, op, " (group '", group, "'): ", err);
}

Group FindGroup(const std::string& name) {
  if (IsWorldGroup(name)) return Group{};
  std::lock_guard<std::mutex> lock(S().mutex);
  auto it = S().groups.find(name);
  KILN_CHECK(it != S().groups.end(), Value, "communication group '", name,
             "' does not exist (create it with create_group first)");
  return it->second;
}

// The wire type of a dtype: 16-bit floats travel as float32, bool as uint8.
DType WireDType(DType d) {
  if (d == DType::Float16 || d == DType::BFloat16) return DType::Float32;
  if (d == DType::Bool) return DType::UInt8;
  return d;
}

int32_t WireCode(DType d) {
  switch (d) {
    case DType::UInt8:
      return kKilnCommU8;
    case DType::UInt16:
      return kKilnCommU16;
    case DType::UInt32:
      return kKilnCommU32;
    case DType::UInt64:
      return kKilnCommU64;
    case DType::Int8:
      return kKilnCommI8;
    case DType::Int16:
      return kKilnCommI16;
    case DType::Int32:
      return kKilnCommI32;
    case DType::Int64:
      return kKilnCommI64;
    case DType::Float32:
      return kKilnCommF32;
    case DType::Float64:
      return kKilnCommF64;
    default:
      Throw(ErrorKind::Type, "communication: dtype ", DTypeName(d), " cannot be sent");
  }
}

// The contiguous wire-typed copy of `in` and an empty wire-typed result of `shape`.
std::pair<Tensor, Tensor> WireBuffers(const Tensor& in, const Shape& shape) {
  KILN_CHECK(in.numel() <= INT32_MAX && NumElements(shape) <= INT32_MAX, Value,
             "communication: a tensor of shape ", ShapeStr(in.shape()),
             " has more elements than one MPI message carries (2^31 - 1); split it");
  const DType wire = WireDType(in.dtype());
  return {in.To(wire).Contiguous(), Tensor::Empty(shape, wire)};
}

}  // namespace

void Load(const std::string& path, double timeout_s) {
  std::lock_guard<std::mutex> lock(S().mutex);
  if (S().api != nullptr) return;
  // RTLD_GLOBAL: MPI loads its own plugins, which look for libmpi's symbols globally.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  KILN_CHECK(lib != nullptr, Runtime, "communication: cannot load ", path, ": ", dlerror());
  auto entry = reinterpret_cast<KilnCommApiFn>(dlsym(lib, "kiln_comm_api"));
  KILN_CHECK(entry != nullptr, Runtime, "communication: ", path, " has no kiln_comm_api");
  const KilnCommApi* api = entry();
  KILN_CHECK(api != nullptr && api->abi_version == kKilnCommAbiVersion, Runtime,
             "communication: ", path, " speaks another ABI version than this engine (",
             kKilnCommAbiVersion, ")");
  char err[kKilnCommErrLen] = {0};
  if (api->init(timeout_s, err) != 0) Throw(ErrorKind::Runtime, "communication init: ", err);
  S().api = api;  // the library stays loaded for the life of the process
}

bool Loaded() { return Api() != nullptr; }

void Release() {
  std::lock_guard<std::mutex> lock(S().mutex);
  S().groups.clear();
  S().pending.clear();  // the library completes its own started requests before finalizing
  if (S().api == nullptr) return;
  char err[kKilnCommErrLen] = {0};
  const int rc = S().api->finalize(err);
  S().api = nullptr;
  KILN_CHECK(rc == 0, Runtime, "communication release: ", err);
}

void Abort(int code) {
  if (const KilnCommApi* api = Api()) api->abort(code);
}

bool IsWorldGroup(const std::string& name) {
  return name == "hccl_world_group" || name == "nccl_world_group" || name == "mccl_world_group";
}

int Rank(const std::string& group) {
  const Group g = FindGroup(group);
  return Api() ? Api()->rank(g.handle) : 0;
}

int Size(const std::string& group) {
  const Group g = FindGroup(group);
  return Api() ? Api()->size(g.handle) : 1;
}

int LocalRank() { return Api() ? Api()->local_rank() : 0; }
int LocalSize() { return Api() ? Api()->local_size() : 1; }

void CreateGroup(const std::string& name, const std::vector<int64_t>& ranks) {
  KILN_CHECK(!IsWorldGroup(name), Value, "create_group: '", name, "' is the world group's name");
  const int world = Size("hccl_world_group"), me = Rank("hccl_world_group");
  KILN_CHECK(!ranks.empty(), Value, "create_group: rank_ids of group '", name, "' is empty");
  bool member = false;
  for (int64_t r : ranks) {
    KILN_CHECK(r >= 0 && r < world, Value, "create_group: rank ", r, " of group '", name,
               "' is outside the world of ", world, " ranks");
    member = member || r == me;
  }
  KILN_CHECK(member, Value, "create_group: this rank (", me, ") is not in group '", name,
             "'; only its members create it");
  {
    std::lock_guard<std::mutex> lock(S().mutex);
    KILN_CHECK(S().groups.count(name) == 0, Value, "create_group: group '", name,
               "' already exists");
  }
  Group g{0, ranks};
  if (const KilnCommApi* api = Api()) {
    std::vector<int32_t> r32(ranks.begin(), ranks.end());
    char err[kKilnCommErrLen] = {0};
    if (api->create_group(r32.data(), static_cast<int32_t>(r32.size()), &g.handle, err) != 0)
      Fail("create_group", name, err);
  }
  std::lock_guard<std::mutex> lock(S().mutex);
  S().groups[name] = g;
}

void DestroyGroup(const std::string& name) {
  KILN_CHECK(!IsWorldGroup(name), Value, "destroy_group: the world group cannot be destroyed");
  const Group g = FindGroup(name);
  if (const KilnCommApi* api = Api()) {
    char err[kKilnCommErrLen] = {0};
    if (api->destroy_group(g.handle, err) != 0) Fail("destroy_group", name, err);
  }
  std::lock_guard<std::mutex> lock(S().mutex);
  S().groups.erase(name);
}

std::vector<int64_t> GroupRanks(const std::string& group) {
  const Group g = FindGroup(group);
  if (!g.ranks.empty()) return g.ranks;
  std::vector<int64_t> all(Size(group));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  return all;
}

KilnCommReduce ReduceFromName(const std::string& name, const char* op) {
  if (name == "sum") return kKilnCommSum;
  if (name == "max") return kKilnCommMax;
  if (name == "min") return kKilnCommMin;
  if (name == "prod") return kKilnCommProd;
  Throw(ErrorKind::Value, op, ": op must be ReduceOp.SUM, MAX, MIN or PROD, got '", name, "'");
}

Tensor AllReduce(const std::string& group, const Tensor& in, KilnCommReduce reduce,
                 const char* op) {
  const Group g = FindGroup(group);
  if (!Api()) return in.Clone();
  auto [send, recv] = WireBuffers(in, in.shape());
  char err[kKilnCommErrLen] = {0};
  if (Api()->all_reduce(g.handle, send.raw_data(), recv.raw_data(), send.numel(),
                        WireCode(send.dtype()), reduce, err) != 0)
    Fail(op, group, err);
  return recv.To(in.dtype());
}

Tensor AllGather(const std::string& group, const Tensor& in, const char* op) {
  const Group g = FindGroup(group);
  if (!Api()) return in.Clone();
  const int size = Api()->size(g.handle);
  Shape shape = in.shape();
  shape[0] *= size;
  auto [send, recv] = WireBuffers(in, shape);
  char err[kKilnCommErrLen] = {0};
  if (Api()->all_gather(g.handle, send.raw_data(), recv.raw_data(), send.numel(),
                        WireCode(send.dtype()), err) != 0)
    Fail(op, group, err);
  return recv.To(in.dtype());
}

Tensor ReduceScatter(const std::string& group, const Tensor& in, KilnCommReduce reduce,
                     const char* op) {
  const Group g = FindGroup(group);
  if (!Api()) return in.Clone();
  const int size = Api()->size(g.handle);
  Shape shape = in.shape();
  shape[0] /= size;
  auto [send, recv] = WireBuffers(in, shape);
  char err[kKilnCommErrLen] = {0};
  if (Api()->reduce_scatter(g.handle, send.raw_data(), recv.raw_data(), recv.numel(),
                            WireCode(send.dtype()), reduce, err) != 0)
    Fail(op, group, err);
  return recv.To(in.dtype());
}

Tensor Broadcast(const std::string& group, const Tensor& in, int root, const char* op) {
  const Group g = FindGroup(group);
  if (!Api()) return in.Clone();
  KILN_CHECK(in.numel() <= INT32_MAX, Value, "communication: a tensor of shape ",
             ShapeStr(in.shape()), " has more elements than one MPI message carries (2^31 - 1)");
  const DType wire = WireDType(in.dtype());
  Tensor buf = in.To(wire).Contiguous();
  if (buf.same_storage(in)) buf = buf.Clone();  // the op's output never aliases its input
  char err[kKilnCommErrLen] = {0};
  if (Api()->broadcast(g.handle, buf.raw_data(), buf.numel(), WireCode(wire), root, err) != 0)
    Fail(op, group, err);
  return buf.To(in.dtype());
}

void Barrier(const std::string& group, const char* op) {
  const Group g = FindGroup(group);
  if (!Api()) return;
  char err[kKilnCommErrLen] = {0};
  if (Api()->barrier(g.handle, err) != 0) Fail(op, group, err);
}

int64_t AllReduceStart(const std::string& group, const Tensor& in, KilnCommReduce reduce,
                       const char* op) {
  const Group g = FindGroup(group);
  Pending p;
  p.dtype = in.dtype();
  p.group = group;
  if (Api()) {
    std::tie(p.send, p.recv) = WireBuffers(in, in.shape());
    char err[kKilnCommErrLen] = {0};
    if (Api()->all_reduce_start(g.handle, p.send.raw_data(), p.recv.raw_data(), p.send.numel(),
                                WireCode(p.send.dtype()), reduce, &p.request, err) != 0)
      Fail(op, group, err);
  } else {
    p.recv = in.Clone();
  }
  std::lock_guard<std::mutex> lock(S().mutex);
  const int64_t handle = S().next_handle++;
  S().pending.emplace(handle, std::move(p));
  return handle;
}

Tensor AllReduceWait(int64_t handle, const char* op) {
  Pending p;
  {
    std::lock_guard<std::mutex> lock(S().mutex);
    auto it = S().pending.find(handle);
    KILN_CHECK(it != S().pending.end(), Value, op, ": no started all-reduce with handle ", handle,
               " (it was never started, was already waited for, or communication was released)");
    p = std::move(it->second);
    S().pending.erase(it);
  }
  if (p.request != 0) {
    char err[kKilnCommErrLen] = {0};
    if (Api()->wait(p.request, "AllReduce", err) != 0) Fail(op, p.group, err);
  }
  return p.recv.To(p.dtype);
}

void Progress() {
  if (const KilnCommApi* api = Api()) api->progress();
}

size_t PendingCount() {
  std::lock_guard<std::mutex> lock(S().mutex);
  return S().pending.size();
}

}  // namespace kiln::comm
