// comm.cc - kiln.communication's engine calls (core/comm.h) and the eager gradient buckets
// (runtime/grad_buckets.h); conversion only.
#include "core/comm.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "runtime/grad_buckets.h"

namespace nb = nanobind;

namespace kiln::bind {

namespace {

// A GradBuckets that is this thread's gradient listener between __enter__ and __exit__.
struct ScopedGradBuckets : GradBuckets {
  using GradBuckets::GradBuckets;
  GradientListener* previous = nullptr;
};

std::vector<Tensor> TensorList(nb::sequence items, const char* who) {
  std::vector<Tensor> out;
  for (nb::handle h : items) {
    if (!nb::isinstance<Tensor>(h))
      throw nb::type_error((std::string(who) + ": expected Tensors").c_str());
    out.push_back(nb::cast<const Tensor&>(h));
  }
  return out;
}

void BindGradBuckets(nb::module_& m) {
  nb::class_<ScopedGradBuckets>(m, "GradBuckets")
      .def("__init__",
           [](ScopedGradBuckets* self, nb::sequence params, std::vector<std::vector<int>> buckets,
              std::string group) {
             new (self) ScopedGradBuckets(TensorList(params, "GradBuckets"), std::move(buckets),
                                          std::move(group));
           })
      .def(
          "__enter__",
          [](ScopedGradBuckets& b) -> ScopedGradBuckets& {
            b.previous = SetGradientListener(&b);
            return b;
          },
          nb::rv_policy::reference)
      .def("__exit__", [](ScopedGradBuckets& b, nb::args) { SetGradientListener(b.previous); })
      .def("finish",
           [](ScopedGradBuckets& b, nb::sequence grads) {
             std::vector<Tensor> in = TensorList(grads, "DistributedGradReducer"), out;
             {
               nb::gil_scoped_release release;  // waits for the other ranks
               out = b.Finish(in);
             }
             nb::list result;
             for (auto& g : out) result.append(Wrap(std::move(g)));
             return nb::tuple(result);
           })
      .def_prop_ro("started_early", &ScopedGradBuckets::started_early)
      .def_prop_ro("num_buckets", &ScopedGradBuckets::num_buckets);
}

}  // namespace

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
  m.def("comm_pending_count", &comm::PendingCount);
  BindGradBuckets(m);
}

}  // namespace kiln::bind
