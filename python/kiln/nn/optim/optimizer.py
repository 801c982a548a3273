"""Optimizer base: parameters, learning rates (fixed, per-step lists, schedules), weight decay."""
import numbers

import numpy as np

from kiln import _C
from kiln.common import dtype as mstype
from kiln.common.initializer import initializer
from kiln.common.parameter import Parameter, ParameterTuple, _copy_into
from kiln.common.tensor import Tensor
from kiln.nn.cell import Cell

__all__ = ["Optimizer"]


def _default_decay_filter(param):
    # MindSpore's default: no weight decay on normalisation scales/shifts (gamma/beta).
    return "beta" not in param.name and "gamma" not in param.name


class _LR:
    """One learning-rate source; value(step) -> float.

    A float (or 0-d Tensor) is fixed; a list/tuple/iterable or 1-D Tensor gives one value per
    step (the last one repeats after the end); a LearningRateSchedule or any callable is called
    with the global step (a Tensor) and may return a float or a one-element Tensor.
    """

    def __init__(self, lr, who):
        from kiln.nn.learning_rate_schedule import LearningRateSchedule  # noqa: PLC0415

        self.fixed = None
        self.table = None
        self.schedule = None
        self.param = None  # a fixed lr lives in the optimizer's `learning_rate` Parameter
        if isinstance(lr, bool):
            raise TypeError(f"{who}: learning_rate must be a float, list, Tensor or "
                            f"LearningRateSchedule, got bool")
        if isinstance(lr, numbers.Real):
            self.fixed = self._check(float(lr), who)
        elif isinstance(lr, _C.TensorBase):
            values = np.asarray(lr.asnumpy(), dtype=np.float64)
            if values.ndim == 0:
                self.fixed = self._check(float(values), who)
            elif values.ndim == 1 and values.size:
                self.table = [self._check(float(v), who) for v in values]
            else:
                raise ValueError(f"{who}: a learning_rate Tensor must be 0-D or a non-empty "
                                 f"1-D tensor, got shape {tuple(lr.shape)}")
        elif isinstance(lr, LearningRateSchedule) or callable(lr):
            self.schedule = lr
        elif hasattr(lr, "__iter__"):
            values = list(lr)
            if not values:
                raise ValueError(f"{who}: the learning_rate list is empty")
            self.table = [self._check(float(v), who) for v in values]
        else:
            raise TypeError(f"{who}: learning_rate must be a float, list, Tensor or "
                            f"LearningRateSchedule, got {type(lr).__name__}")

    @staticmethod
    def _check(value, who):
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"{who}: learning_rate must be a finite number >= 0, got {value}")
        return value

    def value(self, step, step_tensor):
        if self.param is not None:
            # MindSpore code changes the rate with learning_rate.set_data(...) / ops.assign.
            return float(np.asarray(self.param.asnumpy()).reshape(-1)[0])
        if self.fixed is not None:
            return self.fixed
        if self.table is not None:
            return self.table[min(step, len(self.table) - 1)]
        out = self.schedule(step_tensor)
        if isinstance(out, _C.TensorBase):
            out = float(np.asarray(out.asnumpy()).reshape(-1)[0])
        return float(out)


