// executor.cc - runs IR functions from a schedule planned once per function.
//
// Planning (Program's constructor) gives every value a slot in a flat table (parameters, then
// each node's outputs), resolves each op's registry entry, and records after which node each
// value is last used. Running walks the nodes: an op node calls its kernel directly (attributes
// complete, casts explicit, output types inferred at compile time), then releases the values
// that died, so their buffers return to the caching allocator for the next node (peak memory ~
// the live set; no system allocation in steady state). An elementwise op whose input dies at it
// writes its output into that input's buffer when nothing else shares it. A constant that
// something writes in place (index_put into a folded zeros) or that the function returns is
// copied on each run: constants are shared by every run and must stay as compiled. `if` and
// `while` run their region functions' plans. While the machine is crowded, a function of ops
// runs as a team instead (TeamRun, dataflow.h): kiln's threads take ready nodes as they get cores.
#include "runtime/executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <sstream>
#include <thread>
#include <vector>

#include "analysis/aliasing.h"
#include "analysis/chunking.h"
#include "core/contended_pool.h"
#include "core/contention.h"
#include "core/error.h"
#include "core/interrupt.h"
#include "core/parallel.h"
#include "core/thread_slice.h"
#include "kernels/cpu/derived_cache.h"
#include "ops/evaluate.h"
#include "runtime/dataflow.h"
#include "runtime/fused_elementwise.h"
#include "runtime/interpret.h"

