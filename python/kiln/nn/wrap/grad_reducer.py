"""Data parallelism in training: DistributedGradReducer (MindSpore's nn.DistributedGradReducer)
and the pieces TrainOneStepCell uses in ParallelMode.DATA_PARALLEL."""
from kiln import _auto_parallel
from kiln.communication import management
from kiln.communication.management import GlobalComm
from kiln.nn.cell import Cell
from kiln.ops.operations.comm_ops import AllReduce, Broadcast, ReduceOp

__all__ = ["DistributedGradReducer"]


class DistributedGradReducer(Cell):
    """Sums each gradient over the ranks of `group` (one AllReduce per gradient, a registry op:
    a node of the compiled step in Graph mode), then divides by `degree` when `mean`.

    mean: None takes gradients_mean from the auto-parallel context; degree: None takes the
    group's size. fusion_type is accepted (MindSpore fuses small all-reduces by it; kiln sends
    one per gradient)."""

    def __init__(self, parameters, mean=None, degree=None, fusion_type=1,
                 group=GlobalComm.WORLD_COMM_GROUP):
        super().__init__(auto_prefix=False)
        if mean is None:
            mean = _auto_parallel.get_auto_parallel_context("gradients_mean")
        if not isinstance(mean, bool):
            raise TypeError(f"DistributedGradReducer: mean must be a bool, got {mean!r}")
        if degree is None:
            degree = management.get_group_size(group)
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
            raise ValueError(f"DistributedGradReducer: degree must be a positive int, got "
                             f"{degree!r}")
        self.mean, self.degree, self.group = mean, degree, group
        self.fusion_type = fusion_type
        self.num_parameters = len(list(parameters))
        self._all_reduce = AllReduce(ReduceOp.SUM, group)
        self._scale = 1.0 / degree

    def _reduce(self, grad):
        reduced = self._all_reduce(grad)
        return reduced * self._scale if self.mean else reduced

    def construct(self, grads):
        return tuple([None if g is None else self._reduce(g) for g in grads])


def broadcast_parameters(parameters, group=GlobalComm.WORLD_COMM_GROUP):
    """Every rank takes rank 0's parameter values, so data-parallel replicas start equal."""
    broadcast = Broadcast(0, group)
    for param in parameters:
        param.set_data(broadcast((param,))[0])


def training_grad_reducer(parameters):
    """What TrainOneStepCell reduces gradients with: in data-parallel mode a
    DistributedGradReducer over the world, else None."""
    if not _auto_parallel.data_parallel():
        return None
    degree = _auto_parallel.get_auto_parallel_context("device_num")
    return DistributedGradReducer(parameters,
                                  _auto_parallel.get_auto_parallel_context("gradients_mean"),
                                  degree)
