"""Collective communication primitives (MindSpore's ops.AllReduce, AllGather, ReduceScatter,
Broadcast, Barrier and ReduceOp) over the registry's collective ops (csrc/ops/collective.cc).

Each call is one registry op, eager or a graph node; the engine runs it through the
communication library kiln.communication.init() loaded, or as the identity on a single rank.
"""
from kiln.ops import _core
from kiln.ops.primitive import Primitive

__all__ = ["ReduceOp", "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Barrier"]

# MindSpore's default group argument: the world, whatever the backend calls it.
_WORLD = "hccl_world_group"


class ReduceOp:
    """How AllReduce and ReduceScatter combine the ranks' tensors."""
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    PROD = "prod"


_REDUCE_OPS = (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PROD)


def check_group(group, who):
    if not isinstance(group, str):
        raise TypeError(f"For '{who}', the argument 'group' must be a str, got "
                        f"{type(group).__name__}")
    return group


def check_reduce_op(op, who):
    if not isinstance(op, str):
        raise TypeError(f"For '{who}', the argument 'op' must be a str (ReduceOp.SUM, MAX, MIN "
                        f"or PROD), got {type(op).__name__}")
    if op not in _REDUCE_OPS:
        raise ValueError(f"For '{who}', the argument 'op' must be one of {_REDUCE_OPS}, got "
                         f"{op!r}")
    return op


def _check_tensor(x, who):
    if not _core.is_tensor(x):
        raise TypeError(f"For '{who}', the input must be a Tensor, got {type(x).__name__}")
    return x


class AllReduce(Primitive):
    """Every rank of `group` gets the reduction (`op`) of the ranks' tensors."""

    def __init__(self, op=ReduceOp.SUM, group=_WORLD):
        super().__init__()
        self.op = check_reduce_op(op, "AllReduce")
        self.group = check_group(group, "AllReduce")
        self.add_prim_attr("fusion", 0)

    def __call__(self, x):
        return _core.call("all_reduce", (_check_tensor(x, "AllReduce"),), (self.op, self.group))


class AllGather(Primitive):
    """The ranks' tensors concatenated along axis 0, in rank order, on every rank."""

    def __init__(self, group=_WORLD):
        super().__init__()
        self.group = check_group(group, "AllGather")

    def __call__(self, x):
        return _core.call("all_gather", (_check_tensor(x, "AllGather"),), (self.group,))


class ReduceScatter(Primitive):
    """The reduction of the ranks' tensors, split along axis 0: rank r gets block r."""

    def __init__(self, op=ReduceOp.SUM, group=_WORLD):
        super().__init__()
        self.op = check_reduce_op(op, "ReduceScatter")
        self.group = check_group(group, "ReduceScatter")

    def __call__(self, x):
        return _core.call("reduce_scatter", (_check_tensor(x, "ReduceScatter"),),
                          (self.op, self.group))


class Broadcast(Primitive):
    """Each tensor of the input tuple, as rank `root_rank` holds it, on every rank. MindSpore's
    form: a tuple in, a tuple out."""

    def __init__(self, root_rank, group=_WORLD):
        super().__init__()
        if isinstance(root_rank, bool) or not isinstance(root_rank, int):
            raise TypeError(f"For 'Broadcast', the argument 'root_rank' must be an int, got "
                            f"{type(root_rank).__name__}")
        self.root_rank = root_rank
        self.group = check_group(group, "Broadcast")

    def __call__(self, x):
        if not isinstance(x, (tuple, list)):
            raise TypeError(f"For 'Broadcast', the input must be a tuple of Tensors, got "
                            f"{type(x).__name__}")
        return tuple([_core.call("broadcast", (_check_tensor(t, "Broadcast"),),
                                 (self.root_rank, self.group)) for t in x])


class Barrier(Primitive):
    """Waits until every rank of `group` has reached it."""

    def __init__(self, group=_WORLD):
        super().__init__()
        self.group = check_group(group, "Barrier")

    def __call__(self):
        return _core.call("barrier", (), (self.group,))


class _AllReduceStart(Primitive):
    """The first half of AllReduce: starts it and returns a handle (an int64 scalar) at once, so
    the backward pass goes on while the bucket travels. kiln's own: nn.DistributedGradReducer's
    overlap emits it; the passes move it to just after the last value it needs."""

    def __init__(self, op=ReduceOp.SUM, group=_WORLD):
        super().__init__()
        self.op = check_reduce_op(op, "AllReduce")
        self.group = check_group(group, "AllReduce")

    def __call__(self, x):
        return _core.call("all_reduce_start", (_check_tensor(x, "AllReduce"),),
                          (self.op, self.group))


class _AllReduceWait(Primitive):
    """The second half: the reduction of `x` that `handle` started (x: the tensor sent)."""

    def __call__(self, x, handle):
        return _core.call("all_reduce_wait", (x, handle), ())
