"""Accuracy: the fraction of samples predicted right (classification or multilabel)."""
import numpy as np

from kiln.nn.metrics.metric import EvaluationBase, no_samples, rearrange_inputs

__all__ = ["Accuracy"]


class Accuracy(EvaluationBase):
    """Classification: a sample is right when y_pred's argmax over axis 1 equals the label (y
    holds indices, or one-hot rows). Multilabel: when all of its 0/1 labels match.
    eval() returns correct / total as a NumPy float64."""

    def __init__(self, eval_type="classification"):
        super().__init__(eval_type)
        self.clear()

    def clear(self):
        self._correct_num = 0
        self._total_num = 0
        self._class_num = 0

    @rearrange_inputs
    def update(self, *inputs):
        y_pred, y = self._prepare(inputs)
        if self._type == "classification":
            right = (y_pred.argmax(axis=1) == y).reshape(-1)
        else:
            # every position along the other axes is one sample with class_num labels
            rows_pred = np.moveaxis(y_pred, 1, -1).reshape(-1, self._class_num)
            rows_true = np.moveaxis(y, 1, -1).reshape(-1, self._class_num)
            right = (rows_pred == rows_true).all(axis=1)
        self._correct_num += int(right.sum())
        self._total_num += right.shape[0]

    def eval(self):
        if self._total_num == 0:
            raise no_samples("Accuracy")
        return np.float64(self._correct_num) / self._total_num
