"""Training wrappers: WithLossCell (network + loss), TrainOneStepCell (forward, grads, update),
MicroBatchInterleaved (a network over slices of its batch, outputs summed)."""
import numbers

from kiln.nn.cell import Cell
from kiln.nn.layer.basic import Identity
from kiln.nn.optim.optimizer import Optimizer
from kiln.nn.wrap.grad_reducer import broadcast_parameters, training_grad_reducer
from kiln.ops import _core
from kiln.ops.composite import value_and_grad

__all__ = ["WithLossCell", "TrainOneStepCell", "WithEvalCell", "MicroBatchInterleaved"]


class WithLossCell(Cell):
    """loss_fn(backbone(data), label). Parameter names are not prefixed (auto_prefix=False)."""

    def __init__(self, backbone, loss_fn):
        super().__init__(auto_prefix=False)
        if not isinstance(backbone, Cell):
            raise TypeError(f"WithLossCell: backbone must be a Cell, got "
                            f"{type(backbone).__name__}")
        if not callable(loss_fn):
            raise TypeError(f"WithLossCell: loss_fn must be a Cell or callable, got "
                            f"{type(loss_fn).__name__}")
        self._backbone = backbone
        self._loss_fn = loss_fn

    def construct(self, data, label):
        return self._loss_fn(self._backbone(data), label)

    @property
    def backbone_network(self):
        return self._backbone


class WithEvalCell(Cell):
    """Returns (loss, outputs, label) for evaluation."""

    def __init__(self, network, loss_fn, add_cast_fp32=False):
        super().__init__(auto_prefix=False)
        self._network = network
        self._loss_fn = loss_fn
        self.add_cast_fp32 = add_cast_fp32

    def construct(self, data, label):
        outputs = self._network(data)
        return self._loss_fn(outputs, label), outputs, label


class TrainOneStepCell(Cell):
    """One training step: loss and gradients of `network` (which returns the loss) with respect
    to optimizer.parameters via ``kiln.value_and_grad(network, None, weights)``, then
    ``optimizer(grads)``. Returns the loss. `sens` scales the gradients (MindSpore's sens)."""

    def __init__(self, network, optimizer, sens=None):
        super().__init__(auto_prefix=False)
        if not isinstance(network, Cell):
            raise TypeError(f"TrainOneStepCell: network must be a Cell, got "
                            f"{type(network).__name__}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"TrainOneStepCell: optimizer must be a kiln.nn Optimizer, got "
                            f"{type(optimizer).__name__}")
        sens = 1.0 if sens is None else sens
        if isinstance(sens, bool) or not isinstance(sens, numbers.Real):
            raise TypeError(f"TrainOneStepCell: sens must be a number, got {sens!r}")
        self.network = network
        self.network.set_grad()
        self.optimizer = optimizer
        self.weights = optimizer.parameters
        self.sens = float(sens)
        # Built here, not in construct: construct must stay compilable (Graph mode compiles it
        # from source, where assigning plain attributes on self is not allowed).
        self._grad_fn = value_and_grad(self.network, None, self.weights)
        # ParallelMode.DATA_PARALLEL (kiln.set_auto_parallel_context): every rank starts from
        # rank 0's parameters and the gradients are all-reduced before the update, so the
        # replicas stay equal; the reducer is a sub-cell, compiled into the step in Graph mode.
        reducer = training_grad_reducer(self.weights)
        self.reducer_flag = reducer is not None
        if self.reducer_flag:
            broadcast_parameters(self.network.get_parameters())
            if self.sens == 1.0:  # scaled gradients would be new tensors, sent after the sweep
                self._grad_fn = reducer.overlapping(self._grad_fn, self)
        # An attribute, as MindSpore's: a subclass may assign its own reducer Cell.
        self.grad_reducer = reducer if self.reducer_flag else Identity()

    def construct(self, *inputs):
        loss, grads = self._grad_fn(*inputs)
        if self.sens != 1.0:
            grads = tuple([None if g is None else g * self.sens for g in grads])
        self.optimizer(self.grad_reducer(grads))
        return loss


class MicroBatchInterleaved(Cell):
    """Runs `network` on `interleave_num` slices of its inputs along axis 0 (slice i holds rows
    i*N//k to (i+1)*N//k of every input) and returns the sum of the outputs, which must be
    Tensors. MindSpore uses it under model parallelism to overlap one slice's computation with
    another's communication; kiln runs the slices in turn, with the same result."""

    def __init__(self, network, interleave_num=2):
        super().__init__(auto_prefix=False)
        interleave_num = _core.positive_int_arg(interleave_num, "MicroBatchInterleaved",
                                                "interleave_num")
        self.network = network
        self.interleave_num = interleave_num

    def construct(self, *inputs):
        total = None
        for i in range(self.interleave_num):
            output = self.network(*self._slice(i, inputs))
            total = output if total is None else total + output
        return total

    def _slice(self, i, inputs):
        pieces = ()
        for x in inputs:
            rows = x.shape[0]
            lo, hi = i * rows // self.interleave_num, (i + 1) * rows // self.interleave_num
            pieces = pieces + (x[lo:hi],)
        return pieces
