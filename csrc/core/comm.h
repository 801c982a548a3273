// comm.h - the engine's side of communication: the loaded library, named groups, and
// collectives on tensors that the collective ops' kernels (ops/collective.cc) call.
//
// Without a loaded library the process is a single rank: rank 0 of a world of one, where every
// collective is the identity (MindSpore's single-process behaviour).
#pragma once

#include <string>
#include <vector>

#include "core/comm_abi.h"
#include "core/tensor.h"

namespace kiln::comm {

// Loads the library at `path` (dlopen) and initializes it; RuntimeError naming the path and
// dlerror() or the library's message otherwise. A second call is a no-op.
void Load(const std::string& path, double timeout_s);
bool Loaded();
// Finalizes the library (aborting the job when a collective failed); groups are forgotten.
void Release();
// Ends every rank at once (an uncaught error on this one); a single rank just returns.
void Abort(int code);

// The world group's names (MindSpore's per-backend names are all accepted).
bool IsWorldGroup(const std::string& name);
// Rank and size in a named group; ValueError for an unknown group.
int Rank(const std::string& group);
int Size(const std::string& group);
int LocalRank();
int LocalSize();
// Creates group `name` of the world ranks `ranks`; this rank must be one of them.
void CreateGroup(const std::string& name, const std::vector<int64_t>& ranks);
void DestroyGroup(const std::string& name);
// The world ranks of a group, in group order.
std::vector<int64_t> GroupRanks(const std::string& group);

// Reduction names as the ops' attribute spells them: "sum", "max", "min", "prod".
KilnCommReduce ReduceFromName(const std::string& name, const char* op);

// Collectives: a new contiguous tensor of `in`'s dtype; `op` names the calling op in errors.
// AllGather stacks the ranks' inputs along axis 0; ReduceScatter gives rank r block r of the
// reduction along axis 0 (its first dimension must divide by the group size).
Tensor AllReduce(const std::string& group, const Tensor& in, KilnCommReduce reduce, const char* op);
Tensor AllGather(const std::string& group, const Tensor& in, const char* op);
Tensor ReduceScatter(const std::string& group, const Tensor& in, KilnCommReduce reduce,
                     const char* op);
Tensor Broadcast(const std::string& group, const Tensor& in, int root, const char* op);
void Barrier(const std::string& group, const char* op);

// An all-reduce in two halves, so other work runs while it travels (gradient buckets reduced
// during the backward pass): AllReduceStart returns a handle at once, AllReduceWait(handle)
// waits with the usual deadline and returns the result. The engine keeps the buffers alive in
// between. ValueError for a handle that was never started or was already waited for.
int64_t AllReduceStart(const std::string& group, const Tensor& in, KilnCommReduce reduce,
                       const char* op);
Tensor AllReduceWait(int64_t handle, const char* op);
// Lets the started all-reduces advance (MPI moves them on only inside its calls); every start
// does it too. A no-op on a single rank.
void Progress();
// How many started all-reduces have not been waited for (tests; errors between the halves).
size_t PendingCount();

}  // namespace kiln::comm
