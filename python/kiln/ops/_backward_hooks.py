"""Backward hooks (ops.HookBackward, Cell backward hooks, Tensor.register_hook) and Cells'
custom bprop.

The tape (csrc/runtime/tape.cc) sweeps all records in one C++ call, so a Python hook cannot
run inside it. Instead a hook point cuts the recorded graph: its outputs `ys` are fresh leaves
(copies the tape has not seen being made) standing for its inputs `xs`. ``gradient`` then
sweeps the tape once to the sources and every cut, and walks the cuts from the last made to
the first: the gradient reaching a cut's ys goes through its Python `backward` (the hook) and
is swept on from its xs to the sources and the earlier cuts. Each cut costs one more sweep.

A Cell with a `bprop` method is a cut whose ys are fresh leaves standing for its outputs and
whose backward is the bprop: what construct recorded is never swept.

Hooks apply to first-order gradients (grad of grad passes through them unchanged: a cut is
made only while exactly one tape records).

Compiled code (a grad inside ms.jit / GRAPH_MODE) cuts the same way on the graph: a cut's ys
are stop_gradient nodes of its xs, the first reverse sweep (csrc/autodiff) also yields the
gradients of the ys, the hook is compiled into the backward part of the graph, and one more
sweep from its xs follows per cut. Cell backward hooks run there as MindSpore 2.10 runs them
in Graph mode; ops.HookBackward does not (MindSpore eliminates it in Graph mode with a
warning, and so does kiln), nor does Tensor.register_hook.
"""
import threading

from kiln import _C, _graph_state

_thread = threading.local()  # each thread's running grads: tapes are per thread in C++ too


def _records():
    """This thread's records, one per running grad (innermost last)."""
    stack = getattr(_thread, "records", None)
    if stack is None:
        stack = _thread.records = []
    return stack


class Record:
    """The cuts and source hooks made while one grad's function runs."""

    def __init__(self, tape, sources):
        self.tape = tape
        self.sources = list(sources)
        self.nodes = []        # (xs, ys, backward), in the order they were made
        self.leaf_hooks = []   # (source index, hook) for Tensor.register_hook on a source


class GraphRecord:
    """The cuts made while a grad inside compiled code traces its function."""

    def __init__(self, emitter, sources):
        self.emitter = emitter
        self.sources = list(sources)
        self.nodes = []        # (xs, ys, backward), in the order they were made
        self.leaf_hooks = []   # stays empty: Tensor.register_hook does not run in compiled code


def begin_graph(emitter, sources):
    """A record for the grad being compiled (the emitter is this thread's compilation)."""
    records = emitter.__dict__.setdefault("hook_records", [])
    record = GraphRecord(emitter, sources)
    records.append(record)
    return record


def end_graph(record):
    record.emitter.hook_records.remove(record)


def begin(tape, sources):
    record = Record(tape, sources)
    _records().append(record)
    return record


def end(record):
    _records().remove(record)


def current():
    """The record hooks attach to: only while exactly one grad runs (first order); in compiled
    code, while exactly one grad's function is being traced."""
    emitter = _graph_state.emitter()
    if emitter is not None:
        records = emitter.__dict__.get("hook_records", ())
        return records[-1] if len(records) == 1 and emitter.differentiating == 1 else None
    records = _records()
    return records[-1] if len(records) == 1 and _C.tape_active() else None


def cut(xs, backward):
    """Fresh leaves standing for the tensors xs; `backward(grads of ys) -> grads of xs` runs
    when the gradient is taken. Without a recording grad, xs come back unchanged."""
    record = current()
    if record is None:
        return list(xs)
    if isinstance(record, GraphRecord):
        from kiln.ops._core import call  # noqa: PLC0415

        ys = [call("stop_gradient", (x,)) for x in xs]
        record.nodes.append((list(xs), ys, backward))
        return ys
    ys = []
    for x in xs:
        y = x._clone()  # a Tensor copied outside the registry: the tape does not link y to x
        record.tape.watch(y)
        ys.append(y)
    record.nodes.append((list(xs), ys, backward))
    return ys


