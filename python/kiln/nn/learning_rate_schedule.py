"""Learning-rate schedules: Cells mapping the global step to a learning rate (MindSpore's set),
plus the list-producing `dynamic_lr` helpers."""
import math
import numbers

import numpy as np

from kiln import _C
from kiln.common.tensor import Tensor
from kiln.nn.cell import Cell

__all__ = [
    "LearningRateSchedule", "ExponentialDecayLR", "NaturalExpDecayLR", "InverseDecayLR",
    "CosineDecayLR", "PolynomialDecayLR", "WarmUpLR", "piecewise_constant_lr",
    "exponential_decay_lr", "cosine_decay_lr", "warmup_lr",
]


def _step_value(global_step):
    if isinstance(global_step, _C.TensorBase):
        return float(np.asarray(global_step.asnumpy()).reshape(-1)[0])
    return float(global_step)


def _positive(value, who, name, allow_zero=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{who}: {name} must be a number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{who}: {name} must be {'>= 0' if allow_zero else '> 0'}, got {value}")
    return value


class LearningRateSchedule(Cell):
    """Base class: subclasses compute `self.rate(step)` (a float); calling with the global step
    (an int or a Tensor) returns a float32 scalar Tensor."""

    def rate(self, step):
        raise NotImplementedError

    def construct(self, global_step):
        return Tensor(np.array(self.rate(_step_value(global_step)), dtype=np.float32))


class ExponentialDecayLR(LearningRateSchedule):
    """lr * decay_rate ^ (step / decay_steps) (floored with is_stair)."""

    def __init__(self, learning_rate, decay_rate, decay_steps, is_stair=False):
        super().__init__()
        who = "ExponentialDecayLR"
        self.learning_rate = _positive(learning_rate, who, "learning_rate")
        self.decay_rate = _positive(decay_rate, who, "decay_rate")
        self.decay_steps = int(_positive(decay_steps, who, "decay_steps"))
        self.is_stair = bool(is_stair)

    def rate(self, step):
        p = step / self.decay_steps
        return self.learning_rate * self.decay_rate ** (math.floor(p) if self.is_stair else p)


class NaturalExpDecayLR(ExponentialDecayLR):
    """lr * exp(-decay_rate * step / decay_steps)."""

    def rate(self, step):
        p = step / self.decay_steps
        return self.learning_rate * math.exp(-self.decay_rate * (math.floor(p) if self.is_stair
                                                                  else p))


class InverseDecayLR(ExponentialDecayLR):
    """lr / (1 + decay_rate * step / decay_steps)."""

    def rate(self, step):
        p = step / self.decay_steps
        return self.learning_rate / (1 + self.decay_rate * (math.floor(p) if self.is_stair
                                                            else p))


class CosineDecayLR(LearningRateSchedule):
    """min_lr + (max_lr - min_lr) * (1 + cos(pi * min(step, decay_steps) / decay_steps)) / 2."""

    def __init__(self, min_lr, max_lr, decay_steps):
        super().__init__()
        self.min_lr = _positive(min_lr, "CosineDecayLR", "min_lr", allow_zero=True)
        self.max_lr = _positive(max_lr, "CosineDecayLR", "max_lr")
        if self.min_lr >= self.max_lr:
            raise ValueError(f"CosineDecayLR: min_lr ({min_lr}) must be < max_lr ({max_lr})")
        self.decay_steps = int(_positive(decay_steps, "CosineDecayLR", "decay_steps"))

    def rate(self, step):
        p = min(step, self.decay_steps) / self.decay_steps
        return self.min_lr + 0.5 * (self.max_lr - self.min_lr) * (1 + math.cos(math.pi * p))


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
        self.decay_steps = int(_positive(decay_steps, who, "decay_steps"))
        self.power = _positive(power, who, "power")
        self.update_decay_steps = bool(update_decay_steps)

    def rate(self, step):
        steps = self.decay_steps
        if self.update_decay_steps:
            steps = steps * max(math.ceil(step / steps), 1)
        else:
            step = min(step, steps)
        return ((self.learning_rate - self.end_learning_rate) * (1 - step / steps) ** self.power
                + self.end_learning_rate)


class WarmUpLR(LearningRateSchedule):
    """lr * min(step, warmup_steps) / warmup_steps."""

    def __init__(self, learning_rate, warmup_steps):
        super().__init__()
        self.learning_rate = _positive(learning_rate, "WarmUpLR", "learning_rate")
        self.warmup_steps = int(_positive(warmup_steps, "WarmUpLR", "warmup_steps"))

    def rate(self, step):
        return self.learning_rate * min(step, self.warmup_steps) / self.warmup_steps


# ---- dynamic_lr: lists with one learning rate per step ----

def piecewise_constant_lr(milestone, learning_rates):
    """[lr_0] * milestone[0] + [lr_1] * (milestone[1] - milestone[0]) + ..."""
    if len(milestone) != len(learning_rates):
        raise ValueError(f"piecewise_constant_lr: milestone and learning_rates must have the "
                         f"same length, got {len(milestone)} and {len(learning_rates)}")
    out, last = [], 0
    for m, lr in zip(milestone, learning_rates):
        if m <= last:
            raise ValueError(f"piecewise_constant_lr: milestone must be increasing, got "
                             f"{milestone}")
        out += [lr] * (m - last)
        last = m
    return out


def exponential_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                         is_stair=False):
    out = []
    for i in range(total_step):
        p = (i // step_per_epoch) / decay_epoch
        out.append(learning_rate * decay_rate ** (math.floor(p) if is_stair else p))
    return out


def cosine_decay_lr(min_lr, max_lr, total_step, step_per_epoch, decay_epoch):
    out = []
    for i in range(total_step):
        epoch = min(i // step_per_epoch, decay_epoch)
        out.append(min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * epoch /
                                                                     decay_epoch)))
    return out


def warmup_lr(learning_rate, total_step, step_per_epoch, warmup_epoch):
    return [learning_rate * min(i // step_per_epoch + 1, warmup_epoch) / warmup_epoch
            for i in range(total_step)]

