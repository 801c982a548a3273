// autodiff.cc - the eager gradient tape as kiln._C.Tape (a context manager).
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "runtime/tape.h"

namespace kiln::bind {

namespace {

std::vector<Tensor> ToTensors(nb::sequence items, bool allow_none) {
  std::vector<Tensor> out;
  for (nb::handle h : items) {
    if (h.is_none() && allow_none) {
      out.emplace_back();
      continue;
    }
    if (!nb::isinstance<Tensor>(h)) throw nb::type_error("grad: expected Tensors");
    out.push_back(nb::cast<const Tensor&>(h));
  }
  return out;
}

}  // namespace

void BindAutodiff(nb::module_& m) {
  m.def("tape_active", &AnyTapeActive);
  nb::class_<Tape>(m, "Tape")
      .def(nb::init<>())
      .def("watch", &Tape::Watch)
      .def("is_watched", &Tape::IsWatched)
      .def_prop_ro("num_records", &Tape::num_records)
      .def(
          "__enter__",
          [](Tape& t) -> Tape& {
            PushTape(&t);
            return t;
          },
          nb::rv_policy::reference)
      .def("__exit__", [](Tape& t, nb::args) { PopTape(&t); })
      .def("gradient", [](Tape& t, nb::sequence targets, nb::sequence sens, nb::sequence sources) {
        std::vector<Tensor> grads =
            t.Gradient(ToTensors(targets, false), ToTensors(sens, true), ToTensors(sources, false));
        nb::list out;
        for (auto& g : grads) out.append(Wrap(std::move(g)));
        return nb::tuple(out);
      });
}

}  // namespace kiln::bind
