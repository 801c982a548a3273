// aliasing.h - which values of a function may share storage, and which of them something in the
// function writes in place.
//
// Storage is shared through views (an op with is_view: its outputs may be input 0's bytes, as
// reshape, transpose, assign and index_put return) and through opaque nodes (an if/while/call
// may return one of its inputs, or a view of it, and so may an interpret node's Python code: their
// outputs join all their inputs). Values are grouped into alias classes by those two rules. A
// class is written when some node may write one of its values in place: an op's mutated_inputs,
// or every input of an if/while/call whose functions write (ModuleEffects; which parameter they
// write is not tracked) and of an interpret node.
#pragma once

#include <vector>

#include "analysis/effects.h"
#include "ir/ir.h"

namespace kiln::analysis {

// The inputs the outputs of `node` may share storage with: {0} for a view op, every input for
// an if/while/call/interpret node, none otherwise.
std::vector<int> MayAliasInputs(const ir::Node& node);
// The inputs `node` may write in place: an op's mutated inputs; every input of an if/while/call
// whose functions write, and of an interpret node; none otherwise.
std::vector<int> WrittenInputs(const ir::Node& node, const ModuleEffects& effects);
// The node's outputs are new buffers its kernel fills (an op whose outputs the dispatcher
// allocates from inference): not a constant (the same tensor on every call), not a view.
bool MakesFreshOutputs(const ir::Node& node);

// How a function's parameters relate: a caller may pass one tensor for two parameters
// (MayAlias, the safe assumption for rewriting), or the question is about each parameter on its
// own (Distinct: "is this parameter written?").
enum class ParamAliasing { MayAlias, Distinct };

class AliasClasses {
 public:
  AliasClasses(const ir::Func& f, const ModuleEffects& effects,
               ParamAliasing params = ParamAliasing::MayAlias);

  // The class of `v`: two values in one class may share storage.
  int Class(ir::ValueRef v) const;
  bool MayAlias(ir::ValueRef a, ir::ValueRef b) const { return Class(a) == Class(b); }
  // Something in the function may write v's storage in place (through any view of it).
  bool Written(ir::ValueRef v) const { return written_[Class(v)]; }
  // v may share storage with a parameter, i.e. with a tensor the caller holds.
  bool SharesParam(ir::ValueRef v) const;
  // v may share storage with one of the function's results.
  bool Returned(ir::ValueRef v) const { return returned_[Class(v)]; }

 private:
  int Id(ir::ValueRef v) const { return v.is_param() ? v.index : offset_[v.node] + v.index; }
  int Root(int i) const;
  void Union(int a, int b);

  std::vector<int> offset_;          // node -> id of its output 0 (params come first)
  mutable std::vector<int> parent_;  // union-find forest over value ids
  std::vector<bool> written_;        // by class root
  std::vector<bool> returned_;       // by class root
  std::vector<bool> has_param_;      // by class root
};

}  // namespace kiln::analysis
