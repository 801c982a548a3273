"""Run by test_distributed.py under mpirun -n 2: each rank trains on its half of every batch in
ParallelMode.DATA_PARALLEL, and after every step its parameters must equal, to float
tolerance, those of a one-process reference trained on the full batches in this process.

Runs every (network, mode, path): network seed (SPEC's 784-512-512-10 MLP) | lenet (LeNet-5 on
1x32x32); mode pynative | graph; path cell (TrainOneStepCell steps) | model (Model.train over a
sharded dataset)."""
import numpy as np

import kiln as ms
from kiln import nn
from kiln.communication import get_group_size, get_rank, init

BATCH, ROWS, STEPS = 8, 32, 4


class LeNet5(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, pad_mode="valid")
        self.conv2 = nn.Conv2d(6, 16, 5, pad_mode="valid")
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(400, 120)
        self.fc2 = nn.Dense(120, 84)
        self.fc3 = nn.Dense(84, 10)

    def construct(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.flatten(self.pool(self.relu(self.conv2(x))))
        return self.fc3(self.relu(self.fc2(self.relu(self.fc1(x)))))


def seed_network():
    return nn.SequentialCell(nn.Dense(784, 512), nn.ReLU(), nn.Dense(512, 512), nn.ReLU(),
                             nn.Dense(512, 10))


NETWORKS = {"seed": (seed_network, (784,)), "lenet": (LeNet5, (1, 32, 32))}


def params(net):
    return [p.asnumpy().copy() for p in net.trainable_params()]


def build(network, seed):
    ms.set_seed(seed)
    net = NETWORKS[network][0]()
    return net, nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)


def loss_fn():
    return nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")


def check(what, got_params, ref_params):
    for got, want in zip(got_params, ref_params):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                   err_msg=f"rank {get_rank()} {what}")


def run(network, mode, path):
    rank, size = get_rank(), get_group_size()
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS,) + NETWORKS[network][1]).astype(np.float32)
    y = rng.integers(0, 10, ROWS).astype(np.int32)

    # The one-process reference: full batches, no communication.
    ms.reset_auto_parallel_context()
    ref, ref_opt = build(network, 1)
    ref_step = nn.TrainOneStepCell(nn.WithLossCell(ref, loss_fn()), ref_opt)
    ref_history = []
    for s in range(STEPS):
        rows = slice(s * BATCH, (s + 1) * BATCH)
        ref_step(ms.Tensor(x[rows]), ms.Tensor(y[rows]))
        ref_history.append(params(ref))

    # Data parallel: rank r starts from another seed (rank 0's parameters are broadcast) and
    # sees rows r, r + 2, ... of each batch (DistributedSampler's round robin).
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL,
                                 gradients_mean=True)
    dp, dp_opt = build(network, 1 if rank == 0 else 100)
    what = f"{network} {mode} {path}"
    if path == "cell":
        dp_step = nn.TrainOneStepCell(nn.WithLossCell(dp, loss_fn()), dp_opt)
        for s in range(STEPS):
            rows = np.arange(s * BATCH + rank, (s + 1) * BATCH, size)
            dp_step(ms.Tensor(x[rows]), ms.Tensor(y[rows]))
            check(f"{what} step {s}", params(dp), ref_history[s])
    else:
        data = ms.dataset.NumpySlicesDataset({"x": x[:STEPS * BATCH], "y": y[:STEPS * BATCH]},
                                             shuffle=False, num_shards=size, shard_id=rank)
        data = data.batch(BATCH // size)
        history = []

        class Record(ms.train.Callback):
            def on_train_step_end(self, run_context):
                history.append(params(dp))

        model = ms.train.Model(dp, loss_fn(), dp_opt)
        model.train(1, data, callbacks=[Record()], dataset_sink_mode=False)
        assert len(history) == STEPS, len(history)
        for s in range(STEPS):
            check(f"{what} step {s}", history[s], ref_history[s])
    print(f"DP-OK rank {rank} {what}", flush=True)


if __name__ == "__main__":  # overlap.py imports the networks
    init()
    assert get_group_size() == 2, get_group_size()
    for network in NETWORKS:
        for mode in ("pynative", "graph"):
            for path in ("cell", "model"):
                run(network, mode, path)
