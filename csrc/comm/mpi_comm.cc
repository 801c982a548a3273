// mpi_comm.cc - libkiln_comm.so: the engine's communication table (core/comm_abi.h) over MPI.
//
// Built as its own shared library so libkiln, kiln-run and the Python extension never link MPI;
// kiln.communication.init() loads it. Every collective is MPI's non-blocking form, waited on
// with a deadline: a rank that died or hangs makes the others fail with a message after the
// timeout instead of waiting forever. After such a failure finalize aborts the job, since
// MPI_Finalize would wait for the ranks that never arrive. MPI runs at MPI_THREAD_SERIALIZED
// and the engine releases the GIL during collectives, so every MPI call here holds g.mpi.
#include <mpi.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "core/comm_abi.h"

namespace {

struct Comm {
  double timeout_s = 60.0;
  bool failed = false;  // a collective timed out or failed: the job cannot finish cleanly
  bool we_initialized = false;
  MPI_Comm local = MPI_COMM_NULL;          // the ranks on this node
  std::vector<MPI_Comm> groups;            // handle -> communicator; 0 is MPI_COMM_WORLD
  std::mutex mpi;                          // one thread in MPI at a time (MPI_THREAD_SERIALIZED)
  std::map<int64_t, MPI_Request> started;  // all_reduce_start's requests, until wait()
  int64_t next_request = 1;
} g;

using Lock = std::lock_guard<std::mutex>;

template <typename... Args>
int Error(char* err, const char* fmt, Args... args) {
  std::snprintf(err, kKilnCommErrLen, fmt, args...);
  return 1;
}

int MpiError(char* err, const char* what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  g.failed = true;
  return Error(err, "%s failed: %s", what, text);
}

MPI_Datatype Type(int32_t code) {
  static const MPI_Datatype types[] = {MPI_UINT8_T, MPI_UINT16_T, MPI_UINT32_T, MPI_UINT64_T,
                                       MPI_INT8_T,  MPI_INT16_T,  MPI_INT32_T,  MPI_INT64_T,
                                       MPI_FLOAT,   MPI_DOUBLE};
  return types[code];
}

MPI_Op Op(int32_t code) {
  static const MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD};
  return ops[code];
}

MPI_Comm Group(int32_t handle) {
  return handle >= 0 && handle < static_cast<int32_t>(g.groups.size()) ? g.groups[handle]
                                                                       : MPI_COMM_NULL;
}

// Waits for `request` until the deadline, polling with a growing sleep (the ranks may share
// cores with each other, so spinning would take the core the peer needs).
int Wait(MPI_Request* request, const char* what, int32_t group, char* err) {
  const auto start = std::chrono::steady_clock::now();
  long sleep_ns = 1000;
  for (int polls = 0;; ++polls) {
    int done = 0;
    int rc;
    {
      Lock lock(g.mpi);  // released while sleeping, so another thread's collective can start
      rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) return MpiError(err, what, rc);
    if (done) return 0;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > g.timeout_s) {
      g.failed = true;
      int rank = 0;
      {
        Lock lock(g.mpi);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      }
      return Error(err,
                   "%s: rank %d waited %.0f s for the other ranks of the group (a rank died, "
                   "hangs or skipped this collective); KILN_COMM_TIMEOUT sets the limit",
                   what, rank, waited);
    }
    if (polls > 100) {
      timespec ts{0, sleep_ns};
      nanosleep(&ts, nullptr);
      if (sleep_ns < 1000000) sleep_ns *= 2;
    }
  }
}

// Starts a collective with `start` (an MPI_I* call) under the MPI lock; MPI counts are ints:
// the engine checks sizes before calling (core/comm.cc).
template <typename StartFn>
int Start(StartFn start, MPI_Request* request, const char* what, int32_t group, char* err) {
  if (Group(group) == MPI_COMM_NULL) return Error(err, "%s: no group with handle %d", what, group);
  int rc;
  {
    Lock lock(g.mpi);
    rc = start(request);
  }
  return rc == MPI_SUCCESS ? 0 : MpiError(err, what, rc);
}

template <typename StartFn>
int Run(StartFn start, const char* what, int32_t group, char* err) {
  MPI_Request req;
  if (Start(start, &req, what, group, err) != 0) return 1;
  return Wait(&req, what, group, err);
}

int Init(double timeout_s, char* err) {
  g.timeout_s = timeout_s;
  int initialized = 0, finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return Error(err, "MPI cannot start again in a process after release(); start a new process");
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return MpiError(err, "MPI_Init_thread", rc);
    g.we_initialized = true;
  }
  // Errors come back as codes (turned into Python exceptions), not MPI's default abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &g.local);
  g.groups = {MPI_COMM_WORLD};
  return 0;
}

int Rank(int32_t group) {
  Lock lock(g.mpi);
  int r = -1;
  if (MPI_Comm c = Group(group); c != MPI_COMM_NULL) MPI_Comm_rank(c, &r);
  return r;
}

int Size(int32_t group) {
  Lock lock(g.mpi);
  int n = 0;
  if (MPI_Comm c = Group(group); c != MPI_COMM_NULL) MPI_Comm_size(c, &n);
  return n;
}

int LocalRank() {
  Lock lock(g.mpi);
  int r = 0;
  MPI_Comm_rank(g.local, &r);
  return r;
}

int LocalSize() {
  Lock lock(g.mpi);
  int n = 1;
  MPI_Comm_size(g.local, &n);
  return n;
}

