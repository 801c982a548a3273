"""kiln.communication.comm_func -- the collectives as functions (MindSpore's comm_func).

Each returns what MindSpore 2.10's returns: (output, handle) for the all_* / reduce_scatter
forms, where handle is None unless async_op; broadcast returns the tensor; barrier returns None.
all_reduce with async_op=True is asynchronous, as MindSpore's: it starts the all-reduce and
returns at once, and `output` holds the result once handle.wait() has returned (call it before
reading `output`, and leave `tensor` unchanged until then). The other async forms (and
all_reduce while a function is being compiled) run the collective before returning, so their
handle's wait() returns at once.
"""
from kiln import _graph_state
from kiln.communication.management import GlobalComm
from kiln.ops import _core
from kiln.ops import function as F
from kiln.ops.operations.comm_ops import ReduceOp, check_group, check_reduce_op

__all__ = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast",
           "barrier"]


class CommHandle:
    """What an async_op collective returns. wait() finishes an asynchronous all_reduce (its
    output then holds the result); for a collective that already ran it returns at once."""

    def __init__(self, finish=None):
        self._finish = finish

    def wait(self):
        finish, self._finish = self._finish, None
        if finish is not None:
            finish()
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
    attrs = (check_reduce_op(op, "all_reduce"), check_group(group, "all_reduce"))
    if async_op is True and not _graph_state.compiling():
        started = _core.call("all_reduce_start", (tensor,), attrs)
        out = F.zeros_like(tensor)  # the result is written into it by wait()

        def finish():
            _core.call("assign", (out, _core.call("all_reduce_wait", (tensor, started), ())))
        return out, CommHandle(finish)
    return _result(_core.call("all_reduce", (tensor,), attrs), async_op)


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
