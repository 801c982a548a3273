"""Loss scaling for mixed-precision training (MindSpore's names and rules):
DynamicLossScaleUpdateCell, FixedLossScaleUpdateCell and TrainOneStepWithLossScaleCell, which
scales the loss, unscales the gradients, detects overflow and skips the update on overflow (a
graph `if` in compiled code)."""
import numbers

import numpy as np

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.parameter import Parameter, _copy_into
from kiln.common.tensor import Tensor
from kiln.nn._loops import run_if
from kiln.nn.cell import Cell
from kiln.nn.optim.optimizer import _graph_value
from kiln.nn.wrap.cell_wrapper import TrainOneStepCell
from kiln.ops.composite import value_and_grad

__all__ = ["DynamicLossScaleUpdateCell", "FixedLossScaleUpdateCell",
           "TrainOneStepWithLossScaleCell"]


class DynamicLossScaleUpdateCell(Cell):
    """On overflow: loss_scale = max(loss_scale / scale_factor, 1); after scale_window steps
    without overflow: loss_scale *= scale_factor. construct(loss_scale, overflow) updates the
    loss_scale Parameter in place and returns overflow."""

    def __init__(self, loss_scale_value, scale_factor, scale_window):
        super().__init__()
        for name, value in (("loss_scale_value", loss_scale_value),
                            ("scale_factor", scale_factor)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"DynamicLossScaleUpdateCell: {name} must be a number, got "
                                f"{value!r}")
        if isinstance(scale_window, bool) or not isinstance(scale_window, int):
            raise TypeError(f"DynamicLossScaleUpdateCell: scale_window must be an int, got "
                            f"{scale_window!r}")
        self.loss_scale_value = loss_scale_value
        self.scale_factor = float(scale_factor)
        self.scale_window = scale_window
        self.cur_iter = Parameter(Tensor(np.array(1, np.int32)), name="current_iterator_step",
                                  requires_grad=False)
        self.last_overflow_iter = Parameter(Tensor(np.array(0, np.int32)),
                                            name="last_overflow_iterator_step",
                                            requires_grad=False)

    def get_loss_scale(self):
        return self.loss_scale_value

    def construct(self, loss_scale, overflow):
        cur, last = _graph_value(self.cur_iter), _graph_value(self.last_overflow_iter)
        scale = _graph_value(loss_scale)
        on_overflow = ops.where(overflow, ops.maximum(scale / self.scale_factor, 1.0), scale)
        should_inc = (cur - last) >= self.scale_window
        _copy_into(last, ops.where(ops.logical_or(overflow, should_inc), cur, last))
        grow = ops.logical_and(should_inc, ops.logical_not(overflow))
        _copy_into(scale, ops.where(grow, on_overflow * self.scale_factor, on_overflow))
        _copy_into(cur, cur + 1)
        return overflow


class FixedLossScaleUpdateCell(Cell):
    """A constant loss scale: construct(loss_scale, overflow) returns overflow."""

    def __init__(self, loss_scale_value):
        super().__init__()
        if isinstance(loss_scale_value, bool) or not isinstance(loss_scale_value,
                                                                numbers.Real):
            raise TypeError(f"FixedLossScaleUpdateCell: loss_scale_value must be a number, got "
                            f"{loss_scale_value!r}")
        self.loss_scale_value = loss_scale_value

    def get_loss_scale(self):
        return self.loss_scale_value

    def construct(self, _, overflow):
        return overflow


def _overflowed(grads):
    """True when some gradient holds an inf or a NaN (x - x is NaN exactly there)."""
    flags = [ops.logical_not(ops.equal(g - g, 0).all()) for g in grads if g is not None]
    if not flags:
        return Tensor(np.array(False))
    out = flags[0]
    for f in flags[1:]:
        out = ops.logical_or(out, f)
    return out


