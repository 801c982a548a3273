"""Loss-scale managers (MindSpore's kiln.amp / kiln.train names): the loss scale a mixed-precision
training step multiplies the loss by, and the update Cell that TrainOneStepWithLossScaleCell runs
each step to adjust it."""
import numbers

from kiln import nn

__all__ = ["LossScaleManager", "FixedLossScaleManager", "DynamicLossScaleManager"]


def _number(value, what, owner):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"For '{owner}', the argument '{what}' must be a number, but got "
                        f"{type(value).__name__} {value!r}.")
    return value


class LossScaleManager:
    """The interface of loss-scale managers: get_loss_scale() is the current scale,
    update_loss_scale(overflow) adjusts it on the Python side, get_update_cell() gives the Cell
    that adjusts it inside a training step (or None)."""

    def get_loss_scale(self):
        """The current loss scale."""

    def update_loss_scale(self, overflow):
        """Adjusts the loss scale after a step that did (True) or did not overflow."""

    def get_update_cell(self):
        """The Cell TrainOneStepWithLossScaleCell calls each step, or None."""


class FixedLossScaleManager(LossScaleManager):
    """A constant loss scale. With drop_overflow_update=True (the default) a step whose
    gradients overflow is skipped (get_update_cell gives a FixedLossScaleUpdateCell); with
    False, no overflow check runs and the optimizer must divide by the same loss_scale (its
    own `loss_scale` argument)."""

    def __init__(self, loss_scale=128.0, drop_overflow_update=True):
        _number(loss_scale, "loss_scale", "FixedLossScaleManager")
        if loss_scale < 1:
            raise ValueError(f"The argument 'loss_scale' must be >= 1, but got {loss_scale}")
        if not isinstance(drop_overflow_update, bool):
            raise TypeError(f"For 'FixedLossScaleManager', the argument 'drop_overflow_update' "
                            f"must be a bool, but got {drop_overflow_update!r}.")
        self._loss_scale = loss_scale
        self._drop_overflow_update = drop_overflow_update

    def get_loss_scale(self):
        return self._loss_scale

    def get_drop_overflow_update(self):
        return self._drop_overflow_update

    def update_loss_scale(self, overflow):
        """The scale is fixed: nothing changes."""

    def get_update_cell(self):
        if not self._drop_overflow_update:
            return None
        return nn.FixedLossScaleUpdateCell(self._loss_scale)


class DynamicLossScaleManager(LossScaleManager):
    """A loss scale that shrinks by scale_factor on each overflow (never below 1) and grows by
    scale_factor after scale_window consecutive steps without one. Overflowing steps are
    always skipped."""

    def __init__(self, init_loss_scale=2 ** 24, scale_factor=2, scale_window=2000):
        owner = "DynamicLossScaleManager"
        _number(init_loss_scale, "init_loss_scale", owner)
        _number(scale_factor, "scale_factor", owner)
        if init_loss_scale < 1.0:
            raise ValueError(f"The argument 'init_loss_scale' must be > 1, but got "
                             f"{init_loss_scale}")
        if isinstance(scale_window, bool) or not isinstance(scale_window, int):
            raise TypeError(f"For '{owner}', the argument 'scale_window' must be an int, but got "
                            f"{type(scale_window).__name__} {scale_window!r}.")
        if scale_window <= 0:
            raise ValueError(f"For '{owner}', the argument 'scale_window' must be a positive "
                             f"int, but got {scale_window}.")
        if scale_factor <= 0:
            raise ValueError(f"The argument 'scale_factor' must be > 0, but got {scale_factor}")
        self.loss_scale = init_loss_scale
        self.scale_window = scale_window
        self.scale_factor = scale_factor
        self.increase_ratio = scale_factor
        self.decrease_ratio = 1 / scale_factor
        self.cur_iter = 1
        self.last_overflow_iter = 0
        self.bad_step_max = 1000
        self.bad_step = 0

    def get_loss_scale(self):
        return self.loss_scale

    def update_loss_scale(self, overflow):
        """The Python-side rule: shrink on overflow; grow when the steps since the last
        overflow are a multiple of scale_window. More than bad_step_max overflows in a row is a
        RuntimeError (training has diverged)."""
        if overflow:
            self.loss_scale = max(self.loss_scale * self.decrease_ratio, 1)
            self.last_overflow_iter = self.cur_iter
            self.bad_step += 1
        else:
            if (self.cur_iter - self.last_overflow_iter) % self.scale_window == 0:
                self.loss_scale *= self.increase_ratio
            self.bad_step = 0
        if self.bad_step > self.bad_step_max:
            raise RuntimeError(f"Dynamic loss scale: {self.bad_step} overflows in a row, more "
                               f"than the maximum of {self.bad_step_max}.")
        self.cur_iter += 1

    def get_drop_overflow_update(self):
        return True

    def get_update_cell(self):
        return nn.DynamicLossScaleUpdateCell(self.loss_scale, self.scale_factor,
                                             self.scale_window)
