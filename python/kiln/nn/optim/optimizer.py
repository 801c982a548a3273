"""Optimizer base: parameters, learning rates (fixed, per-step lists, schedules), weight decay."""
import numbers

import numpy as np

from kiln import _C, _graph_state, log, ops
from kiln.common import dtype as mstype
from kiln.common.initializer import initializer
from kiln.common.parameter import Parameter, ParameterTuple
from kiln.common.tensor import Tensor
from kiln.nn.cell import Cell
from kiln.nn.learning_rate_schedule import LearningRateSchedule
from kiln.ops import _core

__all__ = ["Optimizer"]


def _centralize(grad):
    """MindSpore's gradient centralization: subtract the mean over every axis but the first,
    for gradients of rank >= 2 whose axis 1 is a multiple of 16 (others are left alone)."""
    shape = tuple(grad.shape)
    if len(shape) < 2 or shape[1] % 16:
        return grad
    return grad - ops.mean(grad, tuple(range(1, len(shape))), True)


def _default_decay_filter(param):
    # MindSpore's default: no weight decay on normalisation scales/shifts (gamma/beta).
    return "beta" not in param.name and "gamma" not in param.name


def _graph_value(tensor):
    """A Parameter as a value to compute with: the Parameter itself in PyNative; while a graph
    is being compiled, its graph input (what the graph reads at run time).

    Parameters reached through tuples (``optimizer.parameters``, the state ParameterTuples) are
    the eager objects even while compiling, and operators between an eager Tensor and a Python
    number (``param * weight_decay``) run eagerly: without this the parameter's current value
    would be baked into the graph as a constant. ops.assign accepts either form as its target.
    """
    builder = _graph_state.emitter()
    if builder is None or not isinstance(tensor, _C.TensorBase):
        return tensor
    return builder.to_graph(tensor, "optimizer")


class _LR:
    """One learning-rate source; value(step) -> a float32 scalar tensor (or a fixed float).

    A float (or 0-d Tensor) is fixed; a list/tuple/iterable or 1-D Tensor gives one value per
    step (the last one repeats after the end); a LearningRateSchedule or any callable is called
    with the global step (a 0-d int32 Tensor) and may return a float or a one-element Tensor.

    Everything is computed with tensor ops on the step tensor, so a compiled training step reads
    the rate at run time instead of baking it in as a constant (which would recompile each step).
    The one exception is a user-defined callable written with Python numbers (e.g.
    ``lambda step: 0.1 * int(step.asnumpy())``): it works in PyNative mode only; in a compiled
    graph the step's value is unknown and such a callable raises, so write it with ops
    (or as a LearningRateSchedule built from ops).
    """

    def __init__(self, lr, who):
        self.fixed = None
        self.table = None
        self.table_tensor = None  # the table as a constant float32 tensor, indexed by the step
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
        if self.table is not None:
            self.table_tensor = Tensor(np.array(self.table, np.float32))

    @staticmethod
    def _check(value, who):
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"{who}: learning_rate must be a finite number >= 0, got {value}")
        return value

    def value(self, step):
        """The rate at `step` (a 0-d int32 tensor: eager, or a graph value while compiling)."""
        if self.param is not None:
            # MindSpore code changes the rate with learning_rate.set_data(...) / ops.assign;
            # as a Parameter it is a graph input, so a compiled step sees the new value.
            return ops.reshape(self.param, ())
        if self.fixed is not None:
            return self.fixed
        if self.table is not None:
            index = ops.minimum(step, len(self.table) - 1)
            return ops.gather(self.table_tensor, index, 0)
        out = self.schedule(step)
        if _core.is_tensor(out):
            out = ops.reshape(out, ())
            return out if out.dtype == mstype.float32 else ops.cast(out, mstype.float32)
        return float(out)


