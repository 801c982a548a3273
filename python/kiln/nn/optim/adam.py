"""Adam (MindSpore's Adam: L2 weight decay), AdamWeightDecay and AdamW (decoupled decay)."""
import numpy as np

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.parameter import Parameter, _copy_into
from kiln.common.tensor import Tensor
from kiln.nn.optim.optimizer import Optimizer, _graph_value
from kiln.nn.optim.sgd import _check_float
from kiln.ops import _core
from kiln.ops._core import call

__all__ = ["Adam", "AdamW", "AdamWeightDecay"]


def _bias_corrections(step, beta1, beta2):
    """1 - beta1^t and 1 - beta2^t for t = step + 1, as float32 scalar tensors.

    Computed with ops on the step tensor (so a compiled step reads it at run time), in float64
    so that 1 - beta^t keeps its digits when beta^t is close to 1."""
    t = ops.cast(step, mstype.float64) + 1.0
    bc1 = 1.0 - ops.pow(beta1, t)
    bc2 = 1.0 - ops.pow(beta2, t)
    return bc1, bc2


def _has_decay(weight_decay):
    """A decay Cell's value is a tensor (possibly only known when a compiled step runs)."""
    return _core.is_tensor(weight_decay) or bool(weight_decay)


def _check_betas(who, beta1, beta2, eps):
    beta1 = _check_float(beta1, who, "beta1", 0.0, 1.0)
    beta2 = _check_float(beta2, who, "beta2", 0.0, 1.0)
    if beta1 >= 1.0 or beta2 >= 1.0:
        raise ValueError(f"{who}: beta1 and beta2 must be < 1, got {beta1} and {beta2}")
    eps = _check_float(eps, who, "eps")
    if eps <= 0:
        raise ValueError(f"{who}: eps must be > 0, got {eps}")
    return beta1, beta2, eps


class _AdamBase(Optimizer):
    # The names of the moment states in checkpoints (MindSpore's, per optimizer).
    _moment_names = ("moment1", "moment2")

    def __init__(self, who, params, learning_rate, beta1, beta2, eps, weight_decay, loss_scale):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.beta1, self.beta2, self.eps = _check_betas(who, beta1, beta2, eps)
        self.moment1 = self._state(self._moment_names[0])
        self.moment2 = self._state(self._moment_names[1])

    def _fused(self, i, param, grad, lr, c1, c2, decay, nesterov=False):
        """One pass (ops/optim.cc): param = param * (1 - decay) - lr * (m c1) / (sqrt(v c2) + eps),
        with the moments updated first (and m replaced by beta1 m + (1 - beta1) g for
        Nesterov)."""
        m, v = _graph_value(self.moment1[i]), _graph_value(self.moment2[i])
        call("apply_adam", (param, m, v, lr, grad, c1, c2, decay),
             (self.beta1, self.beta2, self.eps, nesterov))

    def _moments(self, i, grad):
        m, v = _graph_value(self.moment1[i]), _graph_value(self.moment2[i])
        _copy_into(m, m * self.beta1 + grad * (1.0 - self.beta1))
        _copy_into(v, v * self.beta2 + grad * grad * (1.0 - self.beta2))
        return m, v


