"""Run by test_distributed.py under mpirun -n 2: mint.nn.SyncBatchNorm on each rank's half of
a batch gives that half of BatchNorm2d's output on the whole batch, the same running
statistics, and the same weight gradient (summed over the ranks), eagerly and compiled."""
import numpy as np

import kiln as ms
from kiln.communication import comm_func, get_group_size, get_rank, init, release
from kiln.mint import nn

init()
R, N = get_rank(), get_group_size()
assert N == 2, N
FULL = np.random.default_rng(3).standard_normal((4, 3, 2, 2)).astype(np.float32)
HALF = FULL[2 * R:2 * R + 2]
W = np.array([0.5, 1.5, -1.0], np.float32)


def close(got, want, what):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"rank {R}: {what}")


def loss_of(cell):
    return lambda x: (cell(x) * ms.Tensor(np.arange(12, dtype=np.float32).reshape(1, 3, 2, 2))
                      ).sum()


def check(compiled):
    sync, ref = nn.SyncBatchNorm(3, momentum=0.2), nn.BatchNorm2d(3, momentum=0.2)
    assert sync.world_size == 2
    for cell in (sync, ref):
        cell.set_train(True)
        cell.weight.set_data(ms.Tensor(W))
    run = ms.jit(lambda x: sync(x)) if compiled else sync
    out = run(ms.Tensor(HALF)).asnumpy()
    want = ref(ms.Tensor(FULL)).asnumpy()
    close(out, want[2 * R:2 * R + 2], "output")
    close(sync.running_mean.asnumpy(), ref.running_mean.asnumpy(), "running_mean")
    close(sync.running_var.asnumpy(), ref.running_var.asnumpy(), "running_var")
    grad = ms.grad(loss_of(sync), None, (sync.weight,))
    grad = ms.jit(grad) if compiled else grad
    local = grad(ms.Tensor(HALF))[0]
    total, _ = comm_func.all_reduce(local)
    full = ms.grad(loss_of(ref), None, (ref.weight,))(ms.Tensor(FULL))[0]
    close(total.asnumpy(), full.asnumpy(), "weight gradient")


for compiled in (False, True):
    check(compiled)
print("SYNC-BN-OK", flush=True)
release()
