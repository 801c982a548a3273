"""Run by test_distributed.py under mpirun -n 2: the collectives' values and gradients on two
ranks against NumPy, eager and compiled (ms.jit), primitives and comm_func; a group of one.
Rank r holds x_r = base + 10 r."""
import numpy as np

import kiln as ms
from kiln import ops
from kiln.communication import (
    comm_func,
    create_group,
    get_group_size,
    get_rank,
    init,
    release,
)

init()
R, N = get_rank(), get_group_size()
assert N == 2, N
BASE = np.arange(1, 7, dtype=np.float32).reshape(3, 2)
XS = [BASE + 10 * r for r in range(N)]
X = XS[R]


def close(got, want, what):
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6, err_msg=f"rank {R}: {what}")


AR_SUM, AR_MAX = ops.AllReduce(), ops.AllReduce(ops.ReduceOp.MAX)
AR_MIN, AR_PROD = ops.AllReduce(ops.ReduceOp.MIN), ops.AllReduce(ops.ReduceOp.PROD)
GATHER, SCATTER, BCAST1 = ops.AllGather(), ops.ReduceScatter(), ops.Broadcast(1)


def ar_sum(t):
    return AR_SUM(t)


def ar_max(t):
    return AR_MAX(t)


def ar_min(t):
    return AR_MIN(t)


def ar_prod(t):
    return AR_PROD(t)


def gather(t):
    return GATHER(t)


def gather_folded(t):  # x_0 + x_1 on every rank, through AllGather
    g = GATHER(t)
    return g[:3] + g[3:]


def bcast1(t):
    return BCAST1((t,))[0]


def scatter4(t):  # 4 rows, 2 per rank
    return SCATTER(ops.concat((t, t[:1]), 0))


def scatter_twice(t):  # 6 rows, 3 per rank: x_0 + x_1 on every rank
    return SCATTER(ops.concat((t, t), 0))


def values(tag, run):
    close(run(ar_sum), sum(XS), f"{tag} AllReduce sum")
    close(run(ar_max), np.maximum(*XS), f"{tag} max")
    close(run(ar_min), np.minimum(*XS), f"{tag} min")
    close(run(ar_prod), XS[0] * XS[1], f"{tag} prod")
    close(run(gather), np.concatenate(XS), f"{tag} AllGather")
    close(run(bcast1), XS[1], f"{tag} Broadcast")
    close(run(scatter4), sum(np.concatenate((x, x[:1])) for x in XS)[2 * R:2 * R + 2],
          f"{tag} ReduceScatter")


def eager(fn):
    return fn(ms.Tensor(X))


def compiled(fn):
    return ms.jit(fn)(ms.Tensor(X))


values("eager", eager)
values("graph", compiled)
# int32 and float16 travel too
close(ops.AllReduce()(ms.Tensor(X.astype(np.int32))), sum(XS).astype(np.int32), "int32 sum")
close(ops.AllReduce()(ms.Tensor(X.astype(np.float16))), sum(XS).astype(np.float16), "fp16 sum")

# comm_func forms (MindSpore 2.10: (output, handle) for the all_* forms)
out, handle = comm_func.all_reduce(ms.Tensor(X))
assert handle is None
close(out, sum(XS), "comm_func.all_reduce")
for dtype in (np.float32, np.float16):  # asynchronous: the output is filled by wait()
    out, handle = comm_func.all_reduce(ms.Tensor(X.astype(dtype)), async_op=True)
    other = ops.AllGather()(ms.Tensor(X))  # another collective while it is on its way
    handle.wait()
    close(out, sum(XS).astype(dtype), f"async comm_func.all_reduce {dtype.__name__}")
    close(other, np.concatenate(XS), "all_gather beside an async all_reduce")
close(comm_func.all_gather_into_tensor(ms.Tensor(X))[0], np.concatenate(XS), "all_gather")
close(comm_func.broadcast(ms.Tensor(X), src=0), XS[0], "comm_func.broadcast")
assert comm_func.barrier() is None


# Gradients: loss = sum(w * collective(x)) on every rank, w_r = r + 1; d loss / d x_r is
# computed by hand and checked on each rank, eager and compiled.
W = [np.full_like(BASE, r + 1.0) for r in range(N)]


def grad_of(fn, graph):
    def loss(x):
        return (fn(x) * ms.Tensor(W[R])).sum()
    g = ms.grad(ms.jit(loss) if graph else loss)
    return g(ms.Tensor(X))


for graph in (False, True):
    tag = "graph" if graph else "eager"
    # AllReduce SUM: every rank's loss sees x_r, so dx_r = sum_r w_r
    close(grad_of(ar_sum, graph), sum(W), f"{tag} grad AllReduce")
    # MAX: the gradient goes to the rank holding the maximum (rank 1 everywhere here)
    close(grad_of(ar_max, graph), sum(W) * (R == 1), f"{tag} grad AllReduce max")
    # PROD: d(x_0 x_1)/dx_r = the other rank's x
    close(grad_of(ar_prod, graph), sum(W) * XS[1 - R], f"{tag} grad AllReduce prod")
    # AllGather: x_r feeds every rank's x_0 + x_1
    close(grad_of(gather_folded, graph), sum(W), f"{tag} grad AllGather")
    # Broadcast from rank 1: only rank 1's x reaches the losses
    close(grad_of(bcast1, graph), sum(W) * (R == 1), f"{tag} grad Broadcast")
    # ReduceScatter: x_r's first copy feeds rank 0's block, its second rank 1's
    close(grad_of(scatter_twice, graph), sum(W), f"{tag} grad ReduceScatter")

# A group of one rank: collectives over it are the identity on its member.
create_group(f"solo{R}", [R])
close(ops.AllReduce(group=f"solo{R}")(ms.Tensor(X)), X, "group of one")
# release() ends MPI; MPI cannot start again in the same process, which init() says.
release()
try:
    init()
    raise AssertionError("init() after release() should fail")
except RuntimeError as e:
    assert "cannot start again" in str(e), e
print(f"COLLECTIVES-OK rank {R}", flush=True)
