"""MindSpore's experimental.optim.lr_scheduler: schedulers that rewrite an experimental
optimizer's per-group lr Parameters on step(), in MindSpore's chained form (each step scales
the last rate) with the closed form for step(epoch). They run eagerly, between training steps."""
import math
import numbers
from collections import Counter

import numpy as np

from kiln.common.parameter import _copy_into
from kiln.common.tensor import Tensor
from kiln.experimental.optim.optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "LinearLR", "ConstantLR",
           "PolynomialLR", "LambdaLR", "MultiplicativeLR", "CosineAnnealingLR"]


def _value(lr):
    return float(np.asarray(lr.asnumpy()).reshape(()))


class LRScheduler:
    """Base class: step() advances last_epoch and writes get_lr() into the optimizer's group
    lrs; get_last_lr() returns them as Tensors."""

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if isinstance(last_epoch, bool) or not isinstance(last_epoch, int) or last_epoch < -1:
            raise ValueError(f"Invalid last_epoch: {last_epoch}")
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", _value(group["lr"]))
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   f"when resuming an optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.optimizer = optimizer
        self._last_lr = list(optimizer.lrs)
        self.groups_num = len(optimizer.param_groups)
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self):
        raise NotImplementedError(f"{type(self).__name__}: a scheduler must define get_lr")

    def get_last_lr(self):
        return [Tensor(lr.asnumpy().copy()) for lr in self._last_lr]

    def _last(self):
        return [_value(lr) for lr in self._last_lr]

    def step(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        for lr, value in zip(self._last_lr, values):
            _copy_into(lr, Tensor(np.array(value, np.float32)))
        return True


def _check_type(value, types, who, name):
    if isinstance(value, bool) or not isinstance(value, types):
        raise TypeError(f"For '{who}', the '{name}' must be {types}, but got {type(value)}.")
    return value


class StepLR(LRScheduler):
    """lr * gamma every step_size epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = _check_type(step_size, int, "StepLR", "step_size")
        self.gamma = _check_type(gamma, float, "StepLR", "gamma")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._last()
        return [lr * self.gamma for lr in self._last()]

    def _get_closed_form_lr(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr * gamma at each milestone (repeated milestones multiply)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        if not isinstance(milestones, list):
            raise TypeError(f"For 'MultiStepLR', 'milestones' must be a list, got "
                            f"{type(milestones)}")
        for m in milestones:
            _check_type(m, int, "MultiStepLR", "milestones")
        self.milestones = Counter(milestones)
        self.gamma = _check_type(gamma, numbers.Real, "MultiStepLR", "gamma")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        count = self.milestones.get(self.last_epoch, 0)
        return [lr * self.gamma ** count for lr in self._last()]

    def _get_closed_form_lr(self):
        passed = sum(c for m, c in self.milestones.items() if m <= self.last_epoch)
        return [b * self.gamma ** passed for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr * gamma every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = _check_type(gamma, float, "ExponentialLR", "gamma")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return self._last()
        return [lr * self.gamma for lr in self._last()]

    def _get_closed_form_lr(self):
        return [b * self.gamma ** self.last_epoch for b in self.base_lrs]


class LinearLR(LRScheduler):
    """The factor moves linearly from start_factor to end_factor over total_iters epochs."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less than or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.total_iters = _check_type(total_iters, int, "LinearLR", "total_iters")
        self.start_factor, self.end_factor = start_factor, end_factor
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in self._last()]
        if self.last_epoch > self.total_iters:
            return self._last()
        delta = self.end_factor - self.start_factor
        factor = 1.0 + delta / (self.total_iters * self.start_factor +
                                (self.last_epoch - 1) * delta)
        return [lr * factor for lr in self._last()]

    def _get_closed_form_lr(self):
        span = min(self.total_iters, self.last_epoch) / self.total_iters
        return [b * (self.start_factor + (self.end_factor - self.start_factor) * span)
                for b in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr * factor until total_iters epochs, then lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.total_iters = _check_type(total_iters, int, "ConstantLR", "total_iters")
        self.factor = factor
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._last()]
        if self.last_epoch != self.total_iters:
            return self._last()
        return [lr / self.factor for lr in self._last()]

    def _get_closed_form_lr(self):
        done = self.last_epoch >= self.total_iters
        return [b * (self.factor + done * (1 - self.factor)) for b in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr * (1 - epoch / total_iters)^power, reaching 0 at total_iters."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.power = _check_type(power, float, "PolynomialLR", "power")
        if power < 0:
            raise ValueError(f"For 'PolynomialLR', the 'power' must be >= 0, but got {power}.")
        self.total_iters = _check_type(total_iters, int, "PolynomialLR", "total_iters")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch > self.total_iters:
            return self._last()
        factor = ((1.0 - self.last_epoch / self.total_iters) /
                  (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [lr * factor for lr in self._last()]

    def _get_closed_form_lr(self):
        return [b * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
                for b in self.base_lrs]


def _lambdas(optimizer, lr_lambda):
    count = len(optimizer.param_groups)
    if isinstance(lr_lambda, (list, tuple)):
        if len(lr_lambda) != count:
            raise ValueError(f"Expected {count} lr_lambdas, but got {len(lr_lambda)}")
        return list(lr_lambda)
    return [lr_lambda] * count


class LambdaLR(LRScheduler):
    """initial lr * lr_lambda(epoch) (one function, or one per group)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [b * f(self.last_epoch) for f, b in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(LRScheduler):
    """lr * lr_lambda(epoch) every epoch after the first."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch > 0:
            return [lr * f(self.last_epoch) for f, lr in zip(self.lr_lambdas, self._last())]
        return self._last()


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the initial lr to eta_min over T_max epochs (and back up
    after), in MindSpore's chained form."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):  # noqa: N803
        self.eta_min = _check_type(eta_min, numbers.Real, "CosineAnnealingLR", "eta_min")
        self.T_max = _check_type(T_max, int, "CosineAnnealingLR", "T_max")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        t, span = self.last_epoch, self.T_max
        if t == 0:
            return self._last()
        if (t - 1 - span) % (2 * span) == 0:
            pct = float(np.float32(math.pi / span))
            return [lr + (b - self.eta_min) * (1 - math.cos(pct)) / 2
                    for b, lr in zip(self.base_lrs, self._last())]
        return [(1 + math.cos(math.pi * t / span)) / (1 + math.cos(math.pi * (t - 1) / span)) *
                (lr - self.eta_min) + self.eta_min for lr in self._last()]

    def _get_closed_form_lr(self):
        return [self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch /
                                                                 self.T_max)) / 2
                for b in self.base_lrs]
