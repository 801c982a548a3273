"""MAE, MSE (errors per sample, averaged over samples) and Loss (mean of the losses seen)."""
import numpy as np

from kiln.nn.metrics.metric import Metric, check_input_count, no_samples, rearrange_inputs

__all__ = ["MAE", "MSE", "Loss"]


class _Error(Metric):
    """Sum of a per-element error over everything seen, divided by the number of samples (the
    first axis of y): a sample's error is the sum over its elements, as in MindSpore."""

    def __init__(self):
        super().__init__()
        self.clear()

    def clear(self):
        self._error_sum = 0
        self._samples_num = 0

    def _error(self, diff):
        raise NotImplementedError

    @rearrange_inputs
    def update(self, *inputs):
        who = type(self).__name__
        check_input_count(who, inputs, 2)
        y_pred, y = self._convert_data(inputs[0]), self._convert_data(inputs[1])
        if y.size != y_pred.size:
            raise ValueError(f"For '{who}.update', y must have as many elements as y_pred (it "
                             f"is reshaped to y_pred's shape), but got y_pred shape "
                             f"{y_pred.shape} and y shape {y.shape}.")
        if y.ndim == 0:
            raise ValueError(f"For '{who}.update', y must have a sample axis, but got a scalar.")
        # summed in the inputs' dtype, accumulated as float64: the result MindSpore gives
        # under NumPy 1.x (its 0 + float32 scalar widens), whatever NumPy kiln runs with
        self._error_sum += np.float64(self._error(y.reshape(y_pred.shape) - y_pred).sum())
        self._samples_num += y.shape[0]

    def eval(self):
        if self._samples_num == 0:
            raise no_samples(type(self).__name__)
        return self._error_sum / self._samples_num


class MAE(_Error):
    """Mean absolute error: sum |y - y_pred| / number of samples."""

    def _error(self, diff):
        return np.abs(diff)


class MSE(_Error):
    """Mean squared error: sum (y - y_pred)^2 / number of samples."""

    def _error(self, diff):
        return np.square(diff)


class Loss(Metric):
    """The average of the losses passed to update: each update takes one loss (a scalar, or a
    1-D array whose mean is taken) and counts once."""

    def __init__(self):
        super().__init__()
        self.clear()

    def clear(self):
        self._sum_loss = 0
        self._total_num = 0

    @rearrange_inputs
    def update(self, *inputs):
        check_input_count("Loss", inputs, 1)
        loss = self._convert_data(inputs[0])
        if loss.ndim == 0:
            loss = loss.reshape(1)
        if loss.ndim != 1:
            raise ValueError(f"For 'Loss.update', the loss must be a scalar or 1-D, but got "
                             f"shape {loss.shape}.")
        self._sum_loss += np.float64(loss.mean(-1))  # float64, as _Error accumulates
        self._total_num += 1

    def eval(self):
        if self._total_num == 0:
            raise no_samples("Loss")
        return self._sum_loss / self._total_num
