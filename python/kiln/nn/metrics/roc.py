"""ROC (false/true positive rates at each distinct score threshold) and auc (trapezoidal area
under a curve given by its x and y points)."""
import numpy as np

from kiln.nn.metrics.confusion_matrix import check_type
from kiln.nn.metrics.metric import Metric, check_input_count, rearrange_inputs

__all__ = ["ROC", "auc"]


def binary_curve(scores, target, pos_label):
    """(fps, tps, thresholds): counts of negatives and positives scoring >= each distinct
    score, highest score first."""
    order = np.argsort(-scores, kind="stable")
    scores, hits = scores[order], (target[order] == pos_label).astype(np.int64)
    # the last index of each run of equal scores closes one threshold
    last = np.r_[np.nonzero(np.diff(scores))[0], scores.shape[0] - 1]
    tps = np.cumsum(hits)[last]
    return 1 + last - tps, tps, scores[last]


def roc_binary(scores, target, pos_label):
    fps, tps, thresholds = binary_curve(scores, target, pos_label)
    # the curve starts at (0, 0): a threshold above every score
    fps, tps = np.r_[0, fps], np.r_[0, tps]
    thresholds = np.r_[thresholds[0] + 1, thresholds]
    if fps[-1] <= 0:
        raise ValueError("For 'ROC.eval', y has no negative samples, so the false positive rate "
                         "is undefined.")
    if tps[-1] <= 0:
        raise ValueError("For 'ROC.eval', y has no positive samples, so the true positive rate "
                         "is undefined.")
    return fps / fps[-1], tps / tps[-1], thresholds


class ROC(Metric):
    """Binary (y_pred and y of one shape; `pos_label` is the positive class, default 1) or
    one-vs-rest per class (y_pred (N, C) with class_num = C, y (N,) class indices). eval()
    returns (fpr, tpr, thresholds), arrays, or lists of one array per class. As in MindSpore,
    eval uses the inputs of the last update."""

    def __init__(self, class_num=None, pos_label=None):
        super().__init__()
        self.class_num = None if class_num is None else check_type(class_num, (int,),
                                                                   "class_num", "ROC")
        self.pos_label = None if pos_label is None else check_type(pos_label, (int,),
                                                                   "pos_label", "ROC")
        self.clear()

    def clear(self):
        self.y_pred = 0
        self.y = 0
        self.sample_weights = None
        self._is_update = False

    @rearrange_inputs
    def update(self, *inputs):
        check_input_count("ROC", inputs, 2)
        y_pred, y = self._convert_data(inputs[0]), self._convert_data(inputs[1])
        if y_pred.ndim == y.ndim:
            if self.class_num not in (None, 1):
                raise ValueError(f"For 'ROC', y_pred and y of one shape are a binary problem, "
                                 f"so class_num must be 1 or None, but got {self.class_num}.")
            if y_pred.size != y.size:
                raise ValueError(f"For 'ROC', y_pred and y must have the same number of "
                                 f"elements, but got shapes {y_pred.shape} and {y.shape}.")
            self.class_num = 1
            self.pos_label = 1 if self.pos_label is None else self.pos_label
            y_pred, y = y_pred.reshape(-1), y.reshape(-1)
        elif y_pred.ndim == y.ndim + 1:
            if self.pos_label is not None:
                raise ValueError(f"For 'ROC', pos_label must be None when y_pred has a class "
                                 f"axis, but got {self.pos_label}.")
            if self.class_num != y_pred.shape[1]:
                raise ValueError(f"For 'ROC', class_num must equal the classes of y_pred, but "
                                 f"got class_num {self.class_num} and y_pred shape "
                                 f"{y_pred.shape}.")
            y_pred = np.moveaxis(y_pred, 1, -1).reshape(-1, self.class_num)
            y = y.reshape(-1)
            if y_pred.shape[0] != y.shape[0]:
                raise ValueError(f"For 'ROC', y must have one label per row of y_pred, but got "
                                 f"shapes {inputs[0].shape} and {inputs[1].shape}.")
        else:
            raise ValueError(f"For 'ROC', y_pred must have y's dimensions or one more, but got "
                             f"y_pred shape {y_pred.shape} and y shape {y.shape}.")
        self.y_pred, self.y = y_pred, y
        self._is_update = True

    def eval(self):
        if not self._is_update:
            raise RuntimeError("For 'ROC', call update before eval.")
        if self.class_num == 1:
            return roc_binary(self.y_pred, self.y, self.pos_label)
        curves = [roc_binary(self.y_pred[:, c], self.y, c) for c in range(self.class_num)]
        return tuple(list(part) for part in zip(*curves))


def _as_1d(a):
    if a.ndim == 1 or (a.ndim == 2 and a.shape[1] == 1):
        return a.reshape(-1)
    raise ValueError(f"For 'auc', x and y must be 1-D (or (n, 1)), but got shape {a.shape}.")


def auc(x, y, reorder=False):
    """Area under the curve through the points (x, y), by the trapezoidal rule. x must be
    monotonic (increasing or decreasing) unless reorder=True, which sorts the points by x."""
    if not isinstance(x, np.ndarray) or not isinstance(y, np.ndarray):
        raise TypeError(f"For 'auc', x and y must be numpy.ndarray, but got {type(x)} and "
                        f"{type(y)}.")
    if x.ndim == 0 or y.ndim == 0 or x.shape[0] != y.shape[0]:
        raise ValueError(f"For 'auc', x and y must have the same number of points, but got "
                         f"shapes {x.shape} and {y.shape}.")
    x, y = _as_1d(x), _as_1d(y)
    if x.shape[0] < 2:
        raise ValueError(f"For 'auc', at least 2 points are needed, but got {x.shape[0]}.")
    direction = 1
    if reorder:
        order = np.lexsort((y, x))
        x, y = x[order], y[order]
    else:
        dx = np.diff(x)
        if np.any(dx < 0):
            if not np.all(dx <= 0):
                raise ValueError(f"For 'auc', x must be increasing or decreasing when reorder "
                                 f"is False, but got {x}.")
            direction = -1
    return direction * np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2.0)