namespace kiln {

struct NodePlan {
  const ir::Node* node = nullptr;
  const OpDef* def = nullptr;  // op nodes
  std::vector<int> inputs;     // value slots; -1 for an absent optional input
  int first_output = 0;        // slot of output 0 (the others follow)
  bool static_outputs = true;  // every output dim known at compile time
  // The input position whose buffer output 0 may take when it is not shared at run time (-1:
  // none). Only for elementwise ops, and only inputs an op of this function made, that die here.
  int reuse_input = -1;
  // A constant that something writes in place or that leaves the function (where the caller, or
  // the user, may write it): a fresh copy on each run, so no run sees another's writes.
  bool copy_const = false;
  std::vector<int> release;                         // slots whose last use is this node
  const FuncPlan* callees[2] = {nullptr, nullptr};  // if: then/else; while: cond/body; call
  // A call of a fused elementwise body: run in one chunked pass (fused_elementwise.h).
  std::shared_ptr<const ChunkedFunc> chunked;
};

struct FuncPlan {
  const ir::Func* func = nullptr;
  int num_slots = 0;
  // Parameters an op of this function writes in place (an optimizer's weights): their packed
  // copies are forgotten when it starts (cpu::ForgetPackedCopies).
  std::vector<int> written_params;
  std::vector<NodePlan> nodes;
  std::vector<int> results;  // slots; -1 for None
  DataflowPlan dataflow;     // how a team may run the nodes (dataflow.h)
};

namespace {

bool TypeMatches(const TensorMeta& want, const Tensor& t) {
  if (want.dtype != t.dtype() || want.shape.size() != static_cast<size_t>(t.ndim())) return false;
  for (size_t i = 0; i < want.shape.size(); ++i)
    if (want.shape[i] >= 0 && want.shape[i] != t.shape()[i]) return false;
  return true;
}

bool Truth(const Tensor& t, const ir::Node& node) {
  KILN_CHECK(t.numel() == 1, Value, "the condition at line ", node.loc.line,
             " must be a single value, got a tensor of shape ", ShapeStr(t.shape()));
  return *t.To(DType::Bool).Contiguous().data<bool>();
}

bool AllStatic(const std::vector<TensorMeta>& metas) {
  for (const auto& m : metas)
    if (!IsStaticShape(m.shape)) return false;
  return true;
}

std::unique_ptr<FuncPlan> PlanFunc(const ir::Func& f, const analysis::ModuleEffects& effects) {
  auto plan = std::make_unique<FuncPlan>();
  plan->func = &f;
  std::vector<int> base(f.nodes.size());
  int slots = static_cast<int>(f.params.size());
  for (size_t n = 0; n < f.nodes.size(); ++n) {
    base[n] = slots;
    slots += static_cast<int>(f.nodes[n].outputs.size());
  }
  plan->num_slots = slots;
  auto slot = [&](const ir::ValueRef& v) {
    if (v.is_none()) return -1;
    return v.is_param() ? v.index : base[v.node] + v.index;
  };
  // Last use of each slot: a node index, or nodes.size() for function results (never freed).
  const int end = static_cast<int>(f.nodes.size());
  std::vector<int> last_use(slots, -1);
  std::vector<int> maker(slots, -1);  // the node that makes each slot
  for (size_t n = 0; n < f.nodes.size(); ++n) {
    for (size_t i = 0; i < f.nodes[n].outputs.size(); ++i) maker[base[n] + i] = static_cast<int>(n);
    for (const auto& v : f.nodes[n].inputs)
      if (int s = slot(v); s >= 0) last_use[s] = static_cast<int>(n);
  }
  for (const auto& r : f.results) {
    plan->results.push_back(slot(r));
    if (int s = slot(r); s >= 0) last_use[s] = end;
  }
  plan->nodes.resize(f.nodes.size());
  for (size_t n = 0; n < f.nodes.size(); ++n) {
    const ir::Node& node = f.nodes[n];
    NodePlan& np = plan->nodes[n];
    np.node = &node;
    np.first_output = base[n];
    np.static_outputs = AllStatic(node.outputs);
    for (const auto& v : node.inputs) np.inputs.push_back(slot(v));
    if (node.kind == ir::NodeKind::Op) np.def = &GetOpDef(node.op);
    for (int k : np.def ? np.def->mutated_inputs : std::vector<int>{}) {
      const bool param = k < static_cast<int>(node.inputs.size()) && node.inputs[k].is_param();
      auto& written = plan->written_params;
      if (param && std::find(written.begin(), written.end(), node.inputs[k].index) == written.end())
        written.push_back(node.inputs[k].index);
    }
  }
  const analysis::AliasClasses alias(f, effects);
  for (size_t n = 0; n < f.nodes.size(); ++n) {
    if (f.nodes[n].kind != ir::NodeKind::Const) continue;
    const ir::ValueRef value{static_cast<int>(n), 0};
    plan->nodes[n].copy_const = alias.Written(value) || alias.Returned(value);
  }
  for (int s = static_cast<int>(f.params.size()); s < slots; ++s) {
    // A value nobody uses dies right after it is made; one used later, after its last user.
    int at = last_use[s] < 0 ? maker[s] : last_use[s];
    if (at < end) plan->nodes[at].release.push_back(s);
  }
  for (size_t n = 0; n < f.nodes.size(); ++n) {
    NodePlan& np = plan->nodes[n];
    if (!analysis::MayWriteOutputOverInput(*np.node)) continue;
    for (size_t i = 0; i < np.inputs.size() && np.reuse_input < 0; ++i) {
      const int s = np.inputs[i];
      if (s < static_cast<int>(f.params.size()) || last_use[s] != static_cast<int>(n)) continue;
      const bool fresh = analysis::MakesFreshOutputs(f.nodes[maker[s]]);  // not a const or view
      const TensorMeta &in = f.meta(np.node->inputs[i]), &out = np.node->outputs[0];
      if (fresh && in.dtype == out.dtype && in.shape == out.shape) np.reuse_input = i;
    }
  }
  return plan;
}

// One call of a planned function: its value table and the nodes run in order.
// A kernel's error (a bad label, a shape known only at run time) names the user's line, as the
// same mistake does in PyNative (where Python's traceback shows it).
Error AtSource(const Error& e, const ir::SourceLoc& loc) {
  if (!loc.known()) return e;
  std::ostringstream out;
  out << e.what() << " (at " << loc.file << ":" << loc.line << ")";
  return Error(e.kind(), out.str());
}

constexpr int kMaxCallDepth = 500;
std::atomic<bool> g_team_runs{true};
thread_local int t_call_depth = 0;

class Interpreter {
 public:
  Interpreter(const Program& program, const FuncPlan& plan, const RunOptions& options)
      : program_(program), plan_(plan), f_(*plan.func), options_(options) {}