def replace_outputs(xs, outs, backward):
    """Fresh leaves standing for the tensors `outs` of a computation from the tensors `xs` whose
    gradient is user code (a Cell's bprop): `backward(grads of the leaves) -> grads of xs`. What
    the computation recorded between xs and outs is never swept: the gradient goes around it.
    Without a recording grad, outs come back unchanged."""
    record = current()
    if record is None:
        return list(outs)
    if isinstance(record, GraphRecord):
        from kiln.ops._core import call  # noqa: PLC0415

        ys = [call("stop_gradient", (out,)) for out in outs]
    else:
        ys = []
        for out in outs:
            y = out._clone()
            record.tape.watch(y)
            ys.append(y)
    record.nodes.append((list(xs), ys, backward))
    return ys


def hook_source(tensor, hook):
    """Tensor.register_hook on a grad source (an argument or a weight): its final gradient
    goes through hook. Returns False when tensor is not a source of the running grad."""
    record = current()
    if record is None or isinstance(record, GraphRecord):
        return False
    for i, s in enumerate(record.sources):
        if s is tensor:
            record.leaf_hooks.append((i, hook))
            return True
    return False


def hook_tensor(tensor, backward):
    """Tensor.register_hook on a tensor the running grad computed: its values are written
    back into it from a fresh leaf (an in-place assign, which the tape follows: later uses of
    `tensor` lead to the leaf), so the gradient of those uses reaches the leaf, goes through
    `backward`, and is swept on from a copy that stands for the tensor as it was produced."""
    from kiln.ops._core import call  # noqa: PLC0415

    record = current()
    if record is None or isinstance(record, GraphRecord):
        return False
    link = call("mul", (tensor, 1))  # a copy (a view would be rebased onto the write below)
    leaf = tensor._clone()
    record.tape.watch(leaf)
    call("assign", (tensor, leaf))
    record.nodes.append(([link], [leaf], backward))
    return True


def gradient(record, targets, sens, sources):
    """tape.gradient(targets, sens, sources) with the record's cuts and hooks applied."""
    tape, nodes = record.tape, record.nodes
    n = len(sources)
    ys = [y for _, node_ys, _ in nodes for y in node_ys]
    first = list(tape.gradient(targets, sens, list(sources) + ys))
    grads, gy = first[:n], first[n:]
    for k in range(len(nodes) - 1, -1, -1):
        xs, node_ys, backward = nodes[k]
        start = sum(len(m[1]) for m in nodes[:k])
        gx = backward(gy[start:start + len(node_ys)])
        earlier = ys[:start]
        swept = tape.gradient(xs, list(gx), list(sources) + earlier)
        grads = [a + b for a, b in zip(grads, swept[:n])]
        gy[:start] = [a + b for a, b in zip(gy[:start], swept[n:])]
    for i, hook in record.leaf_hooks:
        out = hook(grads[i])
        if out is not None:
            grads[i] = out
    return grads


def graph_gradient(record, mark, targets, sens, sources):
    """emitter.gradient(mark, targets, sens, sources) with the record's cuts applied: the
    same sweeps as `gradient`, built into the graph being compiled."""
    emitter, nodes = record.emitter, record.nodes
    n = len(sources)
    ys = [y for _, node_ys, _ in nodes for y in node_ys]
    first = emitter.gradient(mark, targets, sens, list(sources) + ys)
    grads, gy = first[:n], first[n:]
    for k in range(len(nodes) - 1, -1, -1):
        xs, node_ys, backward = nodes[k]
        start = sum(len(m[1]) for m in nodes[:k])
        gx = [emitter.to_graph(g, "backward hook")
              for g in backward(gy[start:start + len(node_ys)])]
        swept = emitter.gradient(mark, list(xs), gx, list(sources) + ys[:start])
        grads = [a + b for a, b in zip(grads, swept[:n])]
        gy[:start] = [a + b for a, b in zip(gy[:start], swept[n:])]
    return grads


def as_grads(result, grads, what):
    """A hook's return: None keeps `grads`; else a tensor or a tuple of as many tensors."""
    if result is None:
        return list(grads)
    result = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(result) != len(grads):
        raise ValueError(f"{what}: the hook returned {len(result)} gradients for "
                         f"{len(grads)} tensors")
    return [g if r is None else r for g, r in zip(grads, result)]
