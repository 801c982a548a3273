"""SGD (with momentum, dampening, Nesterov) and Momentum, with MindSpore's update rules."""
import numbers

import numpy as np

from kiln import ops
from kiln.common.parameter import Parameter, _copy_into
from kiln.common.tensor import Tensor
from kiln.nn.optim.optimizer import Optimizer, _graph_value
from kiln.ops._core import call

__all__ = ["SGD", "Momentum"]


def _check_float(value, who, name, low=0.0, high=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{who}: {name} must be a float, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{who}: {name} must be {bound}, got {value}")
    return float(value)


def _momentum_parameter(value):
    """MindSpore keeps momentum as a Parameter named "momentum", so its checkpoints carry it; kiln
    saves and loads it under that name (the step uses the constructor's value)."""
    return Parameter(Tensor(np.array(value, np.float32)), name="momentum", requires_grad=False)


class SGD(Optimizer):
    """Stochastic gradient descent (MindSpore's ApplySGD):

        g = grad + weight_decay * param
        accum = g where stat is set (the first step), else momentum * accum + (1 - dampening) * g
        g = g + momentum * accum if nesterov else accum        (when momentum > 0)
        param -= lr * g;  stat = 0
    State as MindSpore names it: accum.<param>, stat.<param> (ones until the first step) and the
    Parameter momentum.
    """

    def __init__(self, params, learning_rate=0.1, momentum=0.0, dampening=0.0,
                 weight_decay=0.0, nesterov=False, loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.momentum = _check_float(momentum, "SGD", "momentum")
        self.dampening = _check_float(dampening, "SGD", "dampening")
        if not isinstance(nesterov, bool):
            raise TypeError(f"SGD: nesterov must be a bool, got {nesterov!r}")
        if nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ValueError(f"SGD: nesterov needs momentum > 0 and dampening = 0, got "
                             f"momentum={momentum}, dampening={dampening}")
        self.nesterov = nesterov
        self.momentum_param = _momentum_parameter(self.momentum)
        self.accum = self._state("accum")
        self.stat = self._state("stat", "ones")

    def _update(self, i, param, grad, lr, weight_decay, state):
        # The first step starts the buffer at g; decided at run time from stat (which
        # checkpoints save, as MindSpore's do), so a compiled step does not depend on it.
        stat = _graph_value(self.stat[i])
        if self._fuses(param):
            call("apply_sgd", (param, _graph_value(self.accum[i]), stat, lr, grad),
                 (self.momentum, self.dampening, self.nesterov))
            return
        if self.momentum > 0:
            accum = _graph_value(self.accum[i])
            later = accum * self.momentum + grad * (1.0 - self.dampening)
            _copy_into(accum, ops.where(stat > 0, grad, later))
            grad = grad + accum * self.momentum if self.nesterov else accum
        _copy_into(param, param - grad * lr)
        _copy_into(stat, ops.zeros_like(stat))


class Momentum(Optimizer):
    """Momentum (MindSpore's ApplyMomentum):

        g = grad + weight_decay * param
        accum = momentum * accum + g
        param -= lr * (g + momentum * accum) if use_nesterov else lr * accum
    State as MindSpore names it: moments.<param> and the Parameter momentum.
    """

    def __init__(self, params, learning_rate, momentum, weight_decay=0.0, loss_scale=1.0,
                 use_nesterov=False):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.momentum = _check_float(momentum, "Momentum", "momentum")
        if not isinstance(use_nesterov, bool):
            raise TypeError(f"Momentum: use_nesterov must be a bool, got {use_nesterov!r}")
        self.use_nesterov = use_nesterov
        self.momentum_param = _momentum_parameter(self.momentum)
        self.moments = self._state("moments")

    def _update(self, i, param, grad, lr, weight_decay, state):
        accum = _graph_value(self.moments[i])
        if self._fuses(param):
            # One fused in-place pass over param and accum (MindSpore's ApplyMomentum).
            ops.apply_momentum(param, accum, lr, grad, self.momentum, self.use_nesterov)
            return
        _copy_into(accum, accum * self.momentum + grad)
        step = grad + accum * self.momentum if self.use_nesterov else accum
        _copy_into(param, param - step * lr)
