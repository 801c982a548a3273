// comm.cc - kiln.communication's engine calls (core/comm.h); conversion only.
#include "core/comm.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace nb = nanobind;

namespace kiln::bind {

void BindComm(nb::module_& m) {
  m.def("comm_load", [](const std::string& path, double timeout_s) {
    nb::gil_scoped_release release;  // MPI_Init may take a while; other threads may run
    comm::Load(path, timeout_s);
  });
  m.def("comm_loaded", &comm::Loaded);
  m.def("comm_release", [] {
    nb::gil_scoped_release release;
    comm::Release();
  });
  m.def("comm_abort", &comm::Abort);
  m.def("comm_rank", &comm::Rank);
  m.def("comm_size", &comm::Size);
  m.def("comm_local_rank", &comm::LocalRank);
  m.def("comm_local_size", &comm::LocalSize);
  m.def("comm_create_group", &comm::CreateGroup);
  m.def("comm_destroy_group", &comm::DestroyGroup);
  m.def("comm_group_ranks", &comm::GroupRanks);
  m.def("comm_is_world_group", &comm::IsWorldGroup);
}

}  // namespace kiln::bind
