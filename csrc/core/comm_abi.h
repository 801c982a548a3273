// comm_abi.h - the C function table a communication library (libkiln_comm.so) hands the engine.
//
// The engine never links MPI: kiln.communication.init() loads the library at run time
// (core/comm.h) and the collective ops' kernels call through this table. Plain C types only, so
// the library needs nothing of kiln's but this header. Every call returns 0 or a nonzero code
// with a message in `err` (a collective that waits past the timeout fails instead of hanging).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// Element types on the wire; the engine converts 16-bit floats to float32 and bool to uint8.
enum KilnCommDType : int32_t {
  kKilnCommU8 = 0,
  kKilnCommU16,
  kKilnCommU32,
  kKilnCommU64,
  kKilnCommI8,
  kKilnCommI16,
  kKilnCommI32,
  kKilnCommI64,
  kKilnCommF32,
  kKilnCommF64,
};

enum KilnCommReduce : int32_t { kKilnCommSum = 0, kKilnCommMax, kKilnCommMin, kKilnCommProd };

constexpr int32_t kKilnCommAbiVersion = 2;
constexpr size_t kKilnCommErrLen = 512;

// Group handles: 0 is the world; create_group returns others.
struct KilnCommApi {
  int32_t abi_version;
  // Initializes the library (MPI_Init_thread); timeout_s bounds every later wait.
  int (*init)(double timeout_s, char* err);
  int (*rank)(int32_t group);
  int (*size)(int32_t group);
  int (*local_rank)();
  int (*local_size)();
  // A group of the world ranks `ranks` (in that order); only its members call it.
  int (*create_group)(const int32_t* ranks, int32_t n, int32_t* handle, char* err);
  int (*destroy_group)(int32_t handle, char* err);
  int (*all_reduce)(int32_t group, const void* send, void* recv, int64_t count, int32_t dtype,
                    int32_t op, char* err);
  // recv holds size * count elements, rank r's in block r.
  int (*all_gather)(int32_t group, const void* send, void* recv, int64_t count, int32_t dtype,
                    char* err);
  // send holds size * count elements; each rank gets block `rank` of the reduction.
  int (*reduce_scatter)(int32_t group, const void* send, void* recv, int64_t count, int32_t dtype,
                        int32_t op, char* err);
  int (*broadcast)(int32_t group, void* buf, int64_t count, int32_t dtype, int32_t root, char* err);
  int (*barrier)(int32_t group, char* err);
  // Ends the library: MPI_Finalize, or MPI_Abort when a collective failed (the others may be
  // waiting in one, and a finalize would wait for them forever).
  int (*finalize)(char* err);
  // Ends every rank of the job at once (an uncaught error on one rank).
  void (*abort)(int code);
  // Starts an all-reduce and returns at once: `request` names it for wait(). send and recv must
  // stay untouched until wait() returns (the overlap of gradient buckets with the backward pass).
  int (*all_reduce_start)(int32_t group, const void* send, void* recv, int64_t count, int32_t dtype,
                          int32_t op, int64_t* request, char* err);
  // Waits for a started collective, with the same deadline as the blocking ones; `what` names
  // it in the message. The request is consumed either way.
  int (*wait)(int64_t request, const char* what, char* err);
  // Lets the started requests advance (MPI progresses them only inside its calls); cheap.
  void (*progress)();
};

// The one symbol the library exports.
typedef const KilnCommApi* (*KilnCommApiFn)();
}
