"""jit_level O2 against O1 in one process: what O2's extra passes (fuse_attention) buy.

Each workload is compiled at both levels from the same function and weights, checked to agree,
then timed in interleaved rounds (O1, O2, O1, O2, ...: a busy machine slows both alike), each
figure the best of `--number` calls. Reported per workload: the best time of each level, the
median of the per-round ratios O2/O1 (below 1: O2 is faster), and the load average. With
--cpu-time the figures are the calling thread's CPU time (time.thread_time) instead of wall
time: on a shared machine it leaves out the time the thread waited for a core, which is only
meaningful at --threads 1 (other threads' work is not counted).

Workloads: the encoder block of bench_transformer.py (forward) at sequence 128 / batch 8 and at
sequence 512 / batch 2 (the same number of tokens, 4x the scores per head), and the attention
alone (heads split from (batch, seq, 256) activations, softmax(q k^T / 8) v) at both sizes.

Run: PYTHONPATH=build/dev/python python benchmarks/bench_jit_levels.py --threads 2
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_transformer  # noqa: E402
import kiln as ms  # noqa: E402
from kiln import Tensor, nn, ops  # noqa: E402

HEADS, HEAD_DIM = 4, 64


def attention(a, b, c):
    batch, seq, d = a.shape
    split = (batch, seq, HEADS, HEAD_DIM)
    q = ops.transpose(ops.reshape(a, split), (0, 2, 1, 3))
    k = ops.transpose(ops.reshape(b, split), (0, 2, 3, 1))
    v = ops.transpose(ops.reshape(c, split), (0, 2, 1, 3))
    return ops.matmul(ops.softmax(ops.matmul(q, k) * 0.125, -1), v)


def workloads():
    rng = np.random.default_rng(0)
    ms.set_seed(0)
    block = bench_transformer.block_class(nn, ops)()
    for batch, seq in ((8, 128), (2, 512)):
        acts = [Tensor(rng.standard_normal((batch, seq, 256)).astype(np.float32))
                for _ in range(3)]
        yield f"encoder forward, seq {seq}, batch {batch}", (lambda x: block(x)), acts[:1]
        yield f"attention alone, seq {seq}, batch {batch}", attention, acts


def timed(fn, args, number, clock):
    best = float("inf")
    for _ in range(number):
        start = clock()
        fn(*args)
        best = min(best, clock() - start)
    return best


def compare(name, fn, args, rounds, number, clock):
    compiled = {level: ms.jit(fn, jit_level=level) for level in ("O1", "O2")}
    outs = {level: f(*args).asnumpy() for level, f in compiled.items()}
    np.testing.assert_allclose(outs["O2"], outs["O1"], rtol=1e-4, atol=1e-4)
    fused = "fused_attention(" in compiled["O2"].graph_text()
    times = {"O1": [], "O2": []}
    for _ in range(rounds):
        for level in ("O1", "O2"):
            times[level].append(timed(compiled[level], args, number, clock))
    ratios = [b / a for a, b in zip(times["O1"], times["O2"])]
    return (f"| {name} | {min(times['O1']) * 1e3:.3f} | {min(times['O2']) * 1e3:.3f} | "
            f"{statistics.median(ratios):.3f} | {min(ratios):.3f}-{max(ratios):.3f} | "
            f"{'yes' if fused else 'no'} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--number", type=int, default=20)
    parser.add_argument("--cpu-time", action="store_true")
    args = parser.parse_args()
    ms.set_num_threads(args.threads)
    clock = time.thread_time if args.cpu_time else time.perf_counter
    print(f"{args.threads} thread(s), {'thread CPU' if args.cpu_time else 'wall'} time, "
          f"{args.rounds} interleaved rounds of best-of-{args.number}")
    print("| workload | O1 (ms) | O2 (ms) | O2/O1 (median of rounds) | range | fused at O2 |")
    print("|---|---|---|---|---|---|")
    for name, fn, inputs in workloads():
        print(compare(name, fn, inputs, args.rounds, args.number, clock), flush=True)
    print("load average (1/5/15 min): " + " / ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
