"""Run by test_distributed.py under mpirun -n 2: while rank 0 waits in an eager AllReduce (rank
1 arrives a second later), a Python thread of rank 0 keeps running: the collective waits
without holding the GIL. Also a blocked all_reduce_wait (the second half of an overlapped
all-reduce) and a compiled function's AllReduce (a graph with collectives runs without it)."""
import threading
import time

import kiln as ms
from kiln import ops
from kiln.communication import get_rank, init
from kiln.ops.operations.comm_ops import _AllReduceStart, _AllReduceWait

init()
ticks = [0]
stop = threading.Event()


def tick():
    while not stop.is_set():
        ticks[0] += 1
        time.sleep(0.001)


def blocked(what, call):
    """Ticks of the Python thread while rank 0 is blocked in `call` for about a second."""
    ops.Barrier()()  # both ranks here: rank 0 then waits for rank 1's sleep
    if get_rank() == 1:
        time.sleep(1.5)
        return call()
    before = ticks[0]
    start = time.monotonic()
    out = call()
    waited = time.monotonic() - start
    assert waited > 0.5, (what, waited)  # it did wait for rank 1
    moved = ticks[0] - before
    # holding the GIL it would run about once (measured: 1 tick in 1 s); a busy machine
    # delays each 1 ms sleep, so any clear progress counts
    assert moved > 10, f"{what}: the thread ran {moved} times in {waited:.2f} s"
    return out


thread = threading.Thread(target=tick, daemon=True)
thread.start()
x = ms.Tensor([1.0 + get_rank()])
out = blocked("AllReduce", lambda: ops.AllReduce()(x))
assert out.asnumpy()[0] == 3.0, out
# rank 1 starts late: rank 0's start returns at once and its wait blocks
out = blocked("all_reduce_wait", lambda: _AllReduceWait()(x, _AllReduceStart()(x)))
assert out.asnumpy()[0] == 3.0, out
compiled = ms.jit(lambda t: ops.AllReduce()(t) * 2)
assert compiled(x).asnumpy()[0] == 6.0  # compiled on both ranks before the timed call
out = blocked("compiled AllReduce", lambda: compiled(x))
assert out.asnumpy()[0] == 6.0, out
stop.set()
thread.join()
print(f"GIL-OK rank {get_rank()}", flush=True)
