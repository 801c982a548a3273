"""Precision, Recall, Fbeta and F1 (one-vs-rest counts per class; multilabel per sample)."""
import sys

import numpy as np

from kiln.nn.metrics.metric import EvaluationBase, Metric, is_one_hot, rearrange_inputs

__all__ = ["Precision", "Recall", "Fbeta", "F1"]

# Added to every denominator so that a class never predicted (or never present) scores 0, not
# NaN: the smallest positive normal double, as MindSpore does, so 0/eps is 0 and tp/n unchanged.
EPS = sys.float_info.min


def check_average(average, who):
    if not isinstance(average, bool):
        raise TypeError(f"For '{who}.eval', 'average' must be a bool, but got "
                        f"{type(average).__name__}.")


def one_hot_rows(y_pred, y, class_num, who):
    """Classification inputs as one-hot rows: (argmax of y_pred, labels), each (M, C)."""
    labels = y.reshape(-1)
    if not np.array_equal(labels, np.round(labels)):
        raise ValueError(f"For '{who}.update', y must hold class indices (whole numbers).")
    if labels.size and labels.max() + 1 > class_num:
        raise ValueError(f"For '{who}.update', y has class {int(labels.max())} but y_pred has "
                         f"only {class_num} classes.")
    if labels.size and labels.min() < 0:
        raise ValueError(f"For '{who}.update', y has a negative class {int(labels.min())}.")
    eye = np.eye(class_num)
    return eye[y_pred.argmax(axis=1).reshape(-1)], eye[labels.astype(np.int64)]


class _Counts(EvaluationBase):
    """Precision and Recall: true positives over the predicted (Precision) or actual (Recall)
    positives. Classification accumulates per class; multilabel computes one ratio per sample
    (the labels of a row) and keeps them all, as MindSpore does."""

    def __init__(self, eval_type="classification"):
        super().__init__(eval_type)
        self.clear()

    def clear(self):
        self._class_num = 0
        if self._type == "multilabel":
            self._true_positives, self._denominators = np.empty(0), np.empty(0)
            self._ratio_sum, self._ratio_count = 0.0, 0
        else:
            self._true_positives, self._denominators = 0, 0

    def _denominator(self, y_pred, y):
        raise NotImplementedError

    @rearrange_inputs
    def update(self, *inputs):
        y_pred, y = self._prepare(inputs)
        who = type(self).__name__
        if self._type == "classification":
            # (samples, classes): summing axis 0 counts per class
            y_pred, y = one_hot_rows(y_pred, y, self._class_num, who)
        else:
            # (classes, samples): summing axis 0 counts per sample
            y_pred = np.moveaxis(y_pred, 1, 0).reshape(self._class_num, -1)
            y = np.moveaxis(y, 1, 0).reshape(self._class_num, -1)
        true_positives = (y * y_pred).sum(axis=0)
        denominators = self._denominator(y_pred, y).sum(axis=0)
        if self._type == "multilabel":
            self._ratio_sum += float(np.sum(true_positives / (denominators + EPS)))
            self._ratio_count += len(denominators)
            self._true_positives = np.concatenate((self._true_positives, true_positives))
            self._denominators = np.concatenate((self._denominators, denominators))
        else:
            self._true_positives = self._true_positives + true_positives
            self._denominators = self._denominators + denominators

    def eval(self, average=False):
        """The ratio per class (classification) or per sample (multilabel), as an array; their
        mean when `average` is True."""
        who = type(self).__name__
        if self._class_num == 0:
            raise RuntimeError(f"'{who}' can not be calculated: no samples were seen. Call "
                               f"update before eval.")
        check_average(average, who)
        result = self._true_positives / (self._denominators + EPS)
        if not average:
            return result
        if self._type == "multilabel":
            return np.float64(self._ratio_sum / (self._ratio_count + EPS))
        return result.mean()


class Precision(_Counts):
    """tp / (tp + fp): of the samples predicted as a class, the fraction that are."""

    def _denominator(self, y_pred, y):
        return y_pred


class Recall(_Counts):
    """tp / (tp + fn): of the samples of a class, the fraction predicted as it."""

    def _denominator(self, y_pred, y):
        return y


class Fbeta(Metric):
    """Per class (1 + beta^2) * tp / (beta^2 * (tp + fn) + tp + fp), from the argmax of y_pred
    (N, C) and labels y (N,) or one-hot (N, C); eval(average=True) gives their mean."""

    def __init__(self, beta):
        super().__init__()
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not beta > 0:
            raise ValueError(f"For '{type(self).__name__}', 'beta' must be a number greater "
                             f"than 0, but got {beta!r}.")
        self.beta = beta
        self.clear()

    def clear(self):
        self._true_positives = self._actual_positives = self._positives = 0
        self._class_num = 0

    @rearrange_inputs
    def update(self, *inputs):
        who = type(self).__name__
        if len(inputs) != 2:
            raise ValueError(f"For '{who}.update', it needs 2 inputs (y_pred, y), but got "
                             f"{len(inputs)}.")
        y_pred, y = self._convert_data(inputs[0]), self._convert_data(inputs[1])
        if y_pred.ndim == y.ndim and is_one_hot(y):
            y = y.argmax(axis=1)
        if y_pred.ndim < 2 or y.shape != (y_pred.shape[0],) + y_pred.shape[2:]:
            raise ValueError(f"For '{who}.update', y_pred must be (N, C, ...) and y (N, ...) "
                             f"or one-hot like y_pred, but got y_pred shape {y_pred.shape} and "
                             f"y shape {y.shape}.")
        if self._class_num == 0:
            self._class_num = y_pred.shape[1]
        elif y_pred.shape[1] != self._class_num:
            raise ValueError(f"For '{who}.update', the number of classes changed: earlier "
                             f"y_pred had {self._class_num}, this one has {y_pred.shape[1]}.")
        y_pred, y = one_hot_rows(y_pred, y, self._class_num, who)
        self._positives = self._positives + y_pred.sum(axis=0)
        self._actual_positives = self._actual_positives + y.sum(axis=0)
        self._true_positives = self._true_positives + (y * y_pred).sum(axis=0)

    def eval(self, average=False):
        who = type(self).__name__
        check_average(average, who)
        if self._class_num == 0:
            raise RuntimeError(f"'{who}' can not be calculated: no samples were seen. Call "
                               f"update before eval.")
        b2 = self.beta ** 2
        fbeta = (1.0 + b2) * self._true_positives / (
            b2 * self._actual_positives + self._positives + EPS)
        return fbeta.mean() if average else fbeta


class F1(Fbeta):
    """Fbeta with beta = 1: the harmonic mean of precision and recall, per class."""

    def __init__(self):
        super().__init__(1.0)
