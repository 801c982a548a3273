// ir.cc - the IR's text form, verifier and interpreter, for tests and tools.
#include "ir/ir.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "passes/passes.h"
#include "runtime/executor.h"

namespace kiln::bind {

void BindIR(nb::module_& m) {
  m.def(
      "ir_reprint", [](const std::string& text) { return ir::Print(ir::Parse(text)); },
      "Parses IR text and prints it back in the canonical form.");
  m.def(
      "ir_run_passes",
      [](const std::string& text, const std::vector<std::string>& names) {
        ir::Module module = ir::Parse(text);
        ir::Verify(module);
        for (const auto& name : names) {
          passes::RunPass(module, name);
          ir::Verify(module);
        }
        return ir::Print(module);
      },
      "Parses IR text, runs the named passes (verifying after each) and prints the result.");
  m.def("ir_verify", [](const std::string& text) { ir::Verify(ir::Parse(text)); });
  m.def("ir_run", [](const std::string& text, nb::sequence args) {
    ir::Module module = ir::Parse(text);
    ir::Verify(module);
    std::vector<Tensor> inputs;
    for (nb::handle h : args) {
      if (!nb::isinstance<Tensor>(h)) throw nb::type_error("expected a list of Tensors as inputs");
      inputs.push_back(nb::cast<const Tensor&>(h));
    }
    nb::list out;
    for (auto& t : Run(module, inputs)) out.append(Wrap(std::move(t)));
    return nb::tuple(out);
  });
}

}  // namespace kiln::bind
