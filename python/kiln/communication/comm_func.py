"""kiln.communication.comm_func -- the collectives as functions (MindSpore's comm_func).

Each returns what MindSpore 2.10's returns: (output, handle) for the all_* / reduce_scatter
forms, where handle is None unless async_op (kiln runs collectives synchronously, so an async
handle's wait() returns at once); broadcast returns the tensor; barrier returns None.
"""
from kiln.communication.management import GlobalComm
from kiln.ops import _core
from kiln.ops.operations.comm_ops import ReduceOp, check_group, check_reduce_op

__all__ = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast",
           "barrier"]


class CommHandle:
    """What an async_op collective returns: the work is already done when it returns."""

    def wait(self):
        return None


def _tensor(x, who):
    if not _core.is_tensor(x):
        raise TypeError(f"For {who}, the input tensor must be tensor")
    return x


def _result(output, async_op):
    if not isinstance(async_op, bool):
        raise TypeError(f"async_op must be a bool, got {type(async_op).__name__}")
    return output, (CommHandle() if async_op else None)


def all_reduce(tensor, op=ReduceOp.SUM, group=GlobalComm.WORLD_COMM_GROUP, async_op=False):
    """Every rank gets the reduction (`op`) of the ranks' tensors: (output, handle)."""
    _tensor(tensor, "all_reduce")
    out = _core.call("all_reduce", (tensor,), (check_reduce_op(op, "all_reduce"),
                                               check_group(group, "all_reduce")))
    return _result(out, async_op)


def all_gather_into_tensor(tensor, group=GlobalComm.WORLD_COMM_GROUP, async_op=False):
    """The ranks' tensors concatenated along axis 0 in rank order: (output, handle)."""
    _tensor(tensor, "all_gather_into_tensor")
    out = _core.call("all_gather", (tensor,), (check_group(group, "all_gather_into_tensor"),))
    return _result(out, async_op)


def reduce_scatter_tensor(tensor, op=ReduceOp.SUM, group=GlobalComm.WORLD_COMM_GROUP,
                          async_op=False):
    """Block `rank` (along axis 0) of the ranks' reduced tensors: (output, handle)."""
    _tensor(tensor, "reduce_scatter_tensor")
    out = _core.call("reduce_scatter", (tensor,), (check_reduce_op(op, "reduce_scatter_tensor"),
                                                   check_group(group, "reduce_scatter_tensor")))
    return _result(out, async_op)


def broadcast(tensor, src=0, group=GlobalComm.WORLD_COMM_GROUP):
    """Rank `src`'s tensor on every rank."""
    _tensor(tensor, "broadcast")
    if isinstance(src, bool) or not isinstance(src, int):
        raise TypeError(f"For broadcast, src must be an int, got {type(src).__name__}")
    return _core.call("broadcast", (tensor,), (src, check_group(group, "broadcast")))


def barrier(group=GlobalComm.WORLD_COMM_GROUP):
    """Blocks until every rank of `group` has called it."""
    _core.call("barrier", (), (check_group(group, "barrier"),))
