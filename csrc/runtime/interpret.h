// interpret.h - the host behind run-time interpreter nodes: LAX code that only an interpreter
// (Python) can run, called with the values the graph computed.
//
// The engine never links Python: the bindings install a host (SetInterpretHost) that finds the
// site by its key and runs it. Without a host (kiln-run, the C++ runtime) such a node is an error
// naming its line. The host's results are checked against the node's declared types, so a value
// of another dtype or shape than compiling assumed is an error, never a silent misread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/ir.h"

namespace kiln {

using InterpretHost =
    std::function<std::vector<Tensor>(const std::string& key, const std::vector<Tensor>& inputs)>;

// Installs the process's host (an empty function removes it). Thread-safe.
void SetInterpretHost(InterpretHost host);

// Runs an interpret node through the host and checks what it returned.
std::vector<Tensor> RunInterpretNode(const ir::Node& node, const std::vector<Tensor>& inputs);

// "file:line" of every interpret node in `module`, in function order: what export refuses.
std::vector<std::string> InterpretSites(const ir::Module& module);

}  // namespace kiln
