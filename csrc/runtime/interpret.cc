// interpret.cc - running interpret nodes through the installed host, and checking its results.
#include "runtime/interpret.h"

#include <memory>
#include <mutex>

#include "core/error.h"

namespace kiln {
namespace {

std::mutex g_host_mutex;
std::shared_ptr<const InterpretHost> g_host;  // replaced whole, so a running call keeps its copy

std::shared_ptr<const InterpretHost> CurrentHost() {
  std::lock_guard<std::mutex> lock(g_host_mutex);
  return g_host;
}

std::string Where(const ir::Node& node) {
  std::string where = node.loc.known() ? node.loc.file + ":" + std::to_string(node.loc.line)
                                       : std::string("an unknown line");
  return where + " (" + node.text + ")";
}

std::string ShapeText(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return s + (shape.size() == 1 ? ",)" : ")");
}

void CheckResult(const ir::Node& node, size_t k, const Tensor& got) {
  const TensorMeta& want = node.outputs[k];
  bool fits = got.defined() && got.dtype() == want.dtype && got.shape().size() == want.shape.size();
  for (size_t d = 0; fits && d < want.shape.size(); ++d)
    fits = want.shape[d] < 0 || want.shape[d] == got.shape()[d];
  KILN_CHECK(fits, Type, "the Python code at ", Where(node), " returned ",
             got.defined() ? std::string(DTypeName(got.dtype())) + " " + ShapeText(got.shape())
                           : std::string("no tensor"),
             " when the graph ran, but the graph was compiled for ", DTypeName(want.dtype), " ",
             ShapeText(want.shape),
             ": a value computed in Python must keep the dtype and rank it had while compiling");
}

}  // namespace

void SetInterpretHost(InterpretHost host) {
  std::shared_ptr<const InterpretHost> next;
  if (host) next = std::make_shared<const InterpretHost>(std::move(host));
  std::lock_guard<std::mutex> lock(g_host_mutex);
  g_host = std::move(next);
}

std::vector<Tensor> RunInterpretNode(const ir::Node& node, const std::vector<Tensor>& inputs) {
  auto host = CurrentHost();
  KILN_CHECK(host != nullptr, Runtime, "the graph runs Python code at ", Where(node),
             " (a run-time interpreter node of the LAX syntax level); it runs only from kiln's "
             "Python package, not in the C++ runtime");
  std::vector<Tensor> results = (*host)(node.callees.at(0), inputs);
  KILN_CHECK(results.size() == node.outputs.size(), Runtime, "the Python code at ", Where(node),
             " returned ", results.size(), " values; the graph expects ", node.outputs.size());
  for (size_t k = 0; k < results.size(); ++k) CheckResult(node, k, results[k]);
  return results;
}

std::vector<std::string> InterpretSites(const ir::Module& module) {
  std::vector<std::string> sites;
  for (const auto& f : module.funcs())
    for (const auto& node : f->nodes)
      if (node.kind == ir::NodeKind::Interpret) sites.push_back(Where(node));
  return sites;
}

}  // namespace kiln
