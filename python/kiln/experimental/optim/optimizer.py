"""MindSpore's experimental.optim optimizers: Optimizer (param_groups with per-group defaults,
each group's lr a Parameter named learning_rate_group_<i> that lr_scheduler rewrites), SGD, Adam
and AdamW with MindSpore's update rules. Updates are tensor ops on the state Parameters, so a
compiled training step reads lrs and state at run time."""
import numbers
from collections import defaultdict

import numpy as np

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.parameter import Parameter, ParameterTuple, _copy_into
from kiln.common.tensor import Tensor
from kiln.nn.cell import Cell
from kiln.nn.optim.optimizer import _graph_value

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]


class Optimizer(Cell):
    """Base class: `params` is an iterable of Parameters or of group dicts ({'params': [...],
    'lr': ..., ...}); options a group leaves out come from `defaults`. Call the optimizer with
    the gradients (one per parameter, in `parameters` order)."""

    def __init__(self, params, defaults):
        super().__init__(auto_prefix=False)
        if params is None:
            raise ValueError(f"For '{type(self).__name__}', the argument params can not be None.")
        groups = list(params)
        if not groups:
            raise ValueError(f"For '{type(self).__name__}', the argument params must not be "
                             f"empty.")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        self.lrs = []
        self.group_start_id = [0]
        self._flat = []
        self._ready = False
        for group in groups:
            self.add_param_group(group)
        self.parameters = ParameterTuple(self._flat)
        self._ready = True

    def add_param_group(self, param_group):
        """Adds a group: its Parameters and options (defaults filled in)."""
        if not isinstance(param_group, dict):
            raise TypeError("Param group must be a dict.")
        params = param_group["params"]
        if isinstance(params, set):
            raise TypeError("Optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        params = [params] if isinstance(params, Parameter) else list(params)
        for p in params:
            if not isinstance(p, Parameter):
                raise TypeError(f"Optimizer can only optimize Parameters, but one of the params "
                                f"is {type(p).__name__}")
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group.")
        group = dict(param_group, params=params)
        for name, default in self.defaults.items():
            group.setdefault(name, default)
        index = len(self.param_groups)
        lr = group["lr"]
        if isinstance(lr, Tensor) and lr.ndim == 0:
            lr = float(lr.asnumpy())
        if isinstance(lr, bool) or not isinstance(lr, numbers.Real) or lr < 0:
            raise TypeError(f"For 'Optimizer', the argument 'learning_rate' must be a "
                            f"non-negative int, float or scalar Tensor, but got {lr!r}")
        group["lr"] = Parameter(Tensor(np.array(lr, np.float32)),
                                name=f"learning_rate_group_{index}", requires_grad=False)
        wd = group.get("weight_decay", 0.0)
        if isinstance(wd, bool) or not isinstance(wd, numbers.Real) or wd < 0:
            raise ValueError(f"For 'Optimizer', weight_decay must be a number >= 0, got {wd!r}")
        group["weight_decay"] = float(wd)
        self.lrs.append(group["lr"])
        self.param_groups.append(group)
        self._flat += params
        self.group_start_id.append(self.group_start_id[-1] + len(params))
        if self._ready:  # a group added after construction joins `parameters`
            self.parameters = ParameterTuple(self._flat)

    def _groups(self, gradients):
        """(group, params, grads, lr) per group; grads negated for maximize."""
        grads = tuple(gradients)
        if len(grads) != len(self._flat):
            raise ValueError(f"{type(self).__name__}: got {len(grads)} gradients for "
                             f"{len(self._flat)} parameters")
        for i, group in enumerate(self.param_groups):
            lo, hi = self.group_start_id[i], self.group_start_id[i + 1]
            g = grads[lo:hi]
            if group.get("maximize"):
                g = tuple(ops.neg(x) for x in g)
            yield group, range(lo, hi), g, ops.reshape(_graph_value(self.lrs[i]), ())

    def construct(self, *hyper_params):
        raise NotImplementedError(f"{type(self).__name__}: an optimizer must define construct")


class SGD(Optimizer):
    """MindSpore's SGD op: g = grad + weight_decay * p; with momentum, the buffer starts at g
    and then becomes momentum * buffer + (1 - dampening) * g; p -= lr * (g + momentum * buffer
    if nesterov else buffer) (without momentum p -= lr * g)."""

    def __init__(self, params, lr, momentum=0, dampening=0, weight_decay=0.0, nesterov=False,
                 *, maximize=False):
        if isinstance(lr, bool) or not isinstance(lr, (numbers.Real, Tensor)):
            raise TypeError(f"For 'SGD', the 'lr' must be int, float or Tensor, got {lr!r}")
        if float(lr) < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if isinstance(momentum, bool) or not isinstance(momentum, numbers.Real) or momentum < 0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        for name, value in (("nesterov", nesterov), ("maximize", maximize)):
            if not isinstance(value, bool):
                raise TypeError(f"For 'SGD', '{name}' must be a bool, got {value!r}")
        if nesterov and (momentum <= 0.0 or dampening != 0.0):
            raise ValueError(f"For 'SGD', if 'nesterov' is true, 'momentum' must be > 0.0 and "
                             f"'dampening' must equal to 0.0, but got 'momentum' {momentum}, "
                             f"'dampening' {dampening}")
        super().__init__(params, dict(lr=lr, momentum=float(momentum), dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, grad_centralization=False))
        self.accum = self.parameters.clone(prefix="accum", init="zeros")
        self.stat = self.parameters.clone(prefix="stat", init="ones")

    def construct(self, gradients):
        for group, index, grads, lr in self._groups(gradients):
            momentum, damp = group["momentum"], float(group["dampening"])
            for i, g in zip(index, grads):
                p = _graph_value(self.parameters[i])
                lr_p = ops.cast(lr, p.dtype)
                if group["weight_decay"]:
                    g = g + p * group["weight_decay"]
                if momentum > 0:
                    acc, stat = _graph_value(self.accum[i]), _graph_value(self.stat[i])
                    later = acc * momentum + g * (1.0 - damp)
                    _copy_into(acc, ops.where(stat > 0, g, later))
                    _copy_into(stat, ops.zeros_like(stat))
                    g = g + acc * momentum if group["nesterov"] else acc
                _copy_into(p, p - g * lr_p)
        return True


def _check_adam(who, lr, betas, eps, weight_decay):
    if lr < 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")
    if eps < 0.0:
        raise ValueError(f"Invalid epsilon value: {eps}")
    for i in (0, 1):
        if not 0.0 <= betas[i] < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")
    if weight_decay < 0.0:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class _AdamBase(Optimizer):
    def __init__(self, who, params, lr, betas, eps, weight_decay, amsgrad, maximize):
        _check_adam(who, float(lr), betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize))
        self.exp_avg = self.parameters.clone(prefix="exp_avg", init="zeros")
        self.exp_avg_sq = self.parameters.clone(prefix="exp_avg_sq", init="zeros")
        self.max_exp_avg_sq = self.parameters.clone(prefix="max_exp_avg_sq", init="zeros")
        self.state_step = Parameter(Tensor(np.array(0, np.int32)), "state_step",
                                    requires_grad=False)

    def _advance(self):
        step = _graph_value(self.state_step)
        _copy_into(step, step + 1)
        return ops.cast(step, mstype.float32)

    def _moments(self, i, g, beta1, beta2):
        m, v = _graph_value(self.exp_avg[i]), _graph_value(self.exp_avg_sq[i])
        _copy_into(m, m * beta1 + g * (1.0 - beta1))
        _copy_into(v, v * beta2 + g * g * (1.0 - beta2))
        return m, v


