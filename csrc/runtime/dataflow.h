// dataflow.h - the order a function's nodes must keep when several threads run them at once.
//
// On a busy machine kiln's threads each get a core only part of the time, out of phase with each
// other; a graph whose nodes only the calling thread starts advances only while that thread has
// a core. So there a team of threads runs the nodes (executor.cc): any member takes a node whose
// predecessors are done. The predecessors planned here are every order the sequential run
// implies: a node's inputs; every earlier access to storage a node writes in place, and the
// latest write to storage it reads or views (alias classes, analysis/aliasing.h); and the program
// order of draws from the random generator (set_seed's sequence stays the same).
#pragma once

#include <functional>
#include <vector>

#include "analysis/effects.h"
#include "ir/ir.h"

namespace kiln {

struct DataflowPlan {
  // Only functions of op, constant and chunked-call nodes run as a team: an if, while, call,
  // print, raise or interpret node (a region, output, or Python) runs where it always ran, and so
  // do ops that talk to other processes, read a queue or call a user's library.
  bool eligible = false;
  std::vector<int> num_preds;           // per node
  std::vector<std::vector<int>> succs;  // per node: the nodes waiting for it
  std::vector<std::vector<int>> reads;  // per node: the distinct value slots it reads
  std::vector<int> readers;             // per slot: distinct nodes reading it; -1: kept
};

// Plans `f` whose values sit in slots (parameters first, then each node's outputs in order);
// `chunked(n)` says whether call node n runs a chunked elementwise body.
DataflowPlan PlanDataflow(const ir::Func& f, const analysis::ModuleEffects& effects,
                          const std::function<bool(int)>& chunked);

}  // namespace kiln
