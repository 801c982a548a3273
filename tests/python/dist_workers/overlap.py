"""Run by test_distributed.py under mpirun -n 2 with small gradient buckets
(KILN_GRAD_BUCKET_MB): LeNet-5 trained data-parallel with the buckets' all-reduces overlapped
with the backward pass and without (KILN_GRAD_OVERLAP), in PyNative and Graph mode; after
every step the parameters must be identical. Also checks that the overlap happened: in
PyNative buckets were started during the sweep, and in Graph mode the compiled step starts a
bucket before the backward pass ends."""
import os
import pathlib
import sys
import tempfile

import numpy as np

import kiln as ms
from kiln import nn
from kiln.communication import get_group_size, get_rank, init

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from dp_train import LeNet5, loss_fn  # noqa: E402

BATCH, STEPS = 8, 3
# Ops that only prepare, send or receive a bucket (not backward work).
_BUCKET_OPS = ("reshape(", "concat(", "all_reduce_start(", "all_reduce_wait(")


def backward_work_after_first_start(ir_text):
    """Nodes of the compiled step between its first all_reduce_start and its first
    all_reduce_wait that are not bucket plumbing: the backward work the first bucket
    overlaps."""
    lines = [ln.strip() for ln in ir_text.splitlines() if " = " in ln]
    entry = lines[:next((i for i, ln in enumerate(lines) if ln.startswith("return")),
                        len(lines))]
    first = next(i for i, ln in enumerate(entry) if "all_reduce_start(" in ln)
    wait = next(i for i, ln in enumerate(entry) if "all_reduce_wait(" in ln)
    return [ln for ln in entry[first + 1:wait] if not any(op in ln for op in _BUCKET_OPS)]


def train(mode, overlap, graphs_dir):
    os.environ["KILN_GRAD_OVERLAP"] = "1" if overlap else "0"
    rank, size = get_rank(), get_group_size()
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    if graphs_dir is not None:
        ms.set_context(save_graphs=True, save_graphs_path=graphs_dir)
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL,
                                 gradients_mean=True)
    ms.set_seed(1)
    net = LeNet5()
    step = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn()),
                               nn.Momentum(net.trainable_params(), 0.05, 0.9))
    assert step.grad_reducer.overlap == overlap
    assert len(step.grad_reducer._buckets) > 2, step.grad_reducer._buckets
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH * STEPS, 1, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, BATCH * STEPS).astype(np.int32)
    history = []
    for s in range(STEPS):
        rows = np.arange(s * BATCH + rank, (s + 1) * BATCH, size)
        step(ms.Tensor(x[rows]), ms.Tensor(y[rows]))
        history.append([p.asnumpy().copy() for p in net.trainable_params()])
        if mode == "pynative" and overlap:
            early = step.grad_reducer._eager.started_early
            # every bucket but the one holding the first layer fills before the sweep ends
            assert early >= len(step.grad_reducer._buckets) - 1, early
    ms.set_context(save_graphs=False)
    ms.reset_auto_parallel_context()
    return history


init()
assert get_group_size() == 2, get_group_size()
os.environ["KILN_GRAD_BUCKET_MB"] = "0.004"  # ~4 KB: LeNet's 10 gradients in several buckets
for mode in ("pynative", "graph"):
    with tempfile.TemporaryDirectory() as graphs:
        on = train(mode, True, graphs if mode == "graph" else None)
        if mode == "graph":
            texts = [p.read_text() for p in pathlib.Path(graphs).glob("*optimized.ir")]
            step_ir = next(t for t in texts if "all_reduce_start(" in t)
            work = backward_work_after_first_start(step_ir)
            assert len(work) >= 3, step_ir
    off = train(mode, False, None)
    for s, (a, b) in enumerate(zip(on, off)):
        for pa, pb in zip(a, b):
            np.testing.assert_array_equal(pa, pb, err_msg=f"rank {get_rank()} {mode} step {s}")
    print(f"OVERLAP-OK rank {get_rank()} {mode}", flush=True)