  std::vector<Tensor> Run(const std::vector<Tensor>& args) {
    KILN_CHECK(args.size() == f_.params.size(), Type, "@", f_.name, " takes ", f_.params.size(),
               " inputs, got ", args.size());
    for (size_t i = 0; i < args.size(); ++i)
      KILN_CHECK(TypeMatches(f_.params[i], args[i]), Type, "@", f_.name, ": input ", i,
                 " should be ", ir::TypeString(f_.params[i]), ", got ", DTypeName(args[i].dtype()),
                 ShapeStr(args[i].shape()));
    for (int p : plan_.written_params) cpu::ForgetPackedCopies(args[p]);
    values_.assign(plan_.num_slots, Tensor());
    std::copy(args.begin(), args.end(), values_.begin());
    if (options_.node_seconds) options_.node_seconds->resize(plan_.nodes.size(), 0.0);
    if (RunsAsTeam()) {
      RunAsTeam();
    } else {
      UseCrowdedSlice(false);  // after a team: the short slice again (a thread-local read)
      for (size_t n = 0; n < plan_.nodes.size(); ++n) {
        CheckInterrupt();
        Execute(n);
        if (options_.free_dead_values)
          for (int s : plan_.nodes[n].release) values_[s] = Tensor();
      }
    }
    std::vector<Tensor> results;
    results.reserve(plan_.results.size());
    for (int s : plan_.results) results.push_back(s < 0 ? Tensor() : values_[s]);
    return results;
  }

  // Node n: runs it and stores its outputs (timed when the options ask).
  void Execute(size_t n) {
    const NodePlan& np = plan_.nodes[n];
    std::vector<double>* times = options_.node_seconds;
    const auto start =
        times ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    std::vector<Tensor> outputs = RunNode(np);
    if (times)
      (*times)[n] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (size_t i = 0; i < outputs.size(); ++i)
      values_[np.first_output + i] = std::move(outputs[i]);
  }

  void Release(int slot) { values_[slot] = Tensor(); }

 private:
  // A crowded machine: a team of kiln's threads runs the nodes, whichever has a core taking the
  // next ready one (dataflow.h). Otherwise the nodes run in order and each kernel splits its own
  // work over the pool, which costs less where kiln's threads mostly have cores.
  bool RunsAsTeam() const {
    return g_team_runs.load(std::memory_order_relaxed) && plan_.dataflow.eligible &&
           plan_.nodes.size() > 1 && GetNumThreads() > 1 && MachineCrowded();
  }
  void RunAsTeam();

  std::vector<Tensor> Gather(const NodePlan& np, size_t from = 0) const {
    std::vector<Tensor> out;
    out.reserve(np.inputs.size());
    for (size_t i = from; i < np.inputs.size(); ++i)
      out.push_back(np.inputs[i] < 0 ? Tensor() : values_[np.inputs[i]]);
    return out;
  }

  // An op node: its kernel straight away when the output types are known at compile time.
  std::vector<Tensor> RunOp(const NodePlan& np) {
    const OpDef& def = *np.def;
    const ir::Node& node = *np.node;
    std::vector<Tensor> inputs = Gather(np);
    // The graph's autodiff is its own nodes: no eager tape records what the executor runs.
    if (!np.static_outputs || def.allocates_outputs) return EvaluateOp(node.op, inputs, node.attrs);
    PadOptionalInputs(def, inputs);  // as eager dispatch pads them
    std::vector<Tensor> outputs;
    outputs.reserve(node.outputs.size());
    if (np.reuse_input >= 0 && options_.free_dead_values && Unshared(inputs[np.reuse_input]) &&
        LastReader(np.inputs[np.reuse_input])) {
      outputs.push_back(inputs[np.reuse_input]);
    } else {
      for (const auto& m : node.outputs) outputs.push_back(Tensor::Empty(m.shape, m.dtype));
    }
    RunKernel(def, inputs, outputs, node.attrs);
    return outputs;
  }

  // In a team, other readers of a slot may still be running: only the last may take its buffer.
  bool LastReader(int slot) const {
    return team_readers_ == nullptr || team_readers_[slot].load(std::memory_order_acquire) == 1;
  }

  // True when no other view of t's bytes is alive: t may be overwritten in place.
  static bool Unshared(const Tensor& t) {
    return t.defined() && t.storage().use_count() == 1 && t.is_contiguous() && t.offset() == 0;
  }

  std::vector<Tensor> Call(const FuncPlan& callee, const std::vector<Tensor>& args) const {
    // The verifier refuses call cycles, but IR text may still chain thousands of functions,
    // each calling the next: bound the nesting instead of overflowing the C stack.
    KILN_CHECK(t_call_depth < kMaxCallDepth, Recursion, "@", callee.func->name,
               ": calls nested more than ", kMaxCallDepth, " deep");
    ++t_call_depth;
    struct Leave {
      ~Leave() { --t_call_depth; }
    } leave;
    RunOptions inner = options_;
    inner.node_seconds = nullptr;  // only the entry function's nodes are timed
    return Interpreter(program_, callee, inner).Run(args);
  }

