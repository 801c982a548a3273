"""Run by test_distributed.py through the launchers: each rank reports its rank, the world,
its local rank and its thread count, and the sum of the ranks over an AllReduce."""
import kiln as ms
from kiln import _C, ops
from kiln.communication import get_group_size, get_local_rank, get_rank, init

init()
total = int(ops.AllReduce()(ms.Tensor([get_rank()])).asnumpy()[0])
print(f"HELLO rank={get_rank()} size={get_group_size()} local={get_local_rank()} "
      f"threads={_C.get_num_threads()} total={total}", flush=True)
