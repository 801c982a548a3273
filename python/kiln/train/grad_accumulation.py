"""Gradient accumulation: a training step that adds each batch's gradients to a buffer and lets
the optimizer update once every `accumulate_step` batches, with their mean."""
import numbers

import numpy as np

from kiln import ops
from kiln.common.parameter import Parameter
from kiln.common.tensor import Tensor
from kiln.nn._loops import run_if
from kiln.nn.optim.optimizer import _graph_value
from kiln.nn.wrap.cell_wrapper import TrainOneStepCell

__all__ = ["GradAccumulationCell"]


class GradAccumulationCell(TrainOneStepCell):
    """TrainOneStepCell that accumulates: every call computes the loss and gradients of one
    (micro-)batch and adds the gradients to ``accumulated`` (Parameters named
    ``accumulate.<parameter>``, so checkpoints hold them and a resumed run continues mid-way);
    every `accumulate_step`-th call the optimizer runs once on their mean and they are zeroed.

    With a loss that averages over the batch, N micro-batches of b samples give the optimizer
    exactly the gradient of one batch of N*b samples (for layers without batch statistics), at
    the memory of a batch of b. The optimizer's global_step counts updates, not calls. Use it
    with Model as the network (``Model(GradAccumulationCell(WithLossCell(net, loss), opt, 4))``)
    or call it directly; it compiles once in GRAPH_MODE (the update is a graph ``if``).
    kiln's own cell: MindSpore users write this loop by hand (the Accumulator of MindSpore's
    gradient accumulation tutorial), which kiln runs too."""

    def __init__(self, network, optimizer, accumulate_step, sens=None):
        super().__init__(network, optimizer, sens)
        if isinstance(accumulate_step, bool) or not isinstance(accumulate_step, numbers.Integral) \
                or accumulate_step < 1:
            raise ValueError(f"For 'GradAccumulationCell', 'accumulate_step' must be an int >= 1, "
                             f"but got {accumulate_step!r}.")
        self.accumulate_step = int(accumulate_step)
        self.accumulated = self.weights.clone(prefix="accumulate", init="zeros")
        self.micro_step = Parameter(Tensor(np.zeros((1,), np.int32)), name="accumulate_step",
                                    requires_grad=False)

    def construct(self, *inputs):
        loss, grads = self._grad_fn(*inputs)
        if self.sens != 1.0:
            grads = tuple([None if g is None else g * self.sens for g in grads])
        grads = self.grad_reducer(grads)
        sums = []
        for acc, g in zip(self.accumulated, grads):
            if g is None:  # a parameter without gradient is skipped, as TrainOneStepCell does
                sums.append(None)
            else:
                total = _graph_value(acc) + ops.cast(g, acc.dtype)
                ops.assign(acc, total)
                sums.append(total)
        count = _graph_value(self.micro_step) + 1
        ops.assign(self.micro_step, count)
        due = ops.equal(ops.reshape(count % self.accumulate_step, ()), 0)
        run_if(due, lambda: self._apply(sums))
        return loss

    def _apply(self, sums):
        """The optimizer on the mean gradient; the buffers back to zero."""
        scale = 1.0 / self.accumulate_step
        self.optimizer(tuple([None if s is None else s * scale for s in sums]))
        for acc, s in zip(self.accumulated, sums):
            if s is not None:
                ops.assign(acc, ops.zeros_like(s))
