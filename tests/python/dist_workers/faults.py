"""Run by test_distributed.py under mpirun -n 2: one rank fails, the other is waiting in an
AllReduce. argv: "die" (rank 1 exits at once, as a crash would), "hang" (rank 1 sleeps past
the communication timeout, which the test sets short) or "hang-at-exit" (rank 0 finishes and
exits, meeting the others in release(), while rank 1 sleeps). "die-async" and "hang-async":
the same, rank 0 waiting in the second half of an overlapped all-reduce (all_reduce_wait)."""
import os
import sys
import time

import kiln as ms
from kiln import ops
from kiln.communication import get_rank, init
from kiln.ops.operations.comm_ops import _AllReduceStart, _AllReduceWait

init()
if get_rank() == 1:
    if sys.argv[1] in ("die", "die-async"):
        os._exit(3)
    time.sleep(float(sys.argv[2]))
    sys.exit(0)
if sys.argv[1] == "hang-at-exit":
    print("rank 0 finishes", flush=True)
    sys.exit(0)
print("rank 0 enters AllReduce", flush=True)
if sys.argv[1].endswith("-async"):
    x = ms.Tensor([1.0])
    _AllReduceWait()(x, _AllReduceStart()(x))
else:
    ops.AllReduce()(ms.Tensor([1.0]))
print("rank 0 left AllReduce: wrong", flush=True)
