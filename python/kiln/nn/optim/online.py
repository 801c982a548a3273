"""Lamb, FTRL, ASGD and Rprop with MindSpore's update rules, state names and defaults. MindSpore
advances global_step before these updates, so the step they see is t = global_step + 1."""
import numpy as np

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.parameter import Parameter, ParameterTuple, _copy_into
from kiln.common.tensor import Tensor
from kiln.nn.optim.adaptive import _bool, _float
from kiln.nn.optim.optimizer import Optimizer, _graph_value
from kiln.ops import _core

__all__ = ["Lamb", "FTRL", "ASGD", "Rprop"]


def _norm(x):
    return ops.sqrt(ops.sum(x * x))


class Lamb(Optimizer):
    """LAMB (layer-wise adaptive moments), MindSpore's rule:

        m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g^2
        update = m / (1 - beta1^t) / (sqrt(v / (1 - beta2^t)) + eps) + weight_decay * param
        trust = ||param|| / ||update|| when ||param|| > 0 and ||g|| > 0, else 1; clipped to
        [0, 10]
        param -= lr * trust * update
    Weight decay is part of the update (not added to the gradient)."""

    _decoupled_weight_decay = True

    def __init__(self, params, learning_rate, beta1=0.9, beta2=0.999, eps=1e-6,
                 weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay)
        self.beta1 = _float(beta1, "Lamb", "beta1", 0.0, 1.0, True, True)
        self.beta2 = _float(beta2, "Lamb", "beta2", 0.0, 1.0, True, True)
        self.eps = _float(eps, "Lamb", "eps", low=0.0, low_open=True)
        self.moments1 = self._state("lamb_m")
        self.moments2 = self._state("lamb_v")

    def _begin_step(self, step):
        t = ops.cast(step, mstype.float64) + 1.0
        return (ops.cast(1.0 - ops.pow(self.beta1, t), mstype.float32),
                ops.cast(1.0 - ops.pow(self.beta2, t), mstype.float32))

    def _update(self, i, param, grad, lr, weight_decay, corrections):
        bc1, bc2 = (ops.cast(c, param.dtype) for c in corrections)
        m, v = _graph_value(self.moments1[i]), _graph_value(self.moments2[i])
        _copy_into(m, m * self.beta1 + grad * (1.0 - self.beta1))
        _copy_into(v, v * self.beta2 + grad * grad * (1.0 - self.beta2))
        update = (m / bc1) / (ops.sqrt(v / bc2) + self.eps)
        if _core.is_tensor(weight_decay) or weight_decay:
            update = update + param * weight_decay
        w_norm, g_norm, u_norm = _norm(param), _norm(grad), _norm(update)
        usable = ops.logical_and(w_norm > 0, g_norm > 0)
        # The ratio's denominator is made 1 where the ratio is not used (no 0 / 0 computed).
        ratio = w_norm / ops.where(usable, u_norm, 1.0)
        trust = ops.clamp(ops.where(usable, ratio, 1.0), 0.0, 10.0)
        _copy_into(param, param - update * (trust * lr))