class TrainOneStepWithLossScaleCell(TrainOneStepCell):
    """One training step with loss scaling: gradients of loss * scale_sense, divided by
    scale_sense; the optimizer runs only when no gradient overflowed. scale_sense is a
    loss-scale update Cell (whose state then changes each step) or a Tensor of shape () or
    (1,). Returns (loss, overflow, scale_sense)."""

    def __init__(self, network, optimizer, scale_sense):
        super().__init__(network, optimizer)
        self.loss_scaling_manager = None
        if isinstance(scale_sense, Cell):
            self.loss_scaling_manager = scale_sense
            value = np.array(scale_sense.get_loss_scale(), np.float32)
            self.scale_sense = Parameter(Tensor(value), name="scale_sense", requires_grad=False)
        elif isinstance(scale_sense, Tensor):
            if tuple(scale_sense.shape) not in ((), (1,)):
                raise ValueError(f"For 'TrainOneStepWithLossScaleCell', the shape of "
                                 f"'scale_sense' must be (1,) or (), but got "
                                 f"{tuple(scale_sense.shape)}.")
            self.scale_sense = Parameter(ops.cast(scale_sense, mstype.float32),
                                         name="scale_sense", requires_grad=False)
        else:
            raise TypeError(f"For 'TrainOneStepWithLossScaleCell', the 'scale_sense' must be "
                            f"Cell or Tensor, but got 'scale_sense' type: "
                            f"{type(scale_sense).__name__}.")
        self._scaled_grad_fn = value_and_grad(self._scaled_loss, None, self.weights,
                                              has_aux=True)

    def _scaled_loss(self, *inputs):
        # d(loss * s)/dw = s * dloss/dw: MindSpore's sens of ones_like(loss) * s. The loss
        # itself rides along as the auxiliary output (it is what the step returns).
        loss = self.network(*inputs)
        scale = ops.cast(ops.reshape(_graph_value(self.scale_sense), ()), loss.dtype)
        return loss * scale, loss

    def set_sense_scale(self, sens):
        if not isinstance(sens, Tensor):
            raise TypeError(f"For 'TrainOneStepWithLossScaleCell', the type of 'sens' must be "
                            f"Tensor, but got {type(sens).__name__}")
        self.scale_sense.set_data(ops.cast(sens, mstype.float32))

    def start_overflow_check(self, pre_cond, compute_input):
        """Starts overflow detection before `compute_input` is computed on. kiln detects
        overflow from the values themselves (get_overflow_status), so there is no device status
        to clear: returns (a zero int32 status of shape (8,), compute_input), the pair MindSpore's
        subclasses thread through."""
        return Tensor(np.zeros(8, np.int32)), compute_input

    def get_overflow_status(self, status, compute_output):
        """A bool Tensor of shape (): True when a tensor of compute_output (gradients) holds an
        inf or a NaN."""
        return _overflowed(compute_output)

    def process_loss_scale(self, overflow):
        """Runs the loss-scale update Cell (when scale_sense is one) on this step's overflow
        flag; returns the flag (the update cell's answer)."""
        if self.loss_scaling_manager is None:
            return overflow
        return self.loss_scaling_manager(_graph_value(self.scale_sense), overflow)

    def construct(self, *inputs):
        scale = _graph_value(self.scale_sense)
        used = scale * 1.0  # the scale of this step (the manager may update the Parameter)
        status, inputs = self.start_overflow_check(used, inputs)
        (_, loss), grads = self._scaled_grad_fn(*inputs)
        inverse = 1.0 / ops.reshape(scale, ())
        # (A list comprehension, not a generator: a top-level Cell's construct compiles from
        # source in GRAPH_MODE.)
        grads = self.grad_reducer(tuple([None if g is None else g * ops.cast(inverse, g.dtype)
                                         for g in grads]))
        cond = self.get_overflow_status(status, grads)
        overflow = self.process_loss_scale(cond)
        run_if(ops.logical_not(overflow), lambda: self.optimizer(grads))
        return loss, cond, used
