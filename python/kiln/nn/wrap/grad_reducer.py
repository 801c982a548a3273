"""Data parallelism in training: DistributedGradReducer (MindSpore's nn.DistributedGradReducer)
and the pieces TrainOneStepCell uses in ParallelMode.DATA_PARALLEL.

Overlap: the buckets' all-reduces start while the backward pass still runs. In Graph mode the
reducer emits all_reduce_start / all_reduce_wait per bucket and the schedule_collectives pass
moves each start to just after the bucket's last gradient; in PyNative, TrainOneStepCell runs
its gradient function under the reducer's GradBuckets (runtime/grad_buckets.h), which the tape
tells as each gradient is finished. KILN_GRAD_OVERLAP=0 turns it off (docs/distributed.md)."""
import os

from kiln import _C, _auto_parallel, _graph_state
from kiln.communication import management
from kiln.communication.management import GlobalComm
from kiln.nn.cell import Cell
from kiln.ops import function as F
from kiln.ops.operations.comm_ops import (
    AllReduce,
    Broadcast,
    ReduceOp,
    _AllReduceStart,
    _AllReduceWait,
)

__all__ = ["DistributedGradReducer"]

# Gradients are sent in buckets of at most this many bytes: one all-reduce per bucket instead of
# per gradient pays the per-message latency once (docs/distributed.md, "Cost model"); the cap
# bounds the extra copy of the gradients a bucket takes. KILN_GRAD_BUCKET_MB overrides it: more,
# smaller buckets start earlier in the backward pass (overlap) but pay the latency more often.
BUCKET_BYTES = 64 << 20


def _env_bucket_bytes():
    text = os.environ.get("KILN_GRAD_BUCKET_MB")
    if text is None:
        return BUCKET_BYTES
    try:
        mb = float(text)
    except ValueError:
        mb = -1.0
    if not mb > 0:
        raise ValueError(f"KILN_GRAD_BUCKET_MB must be a positive number of megabytes, got "
                         f"{text!r}")
    return max(1, int(mb * (1 << 20)))


def _env_overlap():
    text = os.environ.get("KILN_GRAD_OVERLAP", "1")
    if text not in ("0", "1"):
        raise ValueError(f"KILN_GRAD_OVERLAP must be 0 or 1, got {text!r}")
    return text == "1"


def _bucket_plan(parameters, cap):
    """Consecutive parameters of one dtype, up to `cap` bytes each: tuples of indices, last
    parameters first, as the backward pass finishes their gradients (the first bucket fills
    first, so its all-reduce can start earliest)."""
    plan, current, size, dtype = [], [], 0, None
    for i, p in reversed(list(enumerate(parameters))):
        nbytes = int(p.nbytes)
        if current and (p.dtype != dtype or size + nbytes > cap):
            plan.append(tuple(current))
            current, size = [], 0
        current.insert(0, i)
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
    With overlap (the default; KILN_GRAD_OVERLAP=0 turns it off) each bucket's AllReduce is
    started as soon as its gradients exist and waited for here. fusion_type is accepted
    (MindSpore's fusion groups; kiln buckets every gradient)."""

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
        self._buckets = _bucket_plan(parameters, _env_bucket_bytes())
        self._all_reduce = AllReduce(ReduceOp.SUM, group)
        self._start = _AllReduceStart(ReduceOp.SUM, group)
        self._wait = _AllReduceWait()
        self._scale = 1.0 / degree
        self.overlap = _env_overlap()
        # PyNative: the listener the tape tells of finished gradients (a plain object, not a
        # Cell attribute that changes per step).
        self._eager = _C.GradBuckets(parameters, [list(b) for b in self._buckets], group)

    def overlapping(self, grad_fn, owner):
        """grad_fn, run so that in PyNative the buckets' all-reduces start during its backward
        pass (this reducer's next call waits for them) while `owner` (the TrainOneStepCell)
        still reduces with this reducer; in Graph mode grad_fn itself, since the compiled step
        is scheduled instead. Without overlap, grad_fn."""
        if not self.overlap:
            return grad_fn
        eager = self._eager

        def run(*args):
            if _graph_state.compiling() or owner.grad_reducer is not self:
                return grad_fn(*args)
            with eager:
                return grad_fn(*args)
        return run

    def _reduce(self, grad):
        reduced = self._all_reduce(grad)
        return reduced * self._scale if self.mean else reduced

    def _fusable(self, grads):
        """Bucketing needs every gradient present with its parameter's dtype and shape."""
        return len(grads) == self.num_parameters and all(
            g is not None and g.dtype == d and tuple(g.shape) == s
            for g, d, s in zip(grads, self._dtypes, self._shapes))

    def _flat(self, grads, bucket):
        return F.concat(tuple([F.reshape(grads[i], (-1,)) for i in bucket]))

    def _unflat(self, reduced, bucket, out):
        if self.mean:
            reduced = reduced * self._scale
        parts = F.split(reduced, [_numel(self._shapes[i]) for i in bucket])
        for part, i in zip(parts, bucket):
            out[i] = F.reshape(part, self._shapes[i])

    def _overlapped(self, grads):
        """Graph mode: every bucket's start, then every wait; schedule_collectives moves each
        start up to its last gradient. PyNative: the GradBuckets' waits."""
        out = [None] * self.num_parameters
        if not _graph_state.compiling():
            for i, g in enumerate(self._eager.finish(grads)):
                out[i] = g * self._scale if self.mean else g
            return tuple(out)
        flats = [self._flat(grads, bucket) for bucket in self._buckets]
        handles = [self._start(flat) for flat in flats]
        for flat, handle, bucket in zip(flats, handles, self._buckets):
            self._unflat(self._wait(flat, handle), bucket, out)
        return tuple(out)

    def construct(self, grads):
        if not self._fusable(grads):
            return tuple([None if g is None else self._reduce(g) for g in grads])
        if self.overlap:
            return self._overlapped(grads)
        reduced = [None] * self.num_parameters
        for bucket in self._buckets:
            self._unflat(self._all_reduce(self._flat(grads, bucket)), bucket, reduced)
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