  std::vector<Tensor> RunNode(const NodePlan& np) {
    const ir::Node& node = *np.node;
    switch (node.kind) {
      case ir::NodeKind::Op:
        try {
          return RunOp(np);
        } catch (const RaisedError&) {
          throw;
        } catch (const Error& e) {
          throw AtSource(e, node.loc);
        }
      case ir::NodeKind::Const:
        return {np.copy_const ? node.value.Clone() : node.value};
      case ir::NodeKind::Call:
        if (np.chunked) return {RunChunked(*np.chunked, Gather(np))};
        return Call(*np.callees[0], Gather(np));
      case ir::NodeKind::If: {
        bool taken = Truth(values_[np.inputs[0]], node);
        return Call(*np.callees[taken ? 0 : 1], Gather(np, 1));
      }
      case ir::NodeKind::While: {
        std::vector<Tensor> carried = Gather(np);
        while (Truth(Call(*np.callees[0], carried).at(0), node)) {
          CheckInterrupt();  // also a loop whose cond and body have no nodes (a carried flag)
          carried = Call(*np.callees[1], carried);
        }
        return carried;
      }
      case ir::NodeKind::Print: {
        std::string line = FormatWithTensors(node.text, Gather(np));
        std::fwrite(line.data(), 1, line.size(), stdout);
        std::fputc('\n', stdout);
        std::fflush(stdout);
        return {};
      }
      case ir::NodeKind::Raise: {
        std::string type = node.callees.empty() ? "RuntimeError" : node.callees[0];
        throw RaisedError(type, FormatWithTensors(node.text, Gather(np)));
      }
      case ir::NodeKind::Interpret:
        return RunInterpretNode(node, Gather(np));
    }
    return {};
  }

  const Program& program_;
  const FuncPlan& plan_;
  const ir::Func& f_;
  const RunOptions options_;
  std::vector<Tensor> values_;
  // In a team run: the readers of each slot that have not finished (TeamRun's counters).
  const std::atomic<int>* team_readers_ = nullptr;
  friend class TeamRun;
};

// One call run by a team (dataflow.h): members take ready nodes, the lowest index first (the
// sequential order, which keeps the critical path moving and memory near the planned peak),
// release each value after its last reader finishes, and stop at the first error.
class TeamRun final : public TaskSource {
 public:
  TeamRun(Interpreter& in, const DataflowPlan& plan)
      : in_(in),
        plan_(plan),
        owner_(std::this_thread::get_id()),
        pending_(new std::atomic<int>[plan.num_preds.size()]),
        readers_(new std::atomic<int>[plan.readers.size()]) {
    for (size_t n = 0; n < plan.num_preds.size(); ++n) {
      pending_[n].store(plan.num_preds[n], std::memory_order_relaxed);
      if (plan.num_preds[n] == 0) ready_.push(static_cast<int>(n));
    }
    for (size_t s = 0; s < plan.readers.size(); ++s)
      readers_[s].store(plan.readers[s], std::memory_order_relaxed);
    in_.team_readers_ = readers_.get();
  }

  bool RunOne() override {
    int n;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failed_ || ready_.empty()) return false;
      n = ready_.top();
      ready_.pop();
      ++running_;
    }
    std::exception_ptr error;
    try {
      if (std::this_thread::get_id() == owner_) CheckInterrupt();  // Python's, on its thread
      in_.Execute(n);
    } catch (...) {
      error = std::current_exception();
    }
    Finish(n, error);
    return true;
  }

  bool Done() const override { return done_.load(std::memory_order_acquire); }

  // After Done: the error of the earliest failed node, as the sequential run would meet first.
  void RethrowError() const {
    if (error_) std::rethrow_exception(error_);
    KILN_CHECK(completed_ == static_cast<int>(plan_.num_preds.size()), Runtime,
               "executor: a team stopped with nodes left");
  }