class Optimizer(Cell):
    """Base class of optimizers.

    ``params`` is an iterable of Parameters or of group dicts
    (``{"params": [...], "lr": ..., "weight_decay": ...}``, MindSpore's grouped form).
    Calling the optimizer with a tuple of gradients (one per parameter, in
    ``optimizer.parameters`` order; None skips a parameter) updates the parameters in place
    and advances ``global_step``. Weight decay adds ``weight_decay * param`` to the gradient
    (L2), except for parameters whose name contains 'beta' or 'gamma'.

    `construct` computes with tensor ops only: the step is the ``global_step`` Parameter,
    learning rates are tensors computed from it (a fixed rate is the ``learning_rate``
    Parameter), and per-step choices use ops.where. A compiled training step (``kiln.jit`` or
    GRAPH_MODE) therefore compiles once and reads them at run time. Subclasses implement
    ``_update(index, param, grad, lr, weight_decay, state)`` (and ``_begin_step(step)`` for
    ``state``) the same way, reading their state Parameters through ``_graph_value``.
    """

    _decoupled_weight_decay = False  # AdamW-style optimizers apply decay themselves
    # Momentum, SGD and the Adams update each parameter with one fused op (ops/optim.cc), which
    # also refreshes the weight's low-precision copy a mixed-precision forward reads; False
    # composes the update from elementwise ops (the tests compare the two).
    _fused_updates = True

    def _fuses(self, param):
        return self._fused_updates and param.dtype.is_floating_point

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
        self.is_group = isinstance(items[0], dict)
        self.is_group_lr = False
        default_lr = _LR(learning_rate, who)
        default_wd = self._check_weight_decay(weight_decay, who)
        if self.is_group:
            params, lrs, decays, centralize = self._parse_groups(who, items, default_lr,
                                                                 weight_decay)
        else:
            params = items
            lrs = [default_lr] * len(params)
            decays = [default_wd] * len(params)
            centralize = [False] * len(params)
        for p in params:
            if not isinstance(p, Parameter):
                raise TypeError(f"{who}: every item of params must be a Parameter, got "
                                f"{type(p).__name__}")
        if isinstance(loss_scale, bool) or not isinstance(loss_scale, numbers.Real) \
                or loss_scale <= 0:
            raise ValueError(f"{who}: loss_scale must be a positive number, got {loss_scale!r}")
        self.loss_scale = float(loss_scale)
        self.parameters = ParameterTuple(params)  # raises on duplicate names
        # Tuples: fixed once built, so a compiled step re-checks them only when an attribute of
        # the optimizer is assigned (lists would be compared item by item on every call).
        self._lr_sources = tuple(lrs)
        # MindSpore: ungrouped, decay skips normalisation parameters by name; grouped, every
        # parameter of a group with weight_decay > 0 (or a decay Cell) is decayed.
        self._weight_decays = tuple(decays) if self.is_group else tuple(
            wd if _default_decay_filter(p) else 0.0 for p, wd in zip(self.parameters, decays))
        self._grad_centralization = tuple(centralize)
        self.weight_decay = default_wd
        self.dynamic_lr = any(s.fixed is None for s in lrs)
        self.dynamic_weight_decay = any(isinstance(wd, Cell) for wd in self._weight_decays)
        self.global_step = Parameter(initializer(0, (1,), mstype.int32), name="global_step",
                                     requires_grad=False)
        if default_lr.fixed is not None and not self.is_group_lr:
            self.learning_rate = Parameter(Tensor(np.array(default_lr.fixed, np.float32)),
                                           name="learning_rate", requires_grad=False)
            default_lr.param = self.learning_rate
        elif default_lr.schedule is not None and isinstance(default_lr.schedule, Cell):
            self.learning_rate = default_lr.schedule

    _GROUP_KEYS = ("params", "lr", "weight_decay", "grad_centralization")

    def _parse_groups(self, who, groups, default_lr, weight_decay):
        """Per-parameter rates, decays and centralization flags of MindSpore's group dicts;
        an {'order_params': [...]} dict fixes the order of the parameters."""
        params, lrs, decays, centralize, order = [], [], [], [], None
        for group in groups:
            if not isinstance(group, dict):
                raise TypeError(f"{who}: mix of group dicts and Parameters in params")
            if "order_params" in group:
                if len(group) > 1:
                    raise ValueError(f"{who}: the order params dict in group parameters should "
                                     f"only include the 'order_params' key, got "
                                     f"{sorted(group)}")
                order = list(group["order_params"])
                continue
            unknown = sorted(set(group) - set(self._GROUP_KEYS))
            if unknown:
                log.warning(f"{who}: the optimizer cannot parse {unknown} when setting "
                            f"parameter groups; the keys are {list(self._GROUP_KEYS)}")
            group_params = list(group.get("params", []))
            if not group_params:
                raise ValueError(f"{who}: a parameter group has an empty 'params' list")
            lr = _LR(group["lr"], who) if "lr" in group else default_lr
            self.is_group_lr = self.is_group_lr or "lr" in group
            wd = self._check_weight_decay(group.get("weight_decay", weight_decay), who)
            gc = group.get("grad_centralization", False)
            if not isinstance(gc, bool):
                raise TypeError(f"{who}: grad_centralization must be a bool, got {gc!r}")
            for p in group_params:
                if any(p is q for q in params):
                    raise RuntimeError(f"{who}: the {getattr(p, 'name', p)} parameter already "
                                       f"exists; a parameter may appear in one group only")
                params.append(p)
                lrs.append(lr)
                decays.append(wd)
                centralize.append(gc)
        if order is None:
            return params, lrs, decays, centralize
        if len(order) != len(params):
            raise ValueError(f"{who}: order_params has {len(order)} parameters but the groups "
                             f"hold {len(params)}; they must list the same parameters")
        index = []
        for p in order:
            found = [k for k, q in enumerate(params) if q is p]
            if not found:
                raise ValueError(f"{who}: order_params holds '{getattr(p, 'name', p)}', which "
                                 f"is in no parameter group")
            index.append(found[0])
        return ([params[k] for k in index], [lrs[k] for k in index],
                [decays[k] for k in index], [centralize[k] for k in index])

    @property
    def _parameters(self):
        return self.parameters

    @staticmethod
    def _check_weight_decay(value, who):
        if isinstance(value, Cell):
            return value  # dynamic: called with the global step, like a LearningRateSchedule
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{who}: weight_decay must be a float, an int or a Cell, got "
                            f"{value!r}")
        if value < 0:
            raise ValueError(f"{who}: weight_decay must be >= 0, got {value}")
        return float(value)

    # ---- learning rate ----
    @property
    def _step(self):
        """The global step as a Python int (PyNative only: it reads the tensor's value).

        global_step (a Parameter, so checkpoints restore it) is the source of truth; compiled
        code must use `_step_tensor()` instead."""
        return int(np.asarray(self.global_step.asnumpy()).reshape(-1)[0])

    def _step_tensor(self):
        """The global step as a 0-d int32 tensor (a graph value while compiling)."""
        return ops.reshape(self.global_step, ())

    def _lr_tensors(self, step=None):
        """The learning rate of every parameter at `step` (default: the current step):
        float32 scalar tensors computed with ops (a plain float for a fixed group rate)."""
        if step is None:
            step = self._step_tensor()
        cache = {}
        out = []
        for source in self._lr_sources:
            if id(source) not in cache:
                cache[id(source)] = source.value(step)
            out.append(cache[id(source)])
        return out

    def _lr_values(self):
        """The learning rate of every parameter at the current step, as Python floats
        (PyNative only)."""
        return [float(np.asarray(v.asnumpy()).reshape(-1)[0]) if _core.is_tensor(v) else
                float(v) for v in self._lr_tensors()]

    @staticmethod
    def _as_lr_tensor(value):
        if _core.is_tensor(value):
            return value
        return Tensor(np.array(value, np.float32))

    def get_lr(self):
        """The learning rate for the current step: a float32 scalar Tensor (a tuple of them,
        one per parameter, when groups set their own lr)."""
        values = self._lr_tensors()
        if self.is_group_lr:
            return tuple(self._as_lr_tensor(v) for v in values)
        return self._as_lr_tensor(values[0])

    def get_lr_parameter(self, param):
        """The learning rate(s) of a Parameter (or list of them) at the current step."""
        values = dict(zip((id(p) for p in self.parameters), self._lr_tensors()))
        plist = param if isinstance(param, (list, tuple)) else [param]
        out = []
        for p in plist:
            if id(p) not in values:
                raise ValueError(f"{type(self).__name__}: parameter '{p.name}' is not "
                                 f"optimized by this optimizer")
            out.append(self._as_lr_tensor(values[id(p)]))
        return out if isinstance(param, (list, tuple)) else out[0]

    # ---- the step ----
    def construct(self, gradients):
        # Written with tensor ops only (no .asnumpy()/float()/int() on tensors), so that a
        # compiled training step reads the step and the learning rates at run time and
        # compiles once.
        who = type(self).__name__
        grads = tuple(gradients) if isinstance(gradients, (tuple, list)) else (gradients,)
        if len(grads) != len(self.parameters):
            raise ValueError(f"{who}: got {len(grads)} gradients for {len(self.parameters)} "
                             f"parameters; pass one gradient per parameter, in "
                             f"optimizer.parameters order")
        step = self._step_tensor()
        lrs = self._lr_tensors(step)
        decays = self._decay_values(step)
        state = self._begin_step(step)
        for i, (param, grad) in enumerate(zip(self.parameters, grads)):
            if grad is None:
                continue
            if tuple(grad.shape) != tuple(param.shape):
                raise ValueError(f"{who}: gradient {i} has shape {tuple(grad.shape)} but "
                                 f"parameter '{param.name}' has shape {tuple(param.shape)}")
            if grad.dtype != param.dtype:
                grad = grad.astype(param.dtype)
            param = _graph_value(param)
            wd = decays[i]
            # MindSpore multiplies weight_decay by loss_scale, decays, centralizes, then divides
            # by loss_scale: the same as unscaling first and decaying with weight_decay itself.
            if self.loss_scale != 1.0:
                grad = grad * (1.0 / self.loss_scale)
            if not self._decoupled_weight_decay and (_core.is_tensor(wd) or wd):
                grad = grad + param * wd
            if self._grad_centralization[i]:
                grad = _centralize(grad)
            lr = lrs[i]
            if _core.is_tensor(lr) and lr.dtype != param.dtype:
                lr = ops.cast(lr, param.dtype)
            self._update(i, param, grad, lr, wd, state)
        ops.assign(self.global_step, self.global_step + 1)
        return True

    def _decay_values(self, step):
        """Each parameter's weight decay at `step`: its float, or a decay Cell's value at the
        step as a float32 scalar tensor (one call per distinct Cell)."""
        cache = {}
        out = []
        for wd in self._weight_decays:
            if isinstance(wd, Cell):
                if id(wd) not in cache:
                    value = wd(step)
                    value = ops.reshape(value, ()) if _core.is_tensor(value) else value
                    if _core.is_tensor(value) and value.dtype != mstype.float32:
                        value = ops.cast(value, mstype.float32)
                    cache[id(wd)] = value
                wd = cache[id(wd)]
            out.append(wd)
        return out

    def get_weight_decay(self):
        """The weight decay at the current step: a float (a tuple of them, one per parameter,
        for grouped parameters), or tensors where a decay Cell gives it."""
        values = self._decay_values(self._step_tensor())
        return tuple(values) if self.is_group else values[0] if values else self.weight_decay

    # ---- MindSpore's helpers for optimizers that write their own construct ----
    @property
    def target(self):
        return "CPU"

    @property
    def unique(self):
        return True

    def decay_weight(self, gradients):
        """gradients + weight_decay * loss_scale * parameter, where the parameter decays (the
        loss scale is undone by scale_grad, as in MindSpore)."""
        decays = self._decay_values(self._step_tensor())
        out = []
        for p, g, wd in zip(self.parameters, gradients, decays):
            if g is not None and not self._decoupled_weight_decay and (_core.is_tensor(wd) or
                                                                       wd):
                g = g + _graph_value(p) * (wd * self.loss_scale)
            out.append(g)
        return tuple(out)

    def gradients_centralization(self, gradients):
        """Each gradient of a group with grad_centralization, centralized."""
        return tuple(_centralize(g) if flag and g is not None else g
                     for g, flag in zip(gradients, self._grad_centralization))

    def scale_grad(self, gradients):
        """Gradients divided by loss_scale (unchanged when it is 1)."""
        if self.loss_scale == 1.0:
            return tuple(gradients)
        return tuple(None if g is None else g * (1.0 / self.loss_scale) for g in gradients)

    def _begin_step(self, step):
        """Per-step values shared by all parameters (Adam's bias corrections), computed from
        the step tensor with ops; passed to every `_update` as `state`."""
        return None

    def _update(self, index, param, grad, lr, weight_decay, state):
        """Updates one parameter in place (with ops: lr and state may be graph values)."""
        raise NotImplementedError

    def _state(self, prefix, init="zeros"):
        """One zero-initialised Parameter per optimized parameter, named prefix.<name>.

        Read them in `_update` through `_graph_value` (they are in a tuple, see there)."""
        state = self.parameters.clone(prefix=prefix, init=init)
        for p in state:
            p.requires_grad = False  # optimizer state is never trained
        return state

    def extend_repr(self):
        return f"parameters={len(self.parameters)}, weight_decay={self.weight_decay}"