class Adam(_AdamBase):
    """MindSpore's Adam op with L2 weight decay added to the gradient:
    lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t); p -= lr_t * m / (sqrt(v) + eps). As in
    MindSpore 2.10, `amsgrad` is accepted but the update is Adam's."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, *, maximize=False):
        super().__init__("Adam", params, lr, betas, eps, weight_decay, amsgrad, maximize)

    def construct(self, gradients):
        t = self._advance()
        for group, index, grads, lr in self._groups(gradients):
            beta1, beta2 = group["betas"]
            lr_t = lr * ops.sqrt(1.0 - ops.pow(beta2, t)) / (1.0 - ops.pow(beta1, t))
            for i, g in zip(index, grads):
                p = _graph_value(self.parameters[i])
                if group["weight_decay"]:
                    g = g + p * group["weight_decay"]
                m, v = self._moments(i, g, beta1, beta2)
                _copy_into(p, p - m / (ops.sqrt(v) + group["eps"]) * ops.cast(lr_t, p.dtype))
        return True


class AdamW(_AdamBase):
    """p *= 1 - lr * weight_decay, then p -= lr / (1 - beta1^t) * m / (sqrt(v') / sqrt(1 -
    beta2^t) + eps) with v' = max over steps of v under amsgrad (else v)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False):
        super().__init__("AdamW", params, lr, betas, eps, weight_decay, amsgrad, maximize)

    def construct(self, gradients):
        t = self._advance()
        for group, index, grads, lr in self._groups(gradients):
            beta1, beta2 = group["betas"]
            step_size = lr / (1.0 - ops.pow(beta1, t))
            bc2_sqrt = ops.sqrt(1.0 - ops.pow(beta2, t))
            for i, g in zip(index, grads):
                p = _graph_value(self.parameters[i])
                decayed = p * ops.cast(1.0 - lr * group["weight_decay"], p.dtype)
                m, v = self._moments(i, g, beta1, beta2)
                if group["amsgrad"]:
                    vmax = _graph_value(self.max_exp_avg_sq[i])
                    _copy_into(vmax, ops.maximum(vmax, v))
                    v = vmax
                denom = ops.sqrt(v) / ops.cast(bc2_sqrt, p.dtype) + group["eps"]
                _copy_into(p, decayed - m / denom * ops.cast(step_size, p.dtype))
        return True