 private:
  void Finish(int n, const std::exception_ptr& error) {
    std::vector<int> now_ready;
    if (!error) {
      if (in_.options_.free_dead_values) ReleaseDead(n);
      for (int next : plan_.succs[n])
        if (pending_[next].fetch_sub(1, std::memory_order_acq_rel) == 1) now_ready.push_back(next);
    }
    bool changed = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int next : now_ready) ready_.push(next);
      // This thread takes the next ready node itself: wake the others only for a surplus. Waking
      // them for each node of a chain cost their share of the cores and woke them for nothing
      // (beside three busy processes, slow seconds of the seed step 50% -> 29%, mean 5.5 -> 4.9
      // ms, 48 one-second medians each).
      changed = ready_.size() > 1;
      --running_;
      if (error) {
        if (!error_ || n < error_node_) error_ = error, error_node_ = n;
        failed_ = changed = true;
      } else {
        ++completed_;
      }
      if (completed_ == static_cast<int>(plan_.num_preds.size()) || (failed_ && running_ == 0)) {
        done_.store(true, std::memory_order_release);
        changed = true;
      }
    }
    if (changed) TeamWorkChanged();
  }

  // The values whose last reader n was, and n's outputs that nothing reads.
  void ReleaseDead(int n) {
    for (int s : plan_.reads[n])
      if (plan_.readers[s] > 0 && readers_[s].fetch_sub(1, std::memory_order_acq_rel) == 1)
        in_.Release(s);
    const NodePlan& np = in_.plan_.nodes[n];
    for (size_t i = 0; i < np.node->outputs.size(); ++i)
      if (plan_.readers[np.first_output + i] == 0)
        in_.Release(np.first_output + static_cast<int>(i));
  }

  Interpreter& in_;
  const DataflowPlan& plan_;
  const std::thread::id owner_;
  std::unique_ptr<std::atomic<int>[]> pending_;  // per node: predecessors not finished
  std::unique_ptr<std::atomic<int>[]> readers_;  // per slot: readers not finished
  std::atomic<bool> done_{false};
  std::mutex mutex_;  // guards the rest
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready_;
  int running_ = 0, completed_ = 0;
  bool failed_ = false;
  std::exception_ptr error_;
  int error_node_ = 0;
};

void Interpreter::RunAsTeam() {
  auto team = std::make_shared<TeamRun>(*this, plan_.dataflow);
  struct Detach {  // the counters die with the team; a later sequential run must not read them
    Interpreter& in;
    ~Detach() { in.team_readers_ = nullptr; }
  } detach{*this};
  RunTeam(team, GetNumThreads());
  team->RethrowError();
}

}  // namespace

Program::Program(const ir::Module& module) : module_(module) {
  // Plans index operands and kernels by the schema: a malformed module must never reach them.
  ir::Verify(module);
  const analysis::ModuleEffects effects(module);
  for (const auto& f : module.funcs()) plans_[f->name] = PlanFunc(*f, effects);
  for (auto& [name, plan] : plans_) {
    for (NodePlan& np : plan->nodes) {
      const ir::Node& node = *np.node;
      const bool has_callees = node.kind == ir::NodeKind::If || node.kind == ir::NodeKind::While ||
                               node.kind == ir::NodeKind::Call;
      for (size_t i = 0; has_callees && i < node.callees.size() && i < 2; ++i)
        np.callees[i] = &this->plan(node.callees[i]);
      if (node.kind == ir::NodeKind::Call) np.chunked = PlanChunked(*np.callees[0]->func);
    }
    const FuncPlan& planned = *plan;  // a lambda may not capture a structured binding (C++17)
    plan->dataflow = PlanDataflow(*plan->func, effects,
                                  [&](int n) { return planned.nodes[n].chunked != nullptr; });
  }
}

Program::~Program() = default;

const FuncPlan& Program::plan(const std::string& name) const {
  auto it = plans_.find(name);
  KILN_CHECK(it != plans_.end(), Value, "executor: no function @", name);
  return *it->second;
}

std::vector<Tensor> Program::RunFunc(const std::string& name, const std::vector<Tensor>& args,
                                     const RunOptions& options) const {
  return Interpreter(*this, plan(name), options).Run(args);
}

std::vector<Tensor> Program::Run(const std::vector<Tensor>& args, const RunOptions& options) const {
  return RunFunc(module_.entry().name, args, options);
}

void SetTeamRuns(bool on) { g_team_runs.store(on, std::memory_order_relaxed); }

std::vector<Tensor> RunFunc(const ir::Module& module, const ir::Func& func,
                            const std::vector<Tensor>& args, const RunOptions& options) {
  return Program(module).RunFunc(func.name, args, options);
}

}  // namespace kiln
