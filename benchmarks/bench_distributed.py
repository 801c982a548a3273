"""Data-parallel step time: LeNet-5 (1×32×32 inputs, MindSpore's tutorial network) trained in
Graph mode (or PyNative: argument "pynative") with a fixed global batch, on however many ranks
mpirun starts; rank 0 prints the median step time, the share spent in the gradient all-reduce,
whether the buckets overlap the backward pass, and the machine's load average.

    mpirun -n 1 python benchmarks/bench_distributed.py        # one process, the whole batch
    mpirun -n 2 python benchmarks/bench_distributed.py        # two ranks, half a batch each
    KILN_GRAD_OVERLAP=0 mpirun -n 2 ...                        # buckets sent after backward
    KILN_GRAD_BUCKET_MB=0.05 mpirun -n 2 ...                   # several buckets (LeNet: 0.25 MB)
(as root add --allow-run-as-root; with more ranks than cores add --oversubscribe).
docs/distributed.md records the numbers and the cost model for more machines.
"""
import os
import sys
import time

import numpy as np

import kiln as ms
from kiln import nn, ops
from kiln.communication import get_group_size, get_rank, init

GLOBAL_BATCH, STEPS, WARMUP = 64, 30, 5


class LeNet5(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, pad_mode="valid")
        self.conv2 = nn.Conv2d(6, 16, 5, pad_mode="valid")
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(16 * 5 * 5, 120)
        self.fc2 = nn.Dense(120, 84)
        self.fc3 = nn.Dense(84, 10)

    def construct(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        x = self.flatten(x)
        return self.fc3(self.relu(self.fc2(self.relu(self.fc1(x)))))


def allreduce_time(params, repeats=20):
    """Seconds the gradient reducer takes for one set of gradients (eager): what data
    parallelism adds to a step. Also the time of one all-reduce per gradient, unbucketed."""
    reducer = nn.DistributedGradReducer(params, mean=True)
    reduce = ops.AllReduce()
    grads = tuple(ms.Tensor(np.ones(p.shape, np.float32)) for p in params)
    bucketed, single = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        reducer(grads)
        bucketed.append(time.perf_counter() - start)
        start = time.perf_counter()
        for g in grads:
            reduce(g)
        single.append(time.perf_counter() - start)
    return float(np.median(bucketed)), float(np.median(single))


def main():
    init()
    rank, size = get_rank(), get_group_size()
    pynative = sys.argv[1:] == ["pynative"]
    ms.set_context(mode=ms.PYNATIVE_MODE if pynative else ms.GRAPH_MODE)
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL,
                                 gradients_mean=True)
    ms.set_seed(0)
    net = LeNet5()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    step = nn.TrainOneStepCell(nn.WithLossCell(net, loss),
                               nn.Momentum(net.trainable_params(), 0.01, 0.9))
    local = GLOBAL_BATCH // size
    rng = np.random.default_rng(rank)
    x = ms.Tensor(rng.standard_normal((local, 1, 32, 32)).astype(np.float32))
    y = ms.Tensor(rng.integers(0, 10, local).astype(np.int32))
    times = []
    for i in range(WARMUP + STEPS):
        start = time.perf_counter()
        step(x, y)
        if i >= WARMUP:
            times.append(time.perf_counter() - start)
    comm, unbucketed = allreduce_time(net.trainable_params()) if size > 1 else (0.0, 0.0)
    if rank == 0:
        n_params = sum(int(np.prod(p.shape)) for p in net.trainable_params())
        print(f"mode={'pynative' if pynative else 'graph'} overlap={step.grad_reducer.overlap} "
              f"buckets={len(step.grad_reducer._buckets)} "
              f"ranks={size} global_batch={GLOBAL_BATCH} params={n_params} "
              f"threads/rank={ms._C.get_num_threads()} "
              f"step_ms_median={1000 * float(np.median(times)):.2f} "
              f"reducer_ms={1000 * comm:.2f} per_gradient_allreduce_ms={1000 * unbucketed:.2f} "
              f"loadavg={os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
