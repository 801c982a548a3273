"""ConfusionMatrix (counts of label x prediction) and ConfusionMatrixMetric (a rate such as
sensitivity or precision from the tp/fp/tn/fn counts of binarized, per-class inputs)."""
import numpy as np

from kiln.nn.metrics.metric import Metric, check_input_count, rearrange_inputs

__all__ = ["ConfusionMatrix", "ConfusionMatrixMetric"]

_NORMALIZE = ("target", "prediction", "all", "no_norm")


def check_type(value, types, name, who):
    if isinstance(value, bool) and bool not in types or not isinstance(value, types):
        names = " or ".join(t.__name__ for t in types)
        raise TypeError(f"For '{who}', '{name}' must be {names}, but got "
                        f"{type(value).__name__}.")
    return value


class ConfusionMatrix(Metric):
    """A num_classes x num_classes matrix: entry [i, j] counts samples of label i predicted as
    j. y_pred is either scores with a class axis 1 (its argmax is the prediction), or, with y's
    shape, class indices or probabilities of class 1 (>= threshold). normalize divides by the
    row ('target'), column ('prediction') or overall ('all') totals (0 where a total is 0)."""

    def __init__(self, num_classes, normalize="no_norm", threshold=0.5):
        super().__init__()
        self.num_classes = check_type(num_classes, (int,), "num_classes", "ConfusionMatrix")
        if normalize not in _NORMALIZE:
            raise ValueError(f"For 'ConfusionMatrix', 'normalize' must be one of {_NORMALIZE}, "
                             f"but got {normalize!r}.")
        self.normalize = normalize
        self.threshold = check_type(threshold, (float,), "threshold", "ConfusionMatrix")
        self.clear()

    def clear(self):
        self.confusion_matrix = np.zeros((self.num_classes, self.num_classes))
        self._is_update = False

    @rearrange_inputs
    def update(self, *inputs):
        check_input_count("ConfusionMatrix", inputs, 2)
        y_pred, y = self._convert_data(inputs[0]), self._convert_data(inputs[1])
        if y_pred.ndim == y.ndim + 1:
            y_pred = y_pred.argmax(axis=1)
        elif y_pred.ndim != y.ndim:
            raise ValueError(f"For 'ConfusionMatrix.update', y_pred must have y's dimensions "
                             f"or one more (a class axis), but got y_pred shape {y_pred.shape} "
                             f"and y shape {y.shape}.")
        elif np.issubdtype(y_pred.dtype, np.floating):
            y_pred = (y_pred >= self.threshold).astype(np.int64)
        if y_pred.shape != y.shape:
            raise ValueError(f"For 'ConfusionMatrix.update', the predictions and y must match, "
                             f"but got shapes {y_pred.shape} and {y.shape}.")
        if not (np.array_equal(y, np.round(y)) and np.array_equal(y_pred, np.round(y_pred))):
            raise ValueError("For 'ConfusionMatrix.update', y and the predictions must be class "
                             "indices (whole numbers).")
        labels, preds = y.reshape(-1).astype(np.int64), y_pred.reshape(-1).astype(np.int64)
        n = self.num_classes
        for name, values in (("y", labels), ("y_pred", preds)):
            if values.size and (values.min() < 0 or values.max() >= n):
                raise ValueError(f"For 'ConfusionMatrix.update', {name} holds classes outside "
                                 f"[0, {n}): min {values.min()}, max {values.max()}.")
        self.confusion_matrix += np.bincount(labels * n + preds, minlength=n * n).reshape(n, n)
        self._is_update = True

    def eval(self):
        if not self._is_update:
            raise RuntimeError("For 'ConfusionMatrix', call update before eval.")
        matrix = self.confusion_matrix.astype(float)
        if self.normalize == "no_norm":
            return matrix
        total = {"target": matrix.sum(axis=1, keepdims=True),
                 "prediction": matrix.sum(axis=0, keepdims=True),
                 "all": matrix.sum()}[self.normalize]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, matrix / np.where(total > 0, total, 1), 0.0)


