"""kiln.amp -- mixed precision as mindspore.amp: auto/custom_mixed_precision and
build_train_network (kiln/train/amp.py), the loss-scale managers, all_finite and the loss
scalers a hand-written training step uses (scale the loss, unscale the gradients, adjust)."""
import numbers
from abc import ABC, abstractmethod

import numpy as np

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.api import jit_class
from kiln.common.parameter import Parameter, _copy_into
from kiln.common.tensor import Tensor
from kiln.nn.optim.optimizer import _graph_value
from kiln.ops._core import is_tensor
from kiln.train.amp import (
    auto_mixed_precision,
    build_train_network,
    custom_mixed_precision,
    get_black_list,
    get_white_list,
)
from kiln.train.loss_scale_manager import (
    DynamicLossScaleManager,
    FixedLossScaleManager,
    LossScaleManager,
)

__all__ = [
    "DynamicLossScaleManager", "LossScaleManager", "FixedLossScaleManager",
    "build_train_network", "DynamicLossScaler", "StaticLossScaler", "LossScaler",
    "auto_mixed_precision", "all_finite", "custom_mixed_precision",
    "get_white_list", "get_black_list",
]


def _tensors(inputs, owner):
    if is_tensor(inputs):
        return (inputs,)
    if isinstance(inputs, (tuple, list)) and all(is_tensor(t) for t in inputs):
        return tuple(inputs)
    raise TypeError(f"For '{owner}', the inputs must be a Tensor or a tuple/list of Tensors, "
                    f"but got {type(inputs).__name__}.")


def all_finite(inputs):
    """A bool Tensor of shape (): True when no element of the tensors in `inputs` (a tuple or
    list of Tensors) is an inf or a NaN."""
    if not isinstance(inputs, (tuple, list)):
        raise TypeError(f"For 'all_finite', the inputs must be a tuple or list of Tensors, but "
                        f"got {type(inputs).__name__}.")
    out = Tensor(np.array(True))
    for t in _tensors(tuple(inputs), "all_finite"):
        if t.dtype.is_floating_point and t.size:
            # x - x is 0 for every finite x and NaN for an inf or a NaN.
            out = ops.logical_and(out, ops.equal(t - t, 0).all())
    return out


def _check_scale_value(scale_value, owner):
    if isinstance(scale_value, bool) or not isinstance(scale_value, (float, int)):
        raise TypeError(f"For '{owner}', the type of 'scale_value' must be float or int, but "
                        f"got {type(scale_value).__name__}.")
    if scale_value < 1.0:
        raise ValueError(f"The argument 'scale_value' must be > 1, but got {scale_value}")
    return Parameter(Tensor(np.array(scale_value, np.float32)), name="scale_value",
                     requires_grad=False)


def _positive_int(value, name, owner):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"For '{owner}', the type of '{name}' must be int, but got "
                        f"{type(value).__name__}.")
    if value <= 0:
        raise ValueError(f"For '{owner}', the '{name}' must be a positive int, but got {value}.")
    return int(value)


def _scaled(scale, inputs, owner, inverse):
    factor = _graph_value(scale)
    if inverse:
        factor = 1.0 / factor
    out = tuple(t * ops.cast(factor, t.dtype) for t in _tensors(inputs, owner))
    return out[0] if is_tensor(inputs) else out


@jit_class
class LossScaler(ABC):
    """The interface of loss scalers: scale(loss), unscale(grads), adjust(grads_finite)."""

    @abstractmethod
    def scale(self, inputs):
        """inputs (a Tensor or a tuple of Tensors) multiplied by the loss scale."""

    @abstractmethod
    def unscale(self, inputs):
        """inputs (a Tensor or a tuple of Tensors) divided by the loss scale."""

    @abstractmethod
    def adjust(self, grads_finite):
        """Updates the loss scale after a step; grads_finite is a bool Tensor of shape ()."""


class StaticLossScaler(LossScaler):
    """A fixed loss scale (scale_value >= 1): scale and unscale multiply and divide by it;
    adjust changes nothing and returns False."""

    def __init__(self, scale_value):
        self.scale_value = _check_scale_value(scale_value, "StaticLossScaler")

    def scale(self, inputs):
        return _scaled(self.scale_value, inputs, "StaticLossScaler.scale", False)

    def unscale(self, inputs):
        return _scaled(self.scale_value, inputs, "StaticLossScaler.unscale", True)

    def adjust(self, grads_finite):
        return False


class DynamicLossScaler(LossScaler):
    """A loss scale that adapts: after scale_window consecutive steps with finite gradients it
    is multiplied by scale_factor (unless that overflows), after a step with non-finite ones it
    is divided by scale_factor (never below 1) and the count starts again. adjust returns True.
    """

    def __init__(self, scale_value, scale_factor, scale_window):
        self.scale_value = _check_scale_value(scale_value, "DynamicLossScaler")
        self.scale_window = _positive_int(scale_window, "scale_window", "DynamicLossScaler")
        self.scale_factor = _positive_int(scale_factor, "scale_factor", "DynamicLossScaler")
        self.counter = Parameter(Tensor(np.array(0, np.int32)), name="counter",
                                 requires_grad=False)

    def scale(self, inputs):
        return _scaled(self.scale_value, inputs, "DynamicLossScaler.scale", False)

    def unscale(self, inputs):
        return _scaled(self.scale_value, inputs, "DynamicLossScaler.unscale", True)

    def adjust(self, grads_finite):
        if not is_tensor(grads_finite):
            grads_finite = Tensor(np.array(bool(grads_finite)))
        finite = ops.cast(grads_finite, mstype.bool_)
        scale, counter = _graph_value(self.scale_value), _graph_value(self.counter)
        grown = scale * self.scale_factor
        grown = ops.where(ops.equal(grown - grown, 0), grown, scale)  # an inf keeps the old one
        at_window = ops.equal(counter, self.scale_window - 1)
        on_finite = ops.where(at_window, grown, scale)
        shrunk = ops.maximum(scale / self.scale_factor, 1.0)
        _copy_into(scale, ops.where(finite, on_finite, shrunk))
        next_count = ops.where(finite, (counter + 1) % self.scale_window, 0)
        _copy_into(counter, ops.cast(next_count, mstype.int32))
        return True
