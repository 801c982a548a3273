"""Before/after check of per-call overhead: eager 1-element add, the seed network's forward
(Graph mode) at batch 64 and 1, and its training step (Graph mode).

Each figure is the median per-call time over at least 1 s; the worst of 3 figures is reported.
Usage: PYTHONPATH=build/<dir>/python python benchmarks/bench_overhead_check.py [--threads N]
Run it on two builds (e.g. a worktree of the previous commit) to see what a change costs.
"""
import argparse
import statistics
import time

import numpy as np

import kiln as ms
from kiln import nn, ops

LAYERS = [(784, 512), (512, 512), (512, 10)]


def median_worst_of(fn, figures=3, seconds=1.0):
    for _ in range(10):
        fn()
    worst = 0.0
    for _ in range(figures):
        times, end = [], time.perf_counter() + seconds
        while time.perf_counter() < end:
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        worst = max(worst, statistics.median(times))
    return worst * 1e6


def seed_forward(rng):
    weights = [(ms.Tensor(rng.standard_normal((o, i)).astype(np.float32) * 0.03),
                ms.Tensor(np.zeros(o, np.float32))) for i, o in LAYERS]

    @ms.jit
    def forward(x):
        x = ops.flatten(x)
        for i, (w, b) in enumerate(weights):
            x = ops.dense(x, w, b)
            if i < 2:
                x = ops.relu(x)
        return x

    return forward


def seed_train_step():
    net = nn.SequentialCell(nn.Flatten(), nn.Dense(784, 512), nn.ReLU(), nn.Dense(512, 512),
                            nn.ReLU(), nn.Dense(512, 10))
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    optimizer = nn.Momentum(net.trainable_params(), 0.01, 0.9)
    return nn.TrainOneStepCell(nn.WithLossCell(net, loss), optimizer)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    ms.set_num_threads(parser.parse_args().threads)
    rng = np.random.default_rng(0)
    forward, step = seed_forward(rng), seed_train_step()
    ms.set_context(mode=ms.GRAPH_MODE)
    a = ms.Tensor(np.ones(1, np.float32))
    x64 = ms.Tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    x1 = ms.Tensor(rng.standard_normal((1, 1, 28, 28)).astype(np.float32))
    y64 = ms.Tensor(rng.integers(0, 10, 64).astype(np.int32))
    figures = {
        "a + b (1 element)": median_worst_of(lambda: a + a),
        "ops.add (1 element)": median_worst_of(lambda: ops.add(a, a)),
        "seed forward, batch 64": median_worst_of(lambda: forward(x64)),
        "seed forward, batch 1": median_worst_of(lambda: forward(x1)),
        "seed training step, batch 64": median_worst_of(lambda: step(x64, y64)),
    }
    for name, us in figures.items():
        print(f"{name:30s} {us:10.2f} us")


if __name__ == "__main__":
    main()
