"""Top-k categorical accuracy: a sample counts when its label is among the k largest scores."""
import numpy as np

from kiln.nn.metrics.metric import (
    Metric,
    check_input_count,
    is_one_hot,
    no_samples,
    rearrange_inputs,
)

__all__ = ["TopKCategoricalAccuracy", "Top1CategoricalAccuracy", "Top5CategoricalAccuracy"]


class TopKCategoricalAccuracy(Metric):
    """y_pred (N, C) scores, y (N,) labels or (N, C) one-hot; eval() is the fraction of samples
    whose label is one of their k highest-scoring classes."""

    def __init__(self, k):
        super().__init__()
        who = type(self).__name__
        if not isinstance(k, int) or isinstance(k, bool):
            raise TypeError(f"For '{who}', 'k' must be an int, but got {type(k).__name__}.")
        if k < 1:
            raise ValueError(f"For '{who}', 'k' must be at least 1, but got {k}.")
        self.k = k
        self.clear()

    def clear(self):
        self._correct_num = 0
        self._samples_num = 0

    @rearrange_inputs
    def update(self, *inputs):
        who = type(self).__name__
        check_input_count(who, inputs, 2)
        y_pred, y = self._convert_data(inputs[0]), self._convert_data(inputs[1])
        if y_pred.ndim == y.ndim and is_one_hot(y):
            y = y.argmax(axis=1)
        if y_pred.ndim != 2 or y.reshape(-1).shape[0] != y_pred.shape[0]:
            raise ValueError(f"For '{who}.update', y_pred must be (N, C) and y (N,) or one-hot "
                             f"(N, C), but got y_pred shape {y_pred.shape} and y shape "
                             f"{y.shape}.")
        # stable sort of the negated scores: among equal scores the lower class ranks first
        top = np.argsort(-y_pred, axis=1, kind="stable")[:, :self.k]
        hits = (top == y.reshape(-1, 1)).any(axis=1)
        self._correct_num += int(hits.sum())
        self._samples_num += y_pred.shape[0]

    def eval(self):
        if self._samples_num == 0:
            raise no_samples(type(self).__name__)
        return np.float64(self._correct_num) / self._samples_num


class Top1CategoricalAccuracy(TopKCategoricalAccuracy):
    """TopKCategoricalAccuracy with k = 1."""

    def __init__(self):
        super().__init__(1)


class Top5CategoricalAccuracy(TopKCategoricalAccuracy):
    """TopKCategoricalAccuracy with k = 5."""

    def __init__(self):
        super().__init__(5)
