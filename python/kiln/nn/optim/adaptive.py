"""RMSProp, Adagrad, ProximalAdagrad, Adadelta and AdaMax with MindSpore's update rules (its
Apply* primitives), state names, initial values and defaults."""
import numpy as np

from kiln import ops
from kiln.common.parameter import Parameter, _copy_into
from kiln.common.tensor import Tensor
from kiln.nn.optim.optimizer import Optimizer, _graph_value

__all__ = ["RMSProp", "Adagrad", "ProximalAdagrad", "Adadelta", "AdaMax"]


def _float(value, who, name, low=None, high=None, low_open=False, high_open=False):
    """A float hyper-parameter (MindSpore checks the type: an int is a TypeError)."""
    if isinstance(value, bool) or not isinstance(value, (float, np.floating)):
        raise TypeError(f"{who}: {name} must be a float, got {type(value).__name__} {value!r}")
    value = float(value)
    bad_low = low is not None and (value <= low if low_open else value < low)
    bad_high = high is not None and (value >= high if high_open else value > high)
    if bad_low or bad_high:
        lo = "" if low is None else ("(" if low_open else "[") + str(low)
        hi = "" if high is None else str(high) + (")" if high_open else "]")
        raise ValueError(f"{who}: {name} must be in {lo}, {hi or 'inf)'}, got {value}")
    return value


def _bool(value, who, name):
    if not isinstance(value, bool):
        raise TypeError(f"{who}: {name} must be a bool, got {value!r}")
    return value


