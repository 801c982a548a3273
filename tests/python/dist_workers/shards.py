"""Run by test_distributed.py under mpirun -n 2: after init() in DATA_PARALLEL, a dataset
source without num_shards/shard_id reads every row on every rank and DistributedSampler needs
both arguments, as in MindSpore 2.10 (its sources default num_shards to None: no sharding; the
script passes get_group_size()/get_rank()); given them, the ranks read disjoint rows."""
import numpy as np

import kiln as ms
from kiln import dataset as ds
from kiln.communication import get_group_size, get_rank, init

init()
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
rows = np.arange(8, dtype=np.int32)


def read(data):
    return [int(r["x"]) for r in data.create_dict_iterator(num_epochs=1, output_numpy=True)]


assert read(ds.NumpySlicesDataset({"x": rows}, shuffle=False)) == list(range(8))
try:
    ds.DistributedSampler()
    raise AssertionError("DistributedSampler() without arguments ran")
except TypeError:
    pass
mine = read(ds.NumpySlicesDataset({"x": rows}, shuffle=False, num_shards=get_group_size(),
                                  shard_id=get_rank()))
sampled = read(ds.NumpySlicesDataset(
    {"x": rows}, sampler=ds.DistributedSampler(get_group_size(), get_rank(), shuffle=False)))
assert mine == sampled == list(range(get_rank(), 8, 2)), (mine, sampled)
print(f"SHARDS-OK rank {get_rank()}", flush=True)