# Every accepted metric name (lower case, spaces as '_') -> its short name.
_ALIASES = {
    "tpr": ("sensitivity", "recall", "hit_rate", "true_positive_rate", "tpr"),
    "tnr": ("specificity", "selectivity", "true_negative_rate", "tnr"),
    "ppv": ("precision", "positive_predictive_value", "ppv"),
    "npv": ("negative_predictive_value", "npv"),
    "fnr": ("miss_rate", "false_negative_rate", "fnr"),
    "fpr": ("fall_out", "false_positive_rate", "fpr"),
    "fdr": ("false_discovery_rate", "fdr"),
    "for": ("false_omission_rate", "for"),
    "pt": ("prevalence_threshold", "pt"),
    "ts": ("threat_score", "critical_success_index", "ts", "csi"),
    "acc": ("accuracy", "acc"),
    "ba": ("balanced_accuracy", "ba"),
    "f1": ("f1_score", "f1"),
    "mcc": ("matthews_correlation_coefficient", "mcc"),
    "fm": ("fowlkes_mallows_index", "fm"),
    "bm": ("informedness", "bookmaker_informedness", "bm"),
    "mk": ("markedness", "deltap", "mk"),
}
_SHORT = {alias: short for short, aliases in _ALIASES.items() for alias in aliases}
_DECREASE = ("none", "mean", "sum", "mean_batch", "sum_batch", "mean_channel", "sum_channel")


def short_metric_name(name):
    short = _SHORT.get(name.replace(" ", "_").lower())
    if short is None:
        raise NotImplementedError(f"For 'ConfusionMatrixMetric', the metric {name!r} is not "
                                  f"implemented; known names: {sorted(_SHORT)}.")
    return short


def _ratio(a, b):
    """a / b elementwise, NaN where b is 0."""
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(b != 0, a / np.where(b != 0, b, 1), np.nan)


def metric_of_counts(short, counts):
    """The metric `short` of counts [..., 4] = (tp, fp, tn, fn); NaN where undefined."""
    tp, fp, tn, fn = (counts[..., i] for i in range(4))
    p, n = tp + fn, fp + tn
    tpr, tnr = _ratio(tp, p), _ratio(tn, n)
    ppv, npv = _ratio(tp, tp + fp), _ratio(tn, tn + fn)
    table = {
        "tpr": lambda: tpr, "tnr": lambda: tnr, "ppv": lambda: ppv, "npv": lambda: npv,
        "fnr": lambda: _ratio(fn, p), "fpr": lambda: _ratio(fp, n),
        "fdr": lambda: _ratio(fp, fp + tp), "for": lambda: _ratio(fn, fn + tn),
        "pt": lambda: _ratio(np.sqrt(tpr * (1.0 - tnr)) + tnr - 1.0, tpr + tnr - 1.0),
        "ts": lambda: _ratio(tp, tp + fn + fp), "acc": lambda: _ratio(tp + tn, p + n),
        "ba": lambda: (tpr + tnr) / 2.0, "f1": lambda: _ratio(2.0 * tp, 2.0 * tp + fn + fp),
        "mcc": lambda: _ratio(tp * tn - fp * fn,
                              np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))),
        "fm": lambda: np.sqrt(ppv * tpr), "bm": lambda: tpr + tnr - 1.0,
        "mk": lambda: ppv + npv - 1.0,
    }
    return table[short]()


def per_sample_counts(y_pred, y, skip_channel):
    """(batch, class, 4) counts of tp, fp, tn, fn over the other axes of binarized inputs;
    without skip_channel the first class (the background) is left out."""
    if not skip_channel and y.shape[1] > 1:
        y, y_pred = y[:, 1:], y_pred[:, 1:]
    batch, classes = y_pred.shape[:2]
    y_pred = y_pred.astype(float).reshape(batch, classes, -1)
    y = y.astype(float).reshape(batch, classes, -1)
    tp = ((y_pred == 1) & (y == 1)).sum(axis=2).astype(float)
    tn = ((y_pred == 0) & (y == 0)).sum(axis=2).astype(float)
    positives = y.sum(axis=2)
    negatives = y.shape[-1] - positives
    return np.stack([tp, negatives - tn, tn, positives - tp], axis=-1)


