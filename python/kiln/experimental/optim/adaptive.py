"""experimental.optim RMSprop, Adagrad, Adadelta and Adamax (MindSpore's PyTorch-style
arguments; update rules as MindSpore computes them). L2 weight decay is added to the gradient
first, and maximize negates it."""
import numpy as np

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.parameter import Parameter, _copy_into
from kiln.common.tensor import Tensor
from kiln.experimental.optim.optimizer import Optimizer
from kiln.nn.optim.optimizer import _graph_value

__all__ = ["RMSprop", "Adagrad", "Adadelta", "Adamax"]


def _positive(value, who, name, allow_zero=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"For '{who}', the '{name}' must be a number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"For '{who}', the '{name}' must be {'>=' if allow_zero else '>'} 0, "
                         f"but got {value}.")
    return value


def _decayed(p, g, group):
    return g + p * group["weight_decay"] if group["weight_decay"] else g


class RMSprop(Optimizer):
    """ms = alpha * ms + (1 - alpha) * g^2; avg = sqrt(ms [- mg^2]) + eps; with momentum
    buf = momentum * buf + g / avg and p -= lr * buf, else p -= lr * g / avg."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False, maximize=False):
        _positive(lr, "RMSprop", "lr")
        _positive(alpha, "RMSprop", "alpha", True)
        _positive(eps, "RMSprop", "eps")
        _positive(momentum, "RMSprop", "momentum", True)
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                                      centered=centered, weight_decay=weight_decay,
                                      maximize=maximize))
        self.mean_grad = self.parameters.clone(prefix="mean_grad", init="zeros")
        self.mean_square = self.parameters.clone(prefix="mean_square", init="zeros")
        self.moment = self.parameters.clone(prefix="moment", init="zeros")

    def construct(self, gradients):
        for group, index, grads, lr in self._groups(gradients):
            alpha, eps, momentum = group["alpha"], group["eps"], group["momentum"]
            for i, g in zip(index, grads):
                p = _graph_value(self.parameters[i])
                g = _decayed(p, g, group)
                ms_ = _graph_value(self.mean_square[i])
                _copy_into(ms_, ms_ * alpha + g * g * (1 - alpha))
                if group["centered"]:
                    mg = _graph_value(self.mean_grad[i])
                    _copy_into(mg, mg * alpha + g * (1 - alpha))
                    avg = ops.sqrt(ms_ - mg * mg) + eps
                else:
                    avg = ops.sqrt(ms_) + eps
                lr_p = ops.cast(lr, p.dtype)
                if momentum > 0:
                    buf = _graph_value(self.moment[i])
                    _copy_into(buf, buf * momentum + g / avg)
                    _copy_into(p, p - buf * lr_p)
                else:
                    _copy_into(p, p - g / avg * lr_p)
        return True


class Adagrad(Optimizer):
    """accum += g^2; p -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(accum) + eps), t the
    step."""

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                 initial_accumulator_value=0.0, eps=1e-10, *, maximize=False):
        _positive(lr, "Adagrad", "lr")
        _positive(lr_decay, "Adagrad", "lr_decay", True)
        _positive(initial_accumulator_value, "Adagrad", "initial_accumulator_value", True)
        _positive(eps, "Adagrad", "eps", True)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      maximize=maximize))
        self.accum = self.parameters.clone(prefix="accum", init=float(initial_accumulator_value))
        self.step_t = Parameter(Tensor(np.array(0, np.int32)), "step_t", requires_grad=False)

    def construct(self, gradients):
        step = _graph_value(self.step_t)
        done = ops.cast(step, mstype.float32)
        for group, index, grads, lr in self._groups(gradients):
            decay_lr = lr / (done * group["lr_decay"] + 1.0)
            for i, g in zip(index, grads):
                p = _graph_value(self.parameters[i])
                g = _decayed(p, g, group)
                acc = _graph_value(self.accum[i])
                _copy_into(acc, acc + g * g)
                _copy_into(p, p - g / (ops.sqrt(acc) + group["eps"]) *
                           ops.cast(decay_lr, p.dtype))
        _copy_into(step, step + 1)
        return True


class Adadelta(Optimizer):
    """MindSpore's ApplyAdadelta: accum = rho * accum + (1 - rho) * g^2; update =
    sqrt(accum_update + eps) * g / sqrt(accum + eps); accum_update = rho * accum_update +
    (1 - rho) * update^2; p -= lr * update."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, *, maximize=False):
        _positive(lr, "Adadelta", "lr")
        _positive(eps, "Adadelta", "eps")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"For 'Adadelta', the 'rho' must be in [0, 1], but got {rho}.")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))
        self.accum = self.parameters.clone(prefix="accum", init=0.0)
        self.accum_update = self.parameters.clone(prefix="accum_update", init=0.0)

    def construct(self, gradients):
        for group, index, grads, lr in self._groups(gradients):
            rho, eps = group["rho"], group["eps"]
            for i, g in zip(index, grads):
                p = _graph_value(self.parameters[i])
                g = _decayed(p, g, group)
                acc, upd = _graph_value(self.accum[i]), _graph_value(self.accum_update[i])
                _copy_into(acc, acc * rho + g * g * (1 - rho))
                update = ops.sqrt(upd + eps) * g / ops.sqrt(acc + eps)
                _copy_into(upd, upd * rho + update * update * (1 - rho))
                _copy_into(p, p - update * ops.cast(lr, p.dtype))
        return True


class Adamax(Optimizer):
    """m = beta1 * m + (1 - beta1) * g; u = max(beta2 * u, |g| + eps);
    p -= lr / (1 - beta1^t) * m / u."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, *,
                 maximize=False):
        _positive(lr, "Adamax", "lr")
        _positive(eps, "Adamax", "eps")
        for b in betas:
            if not 0.0 <= b < 1.0:
                raise ValueError(f"For 'Adamax', the betas must be in [0, 1), got {betas}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))
        self.step_t = Parameter(Tensor(np.array(0, np.int32)), "step_t", requires_grad=False)
        self.exp_avg = self.parameters.clone(prefix="exp_avg", init="zeros")
        self.exp_inf = self.parameters.clone(prefix="exp_inf", init="zeros")

    def construct(self, gradients):
        step = _graph_value(self.step_t)
        _copy_into(step, step + 1)
        t = ops.cast(step, mstype.float32)
        for group, index, grads, lr in self._groups(gradients):
            beta1, beta2 = group["betas"]
            clr = lr / (1.0 - ops.pow(beta1, t))
            for i, g in zip(index, grads):
                p = _graph_value(self.parameters[i])
                g = _decayed(p, g, group)
                m, u = _graph_value(self.exp_avg[i]), _graph_value(self.exp_inf[i])
                _copy_into(m, m * beta1 + g * (1 - beta1))
                _copy_into(u, ops.maximum(u * beta2, ops.abs(g) + group["eps"]))
                _copy_into(p, p - m / u * ops.cast(clr, p.dtype))
        return True
