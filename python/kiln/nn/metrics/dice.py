"""Dice: overlap 2 |A.B| / (|A|^2 + |B|^2) of a prediction and a target (segmentation)."""
from kiln.nn.metrics.metric import Metric, check_input_count, no_samples, rearrange_inputs

__all__ = ["Dice"]


class Dice(Metric):
    """Each update adds one coefficient 2 * <y_pred, y> / (<y_pred, y_pred> + <y, y> + smooth)
    of the whole batch; eval() divides their sum by the number of samples seen (the first axis
    of y), which is MindSpore's definition."""

    def __init__(self, smooth=1e-5):
        super().__init__()
        if not isinstance(smooth, float):
            raise TypeError(f"For 'Dice', 'smooth' must be a float, but got "
                            f"{type(smooth).__name__}.")
        if not smooth > 0:
            raise ValueError(f"For 'Dice', 'smooth' must be positive, but got {smooth}.")
        self.smooth = float(smooth)
        self.clear()

    def clear(self):
        self._dice_coeff_sum = 0
        self._samples_num = 0

    @rearrange_inputs
    def update(self, *inputs):
        check_input_count("Dice", inputs, 2)
        y_pred, y = self._convert_data(inputs[0]), self._convert_data(inputs[1])
        if y_pred.shape != y.shape or y.ndim == 0:
            raise ValueError(f"For 'Dice.update', y_pred and y must have the same shape (with "
                             f"a sample axis), but got {y_pred.shape} and {y.shape}.")
        a, b = y_pred.reshape(-1).astype(float), y.reshape(-1).astype(float)
        self._dice_coeff_sum += 2.0 * float(a @ b) / float(a @ a + b @ b + self.smooth)
        self._samples_num += y.shape[0]

    def eval(self):
        if self._samples_num == 0:
            raise no_samples("Dice")
        return self._dice_coeff_sum / float(self._samples_num)
