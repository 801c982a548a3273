"""kiln.communication -- collective communication over MPI (MindSpore's mindspore.communication).

``init()`` under ``mpirun`` / ``msrun`` / ``python -m kiln.run`` joins the job; the collectives
are registry ops (``kiln.ops.AllReduce`` ..., and the functions in ``comm_func``) that run in C++
through the loaded MPI library. docs/distributed.md.
"""
from kiln.communication import comm_func  # noqa: F401
from kiln.communication.management import (  # noqa: F401
    HCCL_WORLD_COMM_GROUP,
    MCCL_WORLD_COMM_GROUP,
    NCCL_WORLD_COMM_GROUP,
    GlobalComm,
    create_group,
    destroy_group,
    get_comm_name,
    get_group_rank_from_world_rank,
    get_group_size,
    get_local_rank,
    get_local_rank_size,
    get_process_group_ranks,
    get_rank,
    get_world_rank_from_group_rank,
    init,
    release,
)

__all__ = ["GlobalComm", "init", "release", "get_rank", "get_group_size",
           "get_world_rank_from_group_rank", "get_group_rank_from_world_rank", "create_group",
           "get_comm_name", "HCCL_WORLD_COMM_GROUP", "NCCL_WORLD_COMM_GROUP",
           "MCCL_WORLD_COMM_GROUP", "get_local_rank", "get_local_rank_size", "destroy_group",
           "get_process_group_ranks"]