class RMSProp(Optimizer):
    """RMSProp (MindSpore's ApplyRMSProp / ApplyCenteredRMSProp):

        ms = decay * ms + (1 - decay) * g^2                  (mean_square starts at 1)
        mg = decay * mg + (1 - decay) * g                    (centered only)
        mom = momentum * mom + lr * g / sqrt(ms [- mg^2] + epsilon)
        param -= mom
    """

    def __init__(self, params, learning_rate=0.1, decay=0.9, momentum=0.0, epsilon=1e-10,
                 use_locking=False, centered=False, loss_scale=1.0, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        who = "RMSProp"
        self.decay = _float(decay, who, "decay", low=0.0)
        self.momentum = _float(momentum, who, "momentum", low=0.0)
        self.epsilon = _float(epsilon, who, "epsilon", low=0.0, low_open=True)
        self.use_locking = _bool(use_locking, who, "use_locking")
        self.centered = _bool(centered, who, "centered")
        if centered:
            self.mg = self._state("mean_grad")
        self.ms = self._state("mean_square", "ones")
        self.moment = self._state("moment")

    def _update(self, i, param, grad, lr, weight_decay, state):
        ms, mom = _graph_value(self.ms[i]), _graph_value(self.moment[i])
        _copy_into(ms, ms * self.decay + grad * grad * (1.0 - self.decay))
        denom = ms
        if self.centered:
            mg = _graph_value(self.mg[i])
            _copy_into(mg, mg * self.decay + grad * (1.0 - self.decay))
            denom = ms - mg * mg
        _copy_into(mom, mom * self.momentum + grad * lr / ops.sqrt(denom + self.epsilon))
        _copy_into(param, param - mom)


class Adagrad(Optimizer):
    """Adagrad (MindSpore's ApplyAdagrad; no epsilon):

        accum += g^2          (when update_slots; accum starts at `accum`, default 0.1)
        param -= lr * g / sqrt(accum)
    """

    def __init__(self, params, accum=0.1, learning_rate=0.001, update_slots=True,
                 loss_scale=1.0, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.initial_accum = _float(accum, "Adagrad", "accum", low=0.0)
        self.update_slots = _bool(update_slots, "Adagrad", "update_slots")
        self.accum = self._state("accum", self.initial_accum)

    def _update(self, i, param, grad, lr, weight_decay, state):
        accum = _graph_value(self.accum[i])
        if self.update_slots:
            _copy_into(accum, accum + grad * grad)
        _copy_into(param, param - grad * lr / ops.sqrt(accum))


class ProximalAdagrad(Optimizer):
    """Proximal Adagrad, forward-backward splitting (MindSpore's ApplyProximalAdagrad):

        accum += g^2                          (accum starts at `accum`, default 0.1)
        prox = param - lr * g / sqrt(accum)
        param = sign(prox) / (1 + lr * l2) * max(|prox| - lr * l1, 0)
    """

    def __init__(self, params, accum=0.1, learning_rate=0.001, l1=0.0, l2=0.0, use_locking=False,
                 loss_scale=1.0, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        who = "ProximalAdagrad"
        self.initial_accum = _float(accum, who, "accum", low=0.0)
        self.l1 = _float(l1, who, "l1", low=0.0)
        self.l2 = _float(l2, who, "l2", low=0.0)
        self.use_locking = _bool(use_locking, who, "use_locking")
        self.accum = self._state("accum", self.initial_accum)

    def _update(self, i, param, grad, lr, weight_decay, state):
        accum = _graph_value(self.accum[i])
        grown = accum + grad * grad
        _copy_into(accum, grown)
        prox = param - grad * lr / ops.sqrt(grown)
        kept = ops.maximum(ops.abs(prox) - lr * self.l1, 0.0)
        _copy_into(param, ops.sign(prox) * kept / (1.0 + lr * self.l2))


class Adadelta(Optimizer):
    """Adadelta (MindSpore's ApplyAdadelta):

        accum = rho * accum + (1 - rho) * g^2
        update = sqrt(accum_update + epsilon) * g / sqrt(accum + epsilon)
        accum_update = rho * accum_update + (1 - rho) * update^2
        param -= lr * update
    """

    def __init__(self, params, learning_rate=1.0, rho=0.9, epsilon=1e-6, loss_scale=1.0,
                 weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.rho = _float(rho, "Adadelta", "rho", 0.0, 1.0)
        self.epsilon = _float(epsilon, "Adadelta", "epsilon", low=0.0)
        self.accum = self._state("accum")
        self.accum_update = self._state("accum_update")

    def _update(self, i, param, grad, lr, weight_decay, state):
        accum, accum_update = _graph_value(self.accum[i]), _graph_value(self.accum_update[i])
        _copy_into(accum, accum * self.rho + grad * grad * (1.0 - self.rho))
        update = ops.sqrt(accum_update + self.epsilon) * grad / ops.sqrt(accum + self.epsilon)
        _copy_into(accum_update, accum_update * self.rho + update * update * (1.0 - self.rho))
        _copy_into(param, param - update * lr)


class AdaMax(Optimizer):
    """AdaMax (MindSpore's ApplyAdaMax), Adam with the infinity norm:

        beta1_power *= beta1                   (a Parameter starting at 1: beta1^t at step t)
        m = beta1 * m + (1 - beta1) * g;  v = max(beta2 * v, |g|)
        param -= lr / (1 - beta1_power) * m / (v + eps)
    """

    def __init__(self, params, learning_rate=0.001, beta1=0.9, beta2=0.999, eps=1e-08,
                 weight_decay=0.0, loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        who = "AdaMax"
        self.beta1 = _float(beta1, who, "beta1", 0.0, 1.0, True, True)
        self.beta2 = _float(beta2, who, "beta2", 0.0, 1.0, True, True)
        self.eps = _float(eps, who, "eps", low=0.0, low_open=True)
        self.beta1_power = Parameter(Tensor(np.ones((1,), np.float32)), name="beta1_power",
                                     requires_grad=False)
        self.moment1 = self._state("moment1")
        self.moment2 = self._state("moment2")

    def _begin_step(self, step):
        power = _graph_value(self.beta1_power)
        _copy_into(power, power * self.beta1)
        return ops.reshape(power, ())

    def _update(self, i, param, grad, lr, weight_decay, beta1_power):
        m, v = _graph_value(self.moment1[i]), _graph_value(self.moment2[i])
        _copy_into(m, m * self.beta1 + grad * (1.0 - self.beta1))
        _copy_into(v, ops.maximum(v * self.beta2, ops.abs(grad)))
        scale = lr / (1.0 - ops.cast(beta1_power, param.dtype))
        _copy_into(param, param - m / (v + self.eps) * scale)

