"""Metric base class, the `rearrange_inputs` decorator and helpers the metrics share."""
import functools
from abc import ABCMeta, abstractmethod

import numpy as np

from kiln.common.tensor import Tensor

__all__ = ["Metric", "rearrange_inputs"]

EVAL_TYPES = ("classification", "multilabel")


def rearrange_inputs(func):
    """Decorates a metric's `update(*inputs)` so that, when the metric has `indexes`, the
    method receives `inputs[i] for i in indexes` instead (the order `set_indexes` chose)."""

    @functools.wraps(func)
    def update(self, *inputs):
        order = self.indexes
        if order:
            inputs = [inputs[i] for i in order]
        return func(self, *inputs)

    return update


class Metric(metaclass=ABCMeta):
    """Base of the evaluation metrics. A subclass accumulates with `update(*inputs)`, returns
    the result with `eval()` and resets with `clear()`; calling the metric does all three."""

    def __init__(self):
        self._indexes = None

    def _convert_data(self, data):
        """A Tensor, a list or a NumPy array as a NumPy array; anything else is a TypeError."""
        if isinstance(data, Tensor):
            return data.asnumpy()
        if isinstance(data, list):
            return np.array(data)
        if isinstance(data, np.ndarray):
            return data
        raise TypeError(f"For '{type(self).__name__}', an input must be a Tensor, a list or a "
                        f"numpy.ndarray, but got {type(data)}.")

    @property
    def indexes(self):
        """Which of update's inputs are used and in which order (None: all, as given)."""
        return getattr(self, "_indexes", None)

    def set_indexes(self, indexes):
        """Use `inputs[i] for i in indexes` in `update` (when it is decorated with
        `rearrange_inputs`), e.g. [2, 1] picks (logits, label) out of (label0, label, logits).
        Returns the metric itself."""
        if not isinstance(indexes, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in indexes):
            raise ValueError(f"For 'set_indexes', 'indexes' must be a list of int, but got "
                             f"{indexes!r}.")
        self._indexes = indexes
        return self

    def __call__(self, *inputs):
        """The metric of `inputs` alone: clear, update once, eval."""
        self.clear()
        self.update(*inputs)
        return self.eval()

    @abstractmethod
    def clear(self):
        """Reset the accumulated state."""
        raise NotImplementedError(f"{type(self).__name__} must define clear")

    @abstractmethod
    def eval(self):
        """The metric of everything passed to update since the last clear."""
        raise NotImplementedError(f"{type(self).__name__} must define eval")

    @abstractmethod
    def update(self, *inputs):
        """Accumulate one batch, usually (predictions, labels)."""
        raise NotImplementedError(f"{type(self).__name__} must define update")


class EvaluationBase(Metric):
    """Base of the metrics with an `eval_type` of 'classification' (y_pred has a class axis 1
    that y lacks) or 'multilabel' (y_pred and y of one shape, every value 0 or 1)."""

    def __init__(self, eval_type):
        super().__init__()
        if eval_type not in EVAL_TYPES:
            raise TypeError(f"For '{type(self).__name__}', 'eval_type' must be one of "
                            f"{EVAL_TYPES}, but got {eval_type!r}.")
        self._type = eval_type

    def _check_shape(self, y_pred, y):
        who = type(self).__name__
        if self._type == "classification":
            if y_pred.ndim != y.ndim + 1:
                raise ValueError(f"For '{who}' (classification), y_pred must have one more "
                                 f"dimension than y, but got y_pred shape {y_pred.shape} and y "
                                 f"shape {y.shape}.")
            if y.shape != (y_pred.shape[0],) + y_pred.shape[2:]:
                raise ValueError(f"For '{who}' (classification), y's shape must be y_pred's "
                                 f"without axis 1, but got y_pred shape {y_pred.shape} and y "
                                 f"shape {y.shape}.")
        elif y_pred.shape != y.shape:
            raise ValueError(f"For '{who}' ({self._type}), y_pred and y must have the same "
                             f"shape, but got y_pred shape {y_pred.shape} and y shape "
                             f"{y.shape}.")

    def _check_value(self, y_pred, y):
        if self._type == "multilabel" and not (is_binary(y_pred) and is_binary(y)):
            raise ValueError(f"For '{type(self).__name__}' (multilabel), every value of y_pred "
                             f"and y must be 0 or 1.")

    def _prepare(self, inputs):
        """(y_pred, y) as checked arrays; a one-hot y of a classification becomes indices."""
        who = type(self).__name__
        if len(inputs) != 2:
            raise ValueError(f"For '{who}.update', it needs 2 inputs (y_pred, y), but got "
                             f"{len(inputs)}.")
        y_pred, y = self._convert_data(inputs[0]), self._convert_data(inputs[1])
        if self._type == "classification" and y_pred.ndim == y.ndim and is_one_hot(y):
            y = y.argmax(axis=1)
        self._check_shape(y_pred, y)
        self._check_value(y_pred, y)
        if y_pred.ndim < 2:
            raise ValueError(f"For '{who}.update', y_pred must have a class axis (at least 2 "
                             f"dimensions), but got shape {y_pred.shape}.")
        if self._class_num == 0:
            self._class_num = y_pred.shape[1]
        elif y_pred.shape[1] != self._class_num:
            raise ValueError(f"For '{who}.update', the number of classes changed: earlier "
                             f"y_pred had {self._class_num}, this one has {y_pred.shape[1]}.")
        return y_pred, y

    def clear(self):
        raise NotImplementedError(f"{type(self).__name__} must define clear")

    def update(self, *inputs):
        raise NotImplementedError(f"{type(self).__name__} must define update")

    def eval(self):
        raise NotImplementedError(f"{type(self).__name__} must define eval")


def is_binary(a):
    """Every value of `a` is 0 or 1."""
    return bool(np.all((a == 0) | (a == 1)))


def is_one_hot(y):
    """y (at least 2-D) holds 0/1 values with exactly one 1 along axis 1 everywhere."""
    return y.ndim > 1 and is_binary(y) and bool(np.all(y.sum(axis=1) == 1))


def check_input_count(who, inputs, count):
    if len(inputs) != count:
        raise ValueError(f"For '{who}.update', it needs {count} inputs, but got {len(inputs)}.")


def no_samples(who):
    return RuntimeError(f"'{who}' can not be calculated: no samples were seen. Call update "
                        f"with non-empty inputs before eval.")
