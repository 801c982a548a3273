// effects.h - what running a node may do besides computing its outputs: the one answer the
// passes share to "may this node be removed, moved, merged or folded?".
//
// An op's effects come from its registry entry (mutated_inputs: it writes an input in place;
// is_random: it draws from the global generator); print and raise nodes have their own; an
// if/while/call has the effects of the functions it runs, found for the whole module at once
// (regions call regions, so to a fixed point). A constant has none.
#pragma once

#include <string>
#include <unordered_map>

#include "ir/ir.h"

namespace kiln::analysis {

struct Effects {
  bool writes = false;  // writes an input's storage in place (assign, index_put, optimizer
                        // updates, batch_norm's running statistics)
  bool random = false;  // draws from the global generator
  bool prints = false;  // writes to stdout
  bool raises = false;  // raises an exception (a raise node; a kernel's bad-input error is not
                        // counted: every op may throw one)
  bool communicates = false;  // a collective: the other ranks run the same ones in the same
                              // order, so it stays where it is, once (ops/collective.cc)
  bool reads_queue = false;   // pops a dataset queue (get_next): each run takes the next batch

  // Nothing but its outputs depends on running it: it may be removed when unused, merged with
  // a duplicate, or moved past other pure nodes.
  bool pure() const {
    return !writes && !random && !prints && !raises && !communicates && !reads_queue;
  }
  Effects& operator|=(const Effects& o);
  static Effects All() { return {true, true, true, true, true, true}; }
};

// The effects of a registry op.
Effects OpEffects(const OpDef& def);
// An op node whose op has no effect: the result depends only on its inputs and attributes, so it
// may run at compile time on constants (fold) or once for two equal nodes (cse).
bool IsPureOp(const ir::Node& node);

// The effects of every function of a module and of every node in it, callees included.
class ModuleEffects {
 public:
  explicit ModuleEffects(const ir::Module& module);

  // The effects of running `node`: its own, and for if/while/call those of its functions. A
  // function the module does not have (added after this analysis ran) counts as having every
  // effect.
  Effects Of(const ir::Node& node) const;
  // The effects of running function `name`'s nodes.
  Effects OfFunc(const std::string& name) const;

  // Shorthands for the passes' questions.
  bool IsPure(const ir::Node& node) const { return Of(node).pure(); }
  bool MayWrite(const ir::Node& node) const { return Of(node).writes; }

 private:
  std::unordered_map<std::string, Effects> funcs_;
};

}  // namespace kiln::analysis