class Adam(_AdamBase):
    """Adam (MindSpore's rule; weight decay is L2, added to the gradient):

        m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g^2
        lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
        param -= lr_t * m / (sqrt(v) + eps)
    use_nesterov uses beta1 * m + (1 - beta1) * g in place of m; use_amsgrad divides by the
    running maximum of v.
    """

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                 use_locking=False, use_nesterov=False, weight_decay=0.0, loss_scale=1.0,
                 use_amsgrad=False):
        super().__init__("Adam", params, learning_rate, beta1, beta2, eps, weight_decay,
                         loss_scale)
        if not isinstance(use_nesterov, bool) or not isinstance(use_amsgrad, bool):
            raise TypeError("Adam: use_nesterov and use_amsgrad must be bools")
        self.use_locking = use_locking
        self.use_nesterov = use_nesterov
        self.use_amsgrad = use_amsgrad
        if use_amsgrad:
            self.vhat = self._state("vhat")
        # beta1^t and beta2^t, kept as MindSpore keeps them so its checkpoints and kiln's hold
        # the same state; the bias corrections come from global_step, which agrees with them.
        self.beta1_power = Parameter(Tensor(np.array(1.0, np.float32)), name="beta1_power",
                                     requires_grad=False)
        self.beta2_power = Parameter(Tensor(np.array(1.0, np.float32)), name="beta2_power",
                                     requires_grad=False)

    def _begin_step(self, step):
        for power, beta in ((self.beta1_power, self.beta1), (self.beta2_power, self.beta2)):
            power = _graph_value(power)
            _copy_into(power, power * beta)
        bc1, bc2 = _bias_corrections(step, self.beta1, self.beta2)
        return ops.cast(ops.sqrt(bc2) / bc1, mstype.float32)  # lr_t = lr * this

    def _update(self, i, param, grad, lr, weight_decay, lr_scale):
        if self._fuses(param) and not self.use_amsgrad:
            self._fused(i, param, grad, lr * lr_scale, 1.0, 1.0, 0.0, self.use_nesterov)
            return
        m, v = self._moments(i, grad)
        if self.use_amsgrad:
            vhat = _graph_value(self.vhat[i])
            _copy_into(vhat, ops.maximum(vhat, v))
            v = vhat
        num = m * self.beta1 + grad * (1.0 - self.beta1) if self.use_nesterov else m
        _copy_into(param, param - num / (ops.sqrt(v) + self.eps) * (lr * lr_scale))


class AdamW(_AdamBase):
    """Adam with decoupled weight decay and bias correction (Loshchilov & Hutter, as PyTorch):

        param -= lr * weight_decay * param
        param -= lr * m_hat / (sqrt(v_hat) + eps),  m_hat = m / (1 - beta1^t),
                                                    v_hat = v / (1 - beta2^t)
    """

    _decoupled_weight_decay = True

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                 weight_decay=1e-2, loss_scale=1.0):
        super().__init__("AdamW", params, learning_rate, beta1, beta2, eps, weight_decay,
                         loss_scale)

    def _begin_step(self, step):
        bc1, bc2 = _bias_corrections(step, self.beta1, self.beta2)
        return ops.cast(1.0 / bc1, mstype.float32), ops.cast(1.0 / bc2, mstype.float32)

    def _update(self, i, param, grad, lr, weight_decay, state):
        inv_bc1, inv_bc2 = state
        decay = lr * weight_decay if _has_decay(weight_decay) else 0.0
        if self._fuses(param):
            self._fused(i, param, grad, lr, inv_bc1, inv_bc2, decay)
            return
        m, v = self._moments(i, grad)
        denom = ops.sqrt(v * inv_bc2) + self.eps
        new = param * (1.0 - lr * weight_decay) if _has_decay(weight_decay) else param
        _copy_into(param, new - (m * inv_bc1) / denom * lr)


class AdamWeightDecay(_AdamBase):
    """MindSpore's AdamWeightDecay (no bias correction, decoupled decay):

        update = m / (sqrt(v) + eps) + weight_decay * param;  param -= lr * update
    Its moments are adam_m.<param> and adam_v.<param>, as in MindSpore.
    """

    _decoupled_weight_decay = True
    _moment_names = ("adam_m", "adam_v")

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-6,
                 weight_decay=0.0):
        super().__init__("AdamWeightDecay", params, learning_rate, beta1, beta2, eps,
                         weight_decay, 1.0)

    def _update(self, i, param, grad, lr, weight_decay, state):
        if self._fuses(param):  # lr * (update + wd * param) = decay by lr * wd, then the step
            decay = lr * weight_decay if _has_decay(weight_decay) else 0.0
            self._fused(i, param, grad, lr, 1.0, 1.0, decay)
            return
        m, v = self._moments(i, grad)
        update = m / (ops.sqrt(v) + self.eps)
        if _has_decay(weight_decay):
            update = update + param * weight_decay
        _copy_into(param, param - update * lr)