// MPI_Comm_create_group: collective over the members only, as MindSpore's create_group is.
int CreateGroup(const int32_t* ranks, int32_t n, int32_t* handle, char* err) {
  Lock lock(g.mpi);
  MPI_Group world, sub;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> r(ranks, ranks + n);
  MPI_Group_incl(world, n, r.data(), &sub);
  MPI_Comm comm = MPI_COMM_NULL;
  const int rc =
      MPI_Comm_create_group(MPI_COMM_WORLD, sub, static_cast<int>(g.groups.size()), &comm);
  MPI_Group_free(&sub);
  MPI_Group_free(&world);
  if (rc != MPI_SUCCESS) return MpiError(err, "MPI_Comm_create_group", rc);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  *handle = static_cast<int32_t>(g.groups.size());
  g.groups.push_back(comm);
  return 0;
}

int DestroyGroup(int32_t handle, char* err) {
  Lock lock(g.mpi);
  MPI_Comm c = Group(handle);
  if (handle == 0 || c == MPI_COMM_NULL) return Error(err, "no group with handle %d", handle);
  MPI_Comm_free(&g.groups[handle]);
  g.groups[handle] = MPI_COMM_NULL;
  return 0;
}

int AllReduce(int32_t group, const void* send, void* recv, int64_t count, int32_t dtype, int32_t op,
              char* err) {
  return Run(
      [&](MPI_Request* r) {
        return MPI_Iallreduce(send, recv, static_cast<int>(count), Type(dtype), Op(op),
                              Group(group), r);
      },
      "AllReduce", group, err);
}

int AllGather(int32_t group, const void* send, void* recv, int64_t count, int32_t dtype,
              char* err) {
  const int n = static_cast<int>(count);
  return Run(
      [&](MPI_Request* r) {
        return MPI_Iallgather(send, n, Type(dtype), recv, n, Type(dtype), Group(group), r);
      },
      "AllGather", group, err);
}

int ReduceScatter(int32_t group, const void* send, void* recv, int64_t count, int32_t dtype,
                  int32_t op, char* err) {
  return Run(
      [&](MPI_Request* r) {
        return MPI_Ireduce_scatter_block(send, recv, static_cast<int>(count), Type(dtype), Op(op),
                                         Group(group), r);
      },
      "ReduceScatter", group, err);
}

int Broadcast(int32_t group, void* buf, int64_t count, int32_t dtype, int32_t root, char* err) {
  return Run(
      [&](MPI_Request* r) {
        return MPI_Ibcast(buf, static_cast<int>(count), Type(dtype), root, Group(group), r);
      },
      "Broadcast", group, err);
}

int Barrier(int32_t group, char* err) {
  return Run([&](MPI_Request* r) { return MPI_Ibarrier(Group(group), r); }, "Barrier", group, err);
}

// OpenMPI moves a non-blocking collective on only inside MPI calls (it runs no progress
// thread): testing the started requests now and then lets their later rounds go out while the
// backward pass computes, instead of all at the wait. A completed request becomes
// MPI_REQUEST_NULL, which the wait then finds done at once; an error is left for the wait.
void ProgressLocked() {
  for (auto& [id, req] : g.started) {
    int done = 0;
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
  }
}

int AllReduceStart(int32_t group, const void* send, void* recv, int64_t count, int32_t dtype,
                   int32_t op, int64_t* request, char* err) {
  MPI_Request req;
  const int rc = Start(
      [&](MPI_Request* r) {
        return MPI_Iallreduce(send, recv, static_cast<int>(count), Type(dtype), Op(op),
                              Group(group), r);
      },
      &req, "AllReduce", group, err);
  if (rc != 0) return rc;
  Lock lock(g.mpi);
  *request = g.next_request++;
  g.started[*request] = req;
  ProgressLocked();
  return 0;
}

void Progress() {
  Lock lock(g.mpi);
  ProgressLocked();
}

int WaitStarted(int64_t request, const char* what, char* err) {
  MPI_Request req;
  {
    Lock lock(g.mpi);
    auto it = g.started.find(request);
    if (it == g.started.end())
      return Error(err, "%s: no started request %lld", what, static_cast<long long>(request));
    req = it->second;
    g.started.erase(it);
  }
  return Wait(&req, what, 0, err);
}

void Abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

int Finalize(char* err) {
  // MPI_Finalize waits for every rank without a deadline: meet them in a barrier that has one
  // first, so a rank that hangs elsewhere ends the job instead of stalling it forever.
  // Requests started and never waited for (an error between start and wait) are completed
  // first: MPI_Finalize with pending requests is erroneous.
  while (!g.failed && !g.started.empty()) {
    if (WaitStarted(g.started.begin()->first, "release", err) != 0) {
      std::fprintf(stderr, "kiln.communication: %s\n", err);
      std::fflush(stderr);
    }
  }
  if (!g.failed && !g.groups.empty()) {
    if (Run([](MPI_Request* r) { return MPI_Ibarrier(MPI_COMM_WORLD, r); }, "release", 0, err) !=
        0) {
      std::fprintf(stderr, "kiln.communication: %s\n", err);
      std::fflush(stderr);
    }
  }
  if (g.failed) Abort(1);
  for (size_t i = 1; i < g.groups.size(); ++i)
    if (g.groups[i] != MPI_COMM_NULL) MPI_Comm_free(&g.groups[i]);
  g.groups.clear();
  if (g.local != MPI_COMM_NULL) MPI_Comm_free(&g.local);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g.we_initialized && !finalized) {
    const int rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) return MpiError(err, "MPI_Finalize", rc);
  }
  return 0;
}

const KilnCommApi kApi = {kKilnCommAbiVersion, Init,        Rank,         Size,      LocalRank,
                          LocalSize,           CreateGroup, DestroyGroup, AllReduce, AllGather,
                          ReduceScatter,       Broadcast,   Barrier,      Finalize,  Abort,
                          AllReduceStart,      WaitStarted, Progress};

}  // namespace

extern "C" __attribute__((visibility("default"))) const KilnCommApi* kiln_comm_api() {
  return &kApi;
}