class FTRL(Optimizer):
    """FTRL-proximal (MindSpore's ApplyFtrl), with p = lr_power (<= 0):

        accum_new = accum + g^2
        linear += g - (accum_new^-p - accum^-p) / lr * param
        param = (sign(linear) * l1 - linear) / (accum_new^-p / lr + 2 * l2) if |linear| > l1
                else 0
    learning_rate is a fixed float (MindSpore supports no dynamic or group rates here)."""

    def __init__(self, params, initial_accum=0.1, learning_rate=0.001, lr_power=-0.5, l1=0.0,
                 l2=0.0, use_locking=False, loss_scale=1.0, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        who = "FTRL"
        if self.dynamic_lr or self.is_group_lr:
            raise ValueError(f"{who}: dynamic or group learning rates are not supported")
        self.initial_accum = _float(initial_accum, who, "initial_accum", low=0.0)
        self.lr = _float(learning_rate, who, "learning_rate", low=0.0, low_open=True)
        self.lr_power = _float(lr_power, who, "lr_power", high=0.0)
        self.l1 = _float(l1, who, "l1", low=0.0)
        self.l2 = _float(l2, who, "l2", low=0.0)
        self.use_locking = _bool(use_locking, who, "use_locking")
        self.moments = self._state("moments", self.initial_accum)
        self.linear = self._state("linear")

    def _update(self, i, param, grad, lr, weight_decay, state):
        accum, linear = _graph_value(self.moments[i]), _graph_value(self.linear[i])
        power = -self.lr_power
        accum_new = accum + grad * grad
        new_pow = ops.pow(accum_new, power)
        sigma = (new_pow - ops.pow(accum, power)) / self.lr
        lin = linear + grad - sigma * param
        _copy_into(linear, lin)
        quadratic = new_pow / self.lr + 2.0 * self.l2
        shrunk = (ops.sign(lin) * self.l1 - lin) / quadratic
        _copy_into(param, ops.where(ops.abs(lin) > self.l1, shrunk, 0.0))
        _copy_into(accum, accum_new)


class ASGD(Optimizer):
    """Averaged SGD (MindSpore's rule), with t the step (1 on the first update):

        eta = lr on the first step
        param = param * (1 - lambd * eta) - eta * g
        ax = ax + (param - ax) * mu if mu != 1 else param
        eta = lr / (1 + lambd * lr * t)^alpha;  mu = 1 / max(1, t - t0)
    eta ('eta_<name>', starts at 0) and mu ('mu_<name>', starts at 1) are per-parameter."""

    def __init__(self, params, learning_rate=0.1, lambd=1e-4, alpha=0.75, t0=1e6,
                 weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay)
        self.lambd = _float(lambd, "ASGD", "lambd")
        self.alpha = _float(alpha, "ASGD", "alpha")
        self.t0 = _float(t0, "ASGD", "t0")
        self.mu = ParameterTuple([Parameter(Tensor(np.array(1.0, np.float32)),
                                            name=f"mu_{p.name}", requires_grad=False)
                                  for p in self.parameters])
        self.eta = ParameterTuple([Parameter(Tensor(np.array(0.0, np.float32)),
                                             name=f"eta_{p.name}", requires_grad=False)
                                   for p in self.parameters])
        self.ax = self._state("ax_")

    def _begin_step(self, step):
        return ops.cast(step, mstype.float32) + 1.0

    def _update(self, i, param, grad, lr, weight_decay, t):
        mu, eta, ax = (_graph_value(s[i]) for s in (self.mu, self.eta, self.ax))
        lr = ops.cast(lr, mstype.float32) if _core.is_tensor(lr) else float(lr)
        eta_now = ops.where(t == 1.0, lr, eta)
        new = param * (1.0 - self.lambd * ops.cast(eta_now, param.dtype)) - \
            grad * ops.cast(eta_now, param.dtype)
        _copy_into(param, new)
        averaged = ax + (new - ax) * ops.cast(mu, ax.dtype)
        _copy_into(ax, ops.where(mu != 1.0, averaged, new))
        _copy_into(eta, ops.reshape(lr / ops.pow(1.0 + self.lambd * lr * t, self.alpha), ()))
        _copy_into(mu, ops.reshape(1.0 / ops.maximum(t - self.t0, 1.0), ()))


class Rprop(Optimizer):
    """Resilient backpropagation (MindSpore's rule): per element, the step size grows by
    etaplus while the gradient keeps its sign, shrinks by etaminus when it flips (and that
    step is skipped), within step_sizes; param -= sign(g) * step_size. Step sizes start at
    the learning rate on the first step."""

    def __init__(self, params, learning_rate=0.1, etas=(0.5, 1.2), step_sizes=(1e-6, 50.),
                 weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay)
        for name, value in (("etas", etas), ("step_sizes", step_sizes)):
            if not isinstance(value, tuple):
                raise TypeError(f"Rprop: {name} must be a tuple, got {type(value).__name__}")
            if len(value) != 2:
                raise ValueError(f"Rprop: {name} must be a tuple of 2 floats, got {value!r}")
        if step_sizes[0] > step_sizes[1]:
            raise ValueError(f"Rprop: the maximal step size must not be below the minimal one, "
                             f"got {step_sizes}")
        self.etaminus = _float(etas[0], "Rprop", "etaminus", 0.0, 1.0, True, True)
        self.etaplus = _float(etas[1], "Rprop", "etaplus")
        if self.etaplus <= 1.0:
            raise ValueError(f"Rprop: etaplus must be > 1.0, got {etas[1]}")
        self.step_size_min = _float(step_sizes[0], "Rprop", "min_step_sizes")
        self.step_size_max = _float(step_sizes[1], "Rprop", "max_step_sizes")
        self.prev = self._state("prev")
        self.step_size = self._state("step_size")

    def _begin_step(self, step):
        return step == 0

    def _update(self, i, param, grad, lr, weight_decay, first):
        prev, size_state = _graph_value(self.prev[i]), _graph_value(self.step_size[i])
        size = ops.where(first, ops.ones_like(size_state) * lr, size_state)
        trend = ops.sign(grad * prev)
        factor = ops.where(trend > 0, self.etaplus, ops.where(trend < 0, self.etaminus, 1.0))
        factor = ops.cast(factor, param.dtype)
        size = ops.clamp(size * factor, self.step_size_min, self.step_size_max)
        step_grad = ops.where(factor == self.etaminus, 0.0, grad)
        _copy_into(param, param - ops.sign(step_grad) * size)
        _copy_into(prev, ops.cast(step_grad, prev.dtype))
        _copy_into(size_state, size)
