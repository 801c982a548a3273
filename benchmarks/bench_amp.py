"""Mixed precision (issue #14): the training step of the seed network and of the encoder block in
kiln bfloat16 (kiln.amp level O2, float32 master weights) against kiln float32 and PyTorch's CPU
autocast (bfloat16), in one process on the same inputs and starting weights.

kiln's steps are value_and_grad + Momentum compiled as a whole (ms.jit); with --pynative the
eager steps are timed too. PyTorch runs eager: the forward and the loss inside
torch.autocast("cpu", dtype=torch.bfloat16), backward and SGD-with-momentum outside, as its
documentation shows. The first three losses of each bf16 run are checked against kiln float32
(bf16 tolerance) before anything is timed. The bf16 speed-up needs a CPU with bf16 instructions
(AVX512-BF16 or AMX: see the `cpu` line); without them kiln computes bf16 products in float32.

Run: PYTHONPATH=build/rel/python /work/peers-venv/bin/python benchmarks/bench_amp.py
     [--threads 1] [--number 10] [--pynative]
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
import kiln as ms  # noqa: E402
from _common import check_close, import_torch, kiln_momentum_step, pin_to_cpus, table  # noqa: E402
from _timing import best_time  # noqa: E402
from bench_seed_network import torch_mlp  # noqa: E402
from bench_transformer import (  # noqa: E402
    BATCH,
    SEQ,
    D,
    block_class,
    kiln_weights,
    load_kiln,
    torch_block,
)
from five_ways import Network  # noqa: E402 - the seed network (SPEC §4)
from kiln import Tensor, amp, nn, ops  # noqa: E402
from kiln.jit import cell_interface  # noqa: E402

SEED_BATCH = 64


def cpu_flags():
    """The CPU's bf16-relevant instruction sets, as /proc/cpuinfo lists them."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next(line for line in f if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown"
    have = [f for f in ("avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f in flags]
    return " ".join(have) or "no AVX-512"


def seed_workload(torch):
    """(name, make kiln net, loss, make torch model or None, x, y) for the seed network."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((SEED_BATCH, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, SEED_BATCH).astype(np.int32)

    def make():
        ms.set_seed(0)
        return Network()

    def make_torch():
        model = torch_mlp(torch)
        net = make()
        dense = [c for c in net.dense_relu_sequential.cells() if isinstance(c, nn.Dense)]
        linears = [m for m in model if isinstance(m, torch.nn.Linear)]
        with torch.no_grad():
            for d, lin in zip(dense, linears, strict=True):
                lin.weight.copy_(torch.from_numpy(d.weight.asnumpy()))
                lin.bias.copy_(torch.from_numpy(d.bias.asnumpy()))
        return model

    torch_loss = torch.nn.CrossEntropyLoss() if torch else None
    return ("seed network (batch 64)", make, nn.CrossEntropyLoss(),
            make_torch if torch else None, torch_loss, (x, y.astype(np.int64)), (x, y))


def encoder_workload(torch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SEQ, D)).astype(np.float32)
    t = rng.standard_normal((BATCH, SEQ, D)).astype(np.float32)
    Block = block_class(nn, ops)
    ms.set_seed(0)
    weights = kiln_weights(Block())

    def make():
        return load_kiln(Block(), weights, Tensor)

    torch_loss = torch.nn.MSELoss() if torch else None
    return (f"encoder block ({BATCH}x{SEQ}x{D})", make, nn.MSELoss(),
            (lambda: torch_block(torch, weights)) if torch else None, torch_loss, (x, t),
            (x, t))


def kiln_step(make, loss_fn, bf16, graph, fused=True):
    """fused=False: the bf16 step as before the fused updates (weights cast each step, the
    update composed of ops over float32 gradients), to compare in one process."""
    net = make()
    if bf16:
        net = amp.auto_mixed_precision(net, "O2", dtype=ms.bfloat16)
    step = kiln_momentum_step(ms, net, loss_fn)
    if not fused:
        step.optimizer._fused_updates = False
    step = ms.jit(step) if graph else step
    if fused:
        return step

    def unfused(*args):  # the flag is read while tracing, i.e. at the first (compiling) call
        cell_interface.CACHED_WEIGHT_CASTS = False
        try:
            return step(*args)
        finally:
            cell_interface.CACHED_WEIGHT_CASTS = True

    return unfused


def torch_step(torch, model, loss_fn, autocast):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = model(x)
            loss = loss_fn(out.float(), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def measure(workload, torch, number, pynative, rounds):
    name, make, loss_fn, make_torch, torch_loss, torch_inputs, kiln_inputs = workload
    xs = tuple(Tensor(a) for a in kiln_inputs)
    runs = {"kiln fp32 (Graph)": kiln_step(make, loss_fn, False, True),
            "kiln bf16 (Graph)": kiln_step(make, loss_fn, True, True),
            "kiln bf16 unfused (Graph)": kiln_step(make, loss_fn, True, True, fused=False)}
    if pynative:
        runs["kiln fp32 (PyNative)"] = kiln_step(make, loss_fn, False, False)
        runs["kiln bf16 (PyNative)"] = kiln_step(make, loss_fn, True, False)
    losses = {k: [float(step(*xs).asnumpy()) for _ in range(3)] for k, step in runs.items()}
    if torch is not None:
        ts = tuple(torch.from_numpy(a.copy()) for a in torch_inputs)
        for key, autocast in (("torch fp32", False), ("torch autocast bf16", True)):
            step = torch_step(torch, make_torch(), torch_loss, autocast)
            losses[key] = [float(step(*ts)) for _ in range(3)]
            runs[key] = (lambda s=step: s(*ts))
    want = losses["kiln fp32 (Graph)"]
    for key, got in losses.items():
        tol = 2e-2 if "bf16" in key else 1e-3
        check_close(f"{name}: first losses, {key} vs kiln fp32", np.array(got), np.array(want),
                    tol, tol)
    # Interleaved: one run of `number` steps of each in turn, `rounds` times, the best of each
    # kept, so a busy spell on the shared machine does not land on one of them only.
    fns = {key: step if key.startswith("torch") else (lambda s=step: s(*xs).asnumpy())
           for key, step in runs.items()}
    times = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for key, fn in fns.items():
            times[key] = min(times[key], best_time(fn, number, repeat=1, warmup=1))
    return name, times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--number", type=int, default=10, help="steps per timed run")
    parser.add_argument("--pynative", action="store_true", help="time the eager steps too")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (best kept)")
    args = parser.parse_args()
    note = pin_to_cpus(args.threads)
    ms.set_num_threads(args.threads)
    torch = import_torch(args.threads)
    print(f"cpu: {cpu_flags()}; threads: {args.threads}; load average: {os.getloadavg()}")
    if note:
        print(note.split(" (")[0])  # one thread for every framework
    rows = []
    for workload in (seed_workload(torch), encoder_workload(torch)):
        name, times = measure(workload, torch, args.number, args.pynative, args.rounds)
        fp32, bf16 = times["kiln fp32 (Graph)"], times["kiln bf16 (Graph)"]
        for key, seconds in times.items():
            rows.append([name, key, f"{seconds * 1e3:.2f}", f"{fp32 / seconds:.2f}x"])
        verdict = (f"{name}: kiln bf16 is {fp32 / bf16:.2f}x kiln fp32 "
                   f"({fp32 / times['kiln bf16 unfused (Graph)']:.2f}x unfused)")
        if "torch autocast bf16" in times:
            verdict += f", {times['torch autocast bf16'] / bf16:.2f}x torch autocast"
        print(verdict)
    print(table(["workload", "step", "ms", "speed vs kiln fp32"], rows))
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
