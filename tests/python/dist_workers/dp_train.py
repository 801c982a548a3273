"""Run by test_distributed.py under mpirun -n 2: each rank trains on its half of every batch in
ParallelMode.DATA_PARALLEL, and after every step its parameters must equal, to float
tolerance, those of a one-process reference trained on the full batches in this process.

Runs every (mode, path): mode pynative | graph; path cell (TrainOneStepCell steps) | model
(Model.train over a sharded dataset)."""
import numpy as np

import kiln as ms
from kiln import nn
from kiln.communication import get_group_size, get_rank, init

BATCH, ROWS, STEPS = 8, 32, 4


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(6, 16)
        self.relu = nn.ReLU()
        self.fc2 = nn.Dense(16, 3)

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def params(net):
    return [p.asnumpy().copy() for p in net.trainable_params()]


def build(seed):
    ms.set_seed(seed)
    net = Net()
    return net, nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)


def check(step, dp_net, ref_params):
    for got, want, p in zip(params(dp_net), ref_params, dp_net.trainable_params()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6,
                                   err_msg=f"rank {get_rank()} step {step} parameter {p.name}")


def run(mode, path):
    rank, size = get_rank(), get_group_size()
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, 6)).astype(np.float32)
    y = rng.standard_normal((ROWS, 3)).astype(np.float32)

    # The one-process reference: full batches, no communication.
    ms.reset_auto_parallel_context()
    ref, ref_opt = build(1)
    ref_step = nn.TrainOneStepCell(nn.WithLossCell(ref, nn.MSELoss()), ref_opt)
    ref_history = []
    for s in range(STEPS):
        rows = slice(s * BATCH, (s + 1) * BATCH)
        ref_step(ms.Tensor(x[rows]), ms.Tensor(y[rows]))
        ref_history.append(params(ref))

    # Data parallel: rank r starts from another seed (rank 0's parameters are broadcast) and
    # sees rows r, r + 2, ... of each batch (DistributedSampler's round robin).
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL,
                                 gradients_mean=True)
    dp, dp_opt = build(1 if rank == 0 else 100)
    if path == "cell":
        dp_step = nn.TrainOneStepCell(nn.WithLossCell(dp, nn.MSELoss()), dp_opt)
        for s in range(STEPS):
            rows = np.arange(s * BATCH + rank, (s + 1) * BATCH, size)
            dp_step(ms.Tensor(x[rows]), ms.Tensor(y[rows]))
            check(s, dp, ref_history[s])
    else:
        data = ms.dataset.NumpySlicesDataset({"x": x[:STEPS * BATCH], "y": y[:STEPS * BATCH]},
                                             shuffle=False, num_shards=size, shard_id=rank)
        data = data.batch(BATCH // size)
        history = []

        class Record(ms.train.Callback):
            def on_train_step_end(self, run_context):
                history.append(params(dp))

        model = ms.train.Model(dp, nn.MSELoss(), dp_opt)
        model.train(1, data, callbacks=[Record()], dataset_sink_mode=False)
        assert len(history) == STEPS, len(history)
        for s in range(STEPS):
            for got, want in zip(history[s], ref_history[s]):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6,
                                           err_msg=f"rank {rank} Model.train step {s}")
    print(f"DP-OK rank {rank} {mode} {path}", flush=True)


init()
assert get_group_size() == 2, get_group_size()
for mode in ("pynative", "graph"):
    for path in ("cell", "model"):
        run(mode, path)
