"""Learning-rate schedules: Cells mapping the global step to a learning rate (MindSpore's set).
The list-producing helpers are in kiln.nn.dynamic_lr."""
import math
import numbers

import numpy as np

from kiln import _C, ops
from kiln.common import dtype as mstype
from kiln.common.tensor import Tensor
from kiln.nn.cell import Cell
from kiln.ops import _core

__all__ = [
    "LearningRateSchedule", "ExponentialDecayLR", "NaturalExpDecayLR", "InverseDecayLR",
    "CosineDecayLR", "PolynomialDecayLR", "WarmUpLR",
]


def _step_value(global_step):
    if isinstance(global_step, _C.TensorBase):
        return float(np.asarray(global_step.asnumpy()).reshape(-1)[0])
    return float(global_step)


def _step_tensor(global_step):
    """The step as a float64 scalar tensor (a graph value while compiling).

    The schedules compute in float64 (as Python's float math did) and return float32."""
    if not _core.is_tensor(global_step):
        if isinstance(global_step, bool) or not isinstance(global_step, numbers.Real):
            raise TypeError(f"learning-rate schedule: global_step must be a number or a "
                            f"Tensor, got {global_step!r}")
        return Tensor(np.array(global_step, np.float64))
    return ops.cast(ops.reshape(global_step, ()), mstype.float64)


def _out(rate):
    return ops.cast(rate, mstype.float32)


def _positive(value, who, name, allow_zero=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{who}: {name} must be a number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{who}: {name} must be {'>= 0' if allow_zero else '> 0'}, got {value}")
    return value


class LearningRateSchedule(Cell):
    """Base class of learning-rate schedules: calling one with the global step (an int or a
    Tensor) returns the rate as a float32 scalar Tensor.

    The built-in schedules compute with tensor ops (`construct`), so optimizers use them inside
    compiled training steps without recompiling. A subclass may instead define
    ``rate(step) -> float`` with Python math: that needs the step's value, so it works in
    PyNative mode only (in a compiled graph the step is only known when the graph runs, and
    it raises a TypeError saying so); override `construct` with ops to use it in Graph mode.
    """

    def rate(self, step):
        """The rate at `step` (a number) as a Python float."""
        if type(self).construct is LearningRateSchedule.construct:
            raise NotImplementedError(f"{type(self).__name__}: define construct (with ops) "
                                      f"or rate(step)")
        return float(np.asarray(self.construct(step).asnumpy()).reshape(-1)[0])

    def construct(self, global_step):
        return Tensor(np.array(self.rate(_step_value(global_step)), dtype=np.float32))


class ExponentialDecayLR(LearningRateSchedule):
    """lr * decay_rate ^ (step / decay_steps) (floored with is_stair)."""

    def __init__(self, learning_rate, decay_rate, decay_steps, is_stair=False):
        super().__init__()
        who = type(self).__name__
        self.learning_rate = _positive(learning_rate, who, "learning_rate")
        self.decay_rate = _positive(decay_rate, who, "decay_rate")
        self.decay_steps = _core.positive_int_arg(decay_steps, who, "decay_steps")
        self.is_stair = bool(is_stair)

    def _progress(self, global_step):
        p = _step_tensor(global_step) / self.decay_steps
        return ops.floor(p) if self.is_stair else p

    def construct(self, global_step):
        return _out(self.learning_rate * ops.pow(self.decay_rate, self._progress(global_step)))


class NaturalExpDecayLR(ExponentialDecayLR):
    """lr * exp(-decay_rate * p) with p the step itself (MindSpore's rule: not divided by
    decay_steps), or with is_stair the step rounded down to a multiple of decay_steps."""

    def construct(self, global_step):
        p = _step_tensor(global_step)
        if self.is_stair:
            p = ops.floor(p / self.decay_steps) * float(self.decay_steps)
        return _out(self.learning_rate * ops.exp(p * -self.decay_rate))


class InverseDecayLR(ExponentialDecayLR):
    """lr / (1 + decay_rate * step / decay_steps)."""

    def construct(self, global_step):
        return _out(self.learning_rate / (self._progress(global_step) * self.decay_rate + 1.0))


class CosineDecayLR(LearningRateSchedule):
    """min_lr + (max_lr - min_lr) * (1 + cos(pi * min(step, decay_steps) / decay_steps)) / 2."""

    def __init__(self, min_lr, max_lr, decay_steps):
        super().__init__()
        self.min_lr = _positive(min_lr, "CosineDecayLR", "min_lr", allow_zero=True)
        self.max_lr = _positive(max_lr, "CosineDecayLR", "max_lr")
        if self.min_lr >= self.max_lr:
            raise ValueError(f"CosineDecayLR: min_lr ({min_lr}) must be < max_lr ({max_lr})")
        self.decay_steps = _core.positive_int_arg(decay_steps, "CosineDecayLR", "decay_steps")

    def construct(self, global_step):
        p = ops.minimum(_step_tensor(global_step), float(self.decay_steps)) / self.decay_steps
        return _out((ops.cos(p * math.pi) + 1.0) * (0.5 * (self.max_lr - self.min_lr))
                    + self.min_lr)


class PolynomialDecayLR(LearningRateSchedule):
    """(lr - end) * (1 - step / decay_steps) ^ power + end; update_decay_steps extends
    decay_steps to the next multiple past the step."""

    def __init__(self, learning_rate, end_learning_rate, decay_steps, power,
                 update_decay_steps=False):
        super().__init__()
        who = "PolynomialDecayLR"
        self.learning_rate = _positive(learning_rate, who, "learning_rate")
        self.end_learning_rate = _positive(end_learning_rate, who, "end_learning_rate",
                                           allow_zero=True)
        self.decay_steps = _core.positive_int_arg(decay_steps, who, "decay_steps")
        self.power = _positive(power, who, "power")
        self.update_decay_steps = bool(update_decay_steps)

    def construct(self, global_step):
        step = _step_tensor(global_step)
        if self.update_decay_steps:
            # decay_steps * max(ceil(step / decay_steps), 1); ceil(x) = -floor(-x)
            multiple = ops.maximum(-ops.floor(-step / self.decay_steps), 1.0)
            steps = multiple * float(self.decay_steps)
        else:
            step = ops.minimum(step, float(self.decay_steps))
            steps = float(self.decay_steps)
        decay = ops.pow(1.0 - step / steps, self.power)
        return _out(decay * (self.learning_rate - self.end_learning_rate)
                    + self.end_learning_rate)


class WarmUpLR(LearningRateSchedule):
    """lr * min(step, warmup_steps) / warmup_steps."""

    def __init__(self, learning_rate, warmup_steps):
        super().__init__()
        self.learning_rate = _positive(learning_rate, "WarmUpLR", "learning_rate")
        self.warmup_steps = _core.positive_int_arg(warmup_steps, "WarmUpLR", "warmup_steps")

    def construct(self, global_step):
        step = ops.minimum(_step_tensor(global_step), float(self.warmup_steps))
        return _out(step * self.learning_rate / self.warmup_steps)
