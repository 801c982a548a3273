"""Data parallelism in training: DistributedGradReducer (MindSpore's nn.DistributedGradReducer)
and the pieces TrainOneStepCell uses in ParallelMode.DATA_PARALLEL."""
from kiln import _auto_parallel
from kiln.communication import management
from kiln.communication.management import GlobalComm
from kiln.nn.cell import Cell
from kiln.ops import function as F
from kiln.ops.operations.comm_ops import AllReduce, Broadcast, ReduceOp

__all__ = ["DistributedGradReducer"]

# Gradients are sent in buckets of at most this many bytes: one all-reduce per bucket instead of
# per gradient pays the per-message latency once (docs/distributed.md, "Cost model"); the cap
# bounds the extra copy of the gradients a bucket takes.
BUCKET_BYTES = 64 << 20


def _bucket_plan(parameters, cap):
    """Consecutive parameters of one dtype, up to `cap` bytes each: tuples of indices."""
    plan, current, size, dtype = [], [], 0, None
    for i, p in enumerate(parameters):
        nbytes = int(p.nbytes)
        if current and (p.dtype != dtype or size + nbytes > cap):
            plan.append(tuple(current))
            current, size = [], 0
        current.append(i)
        size, dtype = size + nbytes, p.dtype
    if current:
        plan.append(tuple(current))
    return tuple(plan)


class DistributedGradReducer(Cell):
    """Sums each gradient over the ranks of `group` (one AllReduce per gradient, a registry op:
    a node of the compiled step in Graph mode), then divides by `degree` when `mean`.

    mean: None takes gradients_mean from the auto-parallel context; degree: None takes the
    group's size. The gradients travel in buckets (consecutive parameters of one dtype, up to
    BUCKET_BYTES): one AllReduce per bucket, which sums the same elements as one per gradient.
    fusion_type is accepted (MindSpore's fusion groups; kiln buckets every gradient)."""

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
        parameters = list(parameters)
        self.num_parameters = len(parameters)
        self._dtypes = tuple(p.dtype for p in parameters)
        self._shapes = tuple(tuple(p.shape) for p in parameters)
        self._buckets = _bucket_plan(parameters, BUCKET_BYTES)
        self._all_reduce = AllReduce(ReduceOp.SUM, group)
        self._scale = 1.0 / degree

    def _reduce(self, grad):
        reduced = self._all_reduce(grad)
        return reduced * self._scale if self.mean else reduced

    def _fusable(self, grads):
        """Bucketing needs every gradient present with its parameter's dtype and shape."""
        return len(grads) == self.num_parameters and all(
            g is not None and g.dtype == d and tuple(g.shape) == s
            for g, d, s in zip(grads, self._dtypes, self._shapes))

    def _reduce_bucket(self, grads, bucket):
        flat = F.concat(tuple([F.reshape(grads[i], (-1,)) for i in bucket]))
        parts = F.split(self._reduce(flat), [_numel(self._shapes[i]) for i in bucket])
        return [F.reshape(part, self._shapes[i]) for part, i in zip(parts, bucket)]

    def construct(self, grads):
        if not self._fusable(grads):
            return tuple([None if g is None else self._reduce(g) for g in grads])
        reduced = []
        for bucket in self._buckets:
            reduced = reduced + self._reduce_bucket(grads, bucket)
        return tuple(reduced)


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


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
