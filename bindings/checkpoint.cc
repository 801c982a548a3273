// checkpoint.cc - MindSpore .ckpt bytes <-> entries (engine/checkpoint_file.h); conversion only.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "engine/checkpoint_file.h"

namespace nb = nanobind;

namespace kiln::bind {

void BindCheckpoint(nb::module_& m) {
  m.def(
      "ckpt_parse",
      [](nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> data) {
        std::vector<engine::CheckpointEntry> entries;
        {
          nb::gil_scoped_release release;  // `data` stays alive: the caller holds it
          entries = engine::ParseCheckpoint(
              std::string_view(reinterpret_cast<const char*>(data.data()), data.shape(0)));
        }
        nb::list out;
        for (auto& e : entries) {
          nb::list dims;
          for (int64_t d : e.dims) dims.append(d);
          out.append(nb::make_tuple(e.name, e.type, nb::tuple(dims),
                                    nb::bytes(e.data.data(), e.data.size())));
        }
        return out;
      },
      "Entries (name, tensor_type, dims, raw bytes) of a MindSpore .ckpt file's bytes (a uint8 "
      "array, e.g. a read-only memmap of the file); "
      "ValueError saying what is wrong when they are damaged.");
  m.def(
      "ckpt_serialize_entry",
      [](const std::string& name, const std::string& type, const std::vector<int64_t>& dims,
         nb::bytes data, size_t slice_bytes) {
        std::string out = engine::SerializeCheckpointEntry(
            name, type, dims, std::string_view(data.c_str(), data.size()), slice_bytes);
        return nb::bytes(out.data(), out.size());
      },
      nb::arg("name"), nb::arg("type"), nb::arg("dims"), nb::arg("data"),
      nb::arg("slice_bytes") = engine::kCheckpointSliceBytes,
      "The bytes MindSpore writes for one checkpoint entry (one message per slice).");
}

}  // namespace kiln::bind