class Optimizer(Cell):
    """Base class of optimizers.

    ``params`` is an iterable of Parameters or of group dicts
    (``{"params": [...], "lr": ..., "weight_decay": ...}``, MindSpore's grouped form).
    Calling the optimizer with a tuple of gradients (one per parameter, in
    ``optimizer.parameters`` order; None skips a parameter) updates the parameters in place
    and advances ``global_step``. Weight decay adds ``weight_decay * param`` to the gradient
    (L2), except for parameters whose name contains 'beta' or 'gamma'.
    """

    _decoupled_weight_decay = False  # AdamW-style optimizers apply decay themselves

    def __init__(self, learning_rate, parameters, weight_decay=0.0, loss_scale=1.0):
        super().__init__(auto_prefix=False)
        who = type(self).__name__
        if isinstance(parameters, (Parameter, Cell)) or parameters is None:
            raise TypeError(f"{who}: params must be a list of Parameters (e.g. "
                            f"net.trainable_params()) or of group dicts, got "
                            f"{type(parameters).__name__}")
        items = list(parameters)
        if not items:
            raise ValueError(f"{who}: params is empty")
        params, lrs, decays = [], [], []
        self.is_group = isinstance(items[0], dict)
        self.is_group_lr = False
        default_lr = _LR(learning_rate, who)
        default_wd = self._check_weight_decay(weight_decay, who)
        if self.is_group:
            for group in items:
                if not isinstance(group, dict):
                    raise TypeError(f"{who}: mix of group dicts and Parameters in params")
                if "order_params" in group:
                    continue
                group_params = list(group.get("params", []))
                lr = _LR(group["lr"], who) if "lr" in group else default_lr
                self.is_group_lr = self.is_group_lr or "lr" in group
                wd = self._check_weight_decay(group.get("weight_decay", weight_decay), who)
                for p in group_params:
                    params.append(p)
                    lrs.append(lr)
                    decays.append(wd)
        else:
            params = items
            lrs = [default_lr] * len(params)
            decays = [default_wd] * len(params)
        for p in params:
            if not isinstance(p, Parameter):
                raise TypeError(f"{who}: every item of params must be a Parameter, got "
                                f"{type(p).__name__}")
        if isinstance(loss_scale, bool) or not isinstance(loss_scale, numbers.Real) \
                or loss_scale <= 0:
            raise ValueError(f"{who}: loss_scale must be a positive number, got {loss_scale!r}")
        self.loss_scale = float(loss_scale)
        self.parameters = ParameterTuple(params)  # raises on duplicate names
        self._lr_sources = lrs
        self._weight_decays = [wd if _default_decay_filter(p) else 0.0
                               for p, wd in zip(self.parameters, decays)]
        self.weight_decay = default_wd
        self.dynamic_lr = any(s.fixed is None for s in lrs)
        self.global_step = Parameter(initializer(0, (1,), mstype.int32), name="global_step",
                                     requires_grad=False)
        if default_lr.fixed is not None and not self.is_group_lr:
            self.learning_rate = Parameter(Tensor(np.array(default_lr.fixed, np.float32)),
                                           name="learning_rate", requires_grad=False)
            default_lr.param = self.learning_rate
        elif default_lr.schedule is not None and isinstance(default_lr.schedule, Cell):
            self.learning_rate = default_lr.schedule

    @property
    def _parameters(self):
        return self.parameters

    @staticmethod
    def _check_weight_decay(value, who):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{who}: weight_decay must be a float, got {value!r}")
        if value < 0:
            raise ValueError(f"{who}: weight_decay must be >= 0, got {value}")
        return float(value)

    # ---- learning rate ----
    @property
    def _step(self):
        # global_step (a Parameter, so checkpoints restore it) is the source of truth.
        return int(np.asarray(self.global_step.asnumpy()).reshape(-1)[0])

    def _lr_values(self):
        """The learning rate of every parameter at the current step (floats)."""
        step = self._step
        step_tensor = Tensor(np.array(step, dtype=np.int32))
        cache = {}
        out = []
        for source in self._lr_sources:
            if id(source) not in cache:
                cache[id(source)] = source.value(step, step_tensor)
            out.append(cache[id(source)])
        return out

    def get_lr(self):
        """The learning rate for the current step: a float32 scalar Tensor (a tuple of them,
        one per parameter, when groups set their own lr)."""
        values = self._lr_values()
        if self.is_group_lr:
            return tuple(Tensor(np.array(v, np.float32)) for v in values)
        return Tensor(np.array(values[0], np.float32))

    def get_lr_parameter(self, param):
        """The learning rate(s) of a Parameter (or list of them) at the current step."""
        values = dict(zip((id(p) for p in self.parameters), self._lr_values()))
        plist = param if isinstance(param, (list, tuple)) else [param]
        out = []
        for p in plist:
            if id(p) not in values:
                raise ValueError(f"{type(self).__name__}: parameter '{p.name}' is not "
                                 f"optimized by this optimizer")
            out.append(Tensor(np.array(values[id(p)], np.float32)))
        return out if isinstance(param, (list, tuple)) else out[0]

    # ---- the step ----
    def construct(self, gradients):
        who = type(self).__name__
        grads = tuple(gradients) if isinstance(gradients, (tuple, list)) else (gradients,)
        if len(grads) != len(self.parameters):
            raise ValueError(f"{who}: got {len(grads)} gradients for {len(self.parameters)} "
                             f"parameters; pass one gradient per parameter, in "
                             f"optimizer.parameters order")
        lrs = self._lr_values()
        self._begin_step()
        for i, (param, grad) in enumerate(zip(self.parameters, grads)):
            if grad is None:
                continue
            if tuple(grad.shape) != tuple(param.shape):
                raise ValueError(f"{who}: gradient {i} has shape {tuple(grad.shape)} but "
                                 f"parameter '{param.name}' has shape {tuple(param.shape)}")
            if grad.dtype != param.dtype:
                grad = grad.astype(param.dtype)
            if self.loss_scale != 1.0:
                grad = grad * (1.0 / self.loss_scale)
            wd = self._weight_decays[i]
            if wd and not self._decoupled_weight_decay:
                grad = grad + param * wd
            self._update(i, param, grad, lrs[i], wd)
        _copy_into(self.global_step, Tensor(np.array([self._step + 1], np.int32)))
        return True

    def _begin_step(self):
        """Per-step state shared by all parameters (Adam's beta powers)."""

    def _update(self, index, param, grad, lr, weight_decay):
        raise NotImplementedError

    def _state(self, prefix, init="zeros"):
        """One zero-initialised Parameter per optimized parameter, named prefix.<name>."""
        state = self.parameters.clone(prefix=prefix, init=init)
        for p in state:
            p.requires_grad = False  # optimizer state is never trained
        return state

    def extend_repr(self):
        return f"parameters={len(self.parameters)}, weight_decay={self.weight_decay}"
