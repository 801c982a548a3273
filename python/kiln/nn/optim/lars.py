"""LARS, layer-wise adaptive rate scaling: a wrapper that rescales each layer's gradient before
another optimizer applies it (MindSpore's nn.LARS with its LARSUpdate rule)."""
from kiln import ops
from kiln.nn.cell import Cell
from kiln.nn.optim.optimizer import Optimizer, _graph_value
from kiln.ops import _core

__all__ = ["LARS"]


def _outside_layer_norm_and_bias(param):
    return "LayerNorm" not in param.name and "bias" not in param.name


def _norm(x):
    return ops.sqrt(ops.sum(x * x))


class LARS(Optimizer):
    """Wraps `optimizer`. Before it updates, every parameter that `lars_filter` selects (by
    default all but LayerNorm and bias parameters) gets the gradient

        trust = coefficient * ||w|| / (||g|| + wd * ||w|| + epsilon)
        trust = clamp(trust / lr, 0, 1)            when use_clip (lr: the optimizer's rate now)
        g = trust * (g + wd * w)

    with wd the parameter's weight decay in `optimizer` and g unscaled by its loss_scale. LARS
    takes both over: the wrapped optimizer then neither decays nor unscales, and parameters
    outside the filter keep their gradients as they are (undecayed), as in MindSpore. Calling
    LARS runs the wrapped optimizer, which advances its own global_step."""

    def __init__(self, optimizer, epsilon=1e-05, coefficient=0.001, use_clip=False,
                 lars_filter=_outside_layer_norm_and_bias):
        Cell.__init__(self, auto_prefix=False)  # no state of its own: the optimizer's is it
        who = "LARS"
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{who}: optimizer must be a kiln.nn Optimizer, got "
                            f"{type(optimizer).__name__}")
        for name, value in (("epsilon", epsilon), ("coefficient", coefficient)):
            if not isinstance(value, float):
                raise TypeError(f"{who}: {name} must be a float, got {value!r}")
        if not isinstance(use_clip, bool):
            raise TypeError(f"{who}: use_clip must be a bool, got {use_clip!r}")
        if not callable(lars_filter):
            raise TypeError(f"{who}: lars_filter must be callable, got {lars_filter!r}")
        if use_clip and optimizer.is_group_lr and optimizer.dynamic_lr:
            raise ValueError(f"{who}: grouped dynamic learning rates are not supported for the "
                             f"wrapped optimizer with use_clip")
        self.opt = optimizer
        self.parameters = optimizer.parameters
        self.epsilon, self.coefficient, self.use_clip = epsilon, coefficient, use_clip
        self.lars_flag = tuple(bool(lars_filter(p)) for p in self.parameters)
        self.is_group, self.is_group_lr = optimizer.is_group, optimizer.is_group_lr
        self.dynamic_lr = optimizer.dynamic_lr
        self.loss_scale = optimizer.loss_scale
        self.weight_decay = optimizer.weight_decay
        self._weight_decays = optimizer._weight_decays
        self.dynamic_weight_decay = optimizer.dynamic_weight_decay
        optimizer._weight_decays = tuple(0.0 for _ in self._weight_decays)
        optimizer.loss_scale = 1.0

    @property
    def global_step(self):
        return self.opt.global_step

    @property
    def learning_rate(self):
        return self.opt.learning_rate

    def get_lr(self):
        return self.opt.get_lr()

    def get_lr_parameter(self, param):
        return self.opt.get_lr_parameter(param)

    def _step_tensor(self):
        return self.opt._step_tensor()

    def construct(self, gradients):
        grads = tuple(gradients) if isinstance(gradients, (tuple, list)) else (gradients,)
        if len(grads) != len(self.parameters):
            raise ValueError(f"LARS: got {len(grads)} gradients for {len(self.parameters)} "
                             f"parameters; pass one gradient per parameter, in "
                             f"optimizer.parameters order")
        step = self.opt._step_tensor()
        decays = self._decay_values(step)
        lrs = self.opt._lr_tensors(step) if self.use_clip else None
        scaled = []
        for i, (param, grad) in enumerate(zip(self.parameters, grads)):
            if grad is not None and self.loss_scale != 1.0:
                grad = grad * (1.0 / self.loss_scale)
            if grad is None or not self.lars_flag[i]:
                scaled.append(grad)
                continue
            weight = _graph_value(param)
            if grad.dtype != weight.dtype:
                grad = grad.astype(weight.dtype)
            wd = decays[i]
            w_norm = _norm(weight)
            trust = w_norm * self.coefficient / (_norm(grad) + w_norm * wd + self.epsilon)
            if self.use_clip:
                lr = lrs[i]
                if _core.is_tensor(lr) and lr.dtype != weight.dtype:
                    lr = ops.cast(lr, weight.dtype)
                trust = ops.clamp(trust / lr, 0.0, 1.0)
            scaled.append((grad + weight * wd) * trust)
        return self.opt(tuple(scaled))