def reduce_values(values, how):
    """Reduce (batch, class) values, skipping NaNs, as `how` says; returns (values, count of
    the non-NaN values that went in)."""
    valid = ~np.isnan(values)
    values = np.where(valid, values, 0.0)
    count = valid.astype(float)
    if how == "none":
        return values, count
    if how.endswith("batch") or how.endswith("channel"):
        axis = 0 if how.endswith("batch") else 1
        total, count = values.sum(axis=axis), count.sum(axis=axis)
        if how.startswith("sum"):
            return total, count
        return np.where(count > 0, total / np.where(count > 0, count, 1), 0.0), count
    if how == "sum":
        return values.sum(), count.sum()
    # mean: over classes per sample, then over the samples that had any valid class
    per_sample = count.sum(axis=1)
    means = np.where(per_sample > 0, values.sum(axis=1) / np.where(per_sample > 0,
                                                                   per_sample, 1), 0.0)
    samples = float((per_sample > 0).sum())
    return (means.sum() / samples if samples else 0.0), samples


class ConfusionMatrixMetric(Metric):
    """A rate of the confusion counts of binarized y_pred and y, both (batch, class, ...).
    calculation_method=False: the counts of all updates are summed and eval() returns the
    metric of the totals (an array of one value). True: the metric is computed per sample and
    class, reduced with `decrease` (NaNs skipped), and eval() averages over updates."""

    def __init__(self, skip_channel=True, metric_name="sensitivity", calculation_method=False,
                 decrease="mean"):
        super().__init__()
        who = "ConfusionMatrixMetric"
        self.skip_channel = check_type(skip_channel, (bool,), "skip_channel", who)
        self.calculation_method = check_type(calculation_method, (bool,),
                                             "calculation_method", who)
        self.metric_name = check_type(metric_name, (str,), "metric_name", who)
        self._short = short_metric_name(metric_name)
        check_type(decrease, (str,), "decrease", who)
        if decrease not in _DECREASE:
            raise ValueError(f"For '{who}', 'decrease' must be one of {_DECREASE}, but got "
                             f"{decrease!r}.")
        self.decrease = decrease
        self.clear()

    def clear(self):
        self._total_num = 0.0
        self._class_num = 0
        self._counts = np.zeros(4)

    @rearrange_inputs
    def update(self, *inputs):
        who = "ConfusionMatrixMetric.update"
        check_input_count("ConfusionMatrixMetric", inputs, 2)
        y_pred, y = self._convert_data(inputs[0]), self._convert_data(inputs[1])
        if y_pred.ndim < 2:
            raise ValueError(f"For '{who}', y_pred must have at least 2 dimensions (batch, "
                             f"class, ...), but got shape {y_pred.shape}.")
        if y_pred.shape != y.shape:
            raise ValueError(f"For '{who}', y_pred and y must have the same shape, but got "
                             f"{y_pred.shape} and {y.shape}.")
        if not np.all((y == 0) | (y == 1)):
            raise ValueError(f"For '{who}', y must be binarized (0 or 1).")
        counts = per_sample_counts(y_pred, y, self.skip_channel)
        if self.calculation_method:
            score, valid = reduce_values(metric_of_counts(self._short, counts), self.decrease)
            if np.ndim(score):
                raise ValueError(f"For '{who}', calculation_method=True needs a decrease "
                                 f"that gives one value ('mean' or 'sum'), got "
                                 f"{self.decrease!r}.")
            self._total_num += float(score) * int(valid)
            self._class_num += int(valid)
        else:
            self._counts = self._counts + counts.sum(axis=(0, 1))
            self._class_num += 1

    def eval(self):
        if self._class_num == 0:
            raise RuntimeError("'ConfusionMatrixMetric' can not be calculated: no samples were "
                               "seen. Call update before eval.")
        if self.calculation_method:
            return self._total_num / self._class_num
        return metric_of_counts(self._short, self._counts[None, :])
