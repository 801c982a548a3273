// graph_builder.h - builds an IR module while the Python front end walks a function's source.
//
// Values are addressed as (function, ValueRef). Control-flow regions (the branches of an `if`,
// the cond and body of a `while`) are functions of their own; when a region uses a value of an
// enclosing function, the builder *captures* it: every function of the region's group gets a
// parameter for it, in one shared order, and the if/while node passes the value in. The front end
// therefore never tracks which outer values a region uses.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace kiln::frontend {

struct GValue {
  int func = 0;  // index into the module's functions
  ir::ValueRef ref;
};

class GraphBuilder {
 public:
  GraphBuilder();

  ir::Module& module() { return module_; }
  TensorMeta Meta(const GValue& v) const;
  int current_func() const { return stack_.back().func; }

  // ---- the entry function ----
  GValue Input(const TensorMeta& meta, const std::string& name);
  void SetOutputs(const std::vector<GValue>& outputs);

  // ---- nodes in the current function ----
  GValue Const(const Tensor& value, const ir::SourceLoc& loc);
  std::vector<GValue> Op(OpKind op, const std::vector<GValue>& inputs,
                         const std::vector<bool>& absent, Attrs attrs, const ir::SourceLoc& loc);
  void Print(const std::string& format, const std::vector<GValue>& inputs,
             const ir::SourceLoc& loc);
  void Raise(const std::string& type, const std::string& format, const std::vector<GValue>& inputs,
             const ir::SourceLoc& loc);
  // A run-time interpreter node (LAX): the host runs site `key` when the graph runs.
  std::vector<GValue> Interpret(const std::string& key, const std::string& what,
                                const std::vector<GValue>& inputs,
                                const std::vector<TensorMeta>& outputs, const ir::SourceLoc& loc);

  // Copies `callee`'s functions into this module (fresh names from `prefix`) and calls its
  // entry on `params` (every entry parameter, in order): a loaded model inside a compiled
  // function. Returns the call's results.
  std::vector<GValue> Inline(const ir::Module& callee, const std::string& prefix,
                             const std::vector<GValue>& params, const ir::SourceLoc& loc);

  // ---- autodiff ----
  // How many nodes the current function has: the start of a forward fragment to differentiate.
  int Mark() { return static_cast<int>(FuncAt(current_func()).nodes.size()); }
  // Drops the current function's nodes after `mark` (a compile-time attempt that was abandoned).
  void Truncate(int mark);
  // Gradients of targets w.r.t. sources over the current function's nodes since `mark`.
  std::vector<GValue> Gradient(int mark, const std::vector<GValue>& targets,
                               const std::vector<GValue>& sens,
                               const std::vector<bool>& sens_absent,
                               const std::vector<GValue>& sources);

  // ---- regions ----
  // A group of region functions sharing captured values (an if's branches, a while's cond+body).
  int NewGroup();
  // Starts a region function with `leading` params (a while's carried values); returns the
  // values of those params inside it.
  std::vector<GValue> BeginRegion(int group, const std::string& prefix,
                                  const std::vector<TensorMeta>& leading);
  void EndRegion(const std::vector<GValue>& results);
  std::vector<GValue> If(const GValue& cond, int group, const ir::SourceLoc& loc);
  std::vector<GValue> While(const std::vector<GValue>& carried, int group,
                            const ir::SourceLoc& loc);

 private:
  struct Group {
    int parent_func;               // the function the region's node goes into
    std::vector<GValue> captures;  // values of the parent (or further out), in order
    std::vector<int> funcs;        // region functions, in creation order
    std::vector<size_t> leading;   // leading param count of each function
  };
  struct Frame {
    int func;
    int group;  // -1 for the entry function
  };

  ir::Func& FuncAt(int index) { return *module_.funcs()[index]; }
  // The ValueRef of v inside the current function, capturing it through enclosing regions.
  ir::ValueRef Resolve(const GValue& v);
  ir::ValueRef ResolveIn(size_t depth, const GValue& v);
  std::vector<GValue> Wrap(const std::vector<ir::ValueRef>& refs);

  ir::Module module_;
  std::vector<Frame> stack_;
  std::vector<Group> groups_;
  std::map<std::tuple<int, int, int, int>, int> captured_;  // (func, src func, node, idx) -> param
};

}  // namespace kiln::frontend
