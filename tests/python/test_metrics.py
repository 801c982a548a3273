"""Metrics (kiln.train.metrics, also kiln.nn.*) against NumPy reference computations written
here: accumulation over batches, Tensor/NumPy/list inputs, indexes, edge cases and errors."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn, train
from kiln.train.metrics import Metric, get_metric_fn, get_metrics, names, rearrange_inputs

RNG = np.random.default_rng(14)


def logits(n, c):
    return RNG.normal(0, 1, (n, c))


# ---- Metric base, indexes and the name lookup ----

class SumAbs(Metric):
    """A user metric the way the MindSpore tutorial writes one."""

    def __init__(self):
        super().__init__()
        self.clear()

    def clear(self):
        self.total, self.count = 0.0, 0

    @rearrange_inputs
    def update(self, *inputs):
        a, b = self._convert_data(inputs[0]), self._convert_data(inputs[1])
        self.total += np.abs(a - b).sum()
        self.count += a.shape[0]

    def eval(self):
        return self.total / self.count


def test_custom_metric_with_indexes_and_call():
    x, y, z = np.array([1.0, 2.0]), np.array([0.0, 0.0]), np.array([1.5, 2.5])
    m = SumAbs()
    assert m.indexes is None
    assert m.set_indexes([0, 2]) is m and m.indexes == [0, 2]
    m.update(Tensor(x), y, [1.5, 2.5])
    assert m.eval() == pytest.approx(np.abs(x - z).sum() / 2)
    assert m(x, y, z) == pytest.approx(0.5)  # __call__ clears first
    with pytest.raises(ValueError, match="set_indexes"):
        m.set_indexes((0, 1))
    with pytest.raises(ValueError, match="set_indexes"):
        m.set_indexes([0, "1"])
    with pytest.raises(TypeError, match="SumAbs.*tuple"):
        m.update((1, 2), y, z)
    with pytest.raises(TypeError):
        Metric()  # abstract


def test_names_and_lookup():
    # MindSpore 2.10's mindspore.train.names()
    assert names() == [
        "F1", "acc", "accuracy", "auc", "bleu_score", "confusion_matrix",
        "confusion_matrix_metric", "cosine_similarity", "dice", "hausdorff_distance", "loss",
        "mae", "mean_surface_distance", "mse", "occlusion_sensitivity", "perplexity",
        "precision", "recall", "roc", "root_mean_square_distance", "top_1_accuracy",
        "top_5_accuracy", "topk"]
    assert isinstance(get_metric_fn("accuracy", "multilabel"), train.Accuracy)
    with pytest.raises(KeyError, match="nope"):
        get_metric_fn("nope")
    made = get_metrics({"acc"})
    assert list(made) == ["acc"] and isinstance(made["acc"], train.Accuracy)
    given = {"a": train.Accuracy()}
    assert get_metrics(given) is given and get_metrics(None) is None
    with pytest.raises(TypeError, match="get_metrics"):
        get_metrics({"a": 1})
    with pytest.raises(TypeError, match="get_metrics"):
        get_metrics(["acc"])


def test_exported_where_mindspore_has_them():
    assert nn.Accuracy is train.Accuracy is ms.Accuracy is train.metrics.Accuracy
    assert ms.Metric is nn.Metric is Metric
    from kiln.train.metrics.metric import Metric as FromModule
    assert FromModule is Metric


# ---- Accuracy ----

def test_accuracy_classification_accumulates():
    m = train.Accuracy()
    right = total = 0
    for n in (5, 7):
        x, y = logits(n, 4), RNG.integers(0, 4, n)
        m.update(Tensor(x.astype(np.float32)), Tensor(y.astype(np.int32)))
        right += (x.argmax(1) == y).sum()
        total += n
    assert m.eval() == pytest.approx(right / total)
    assert isinstance(m.eval(), np.floating)


def test_low_precision_and_parameter_inputs():
    scores = Tensor(np.array([[0.2, 0.8], [0.9, 0.1]], np.float32), ms.bfloat16)
    assert train.Accuracy()(scores, Tensor(np.array([1, 1], np.int32))) == 0.5
    weights = ms.Parameter(Tensor(np.ones((2, 2), np.float32)))
    assert train.MAE()(weights, np.zeros((2, 2))) == 2.0


def test_accuracy_documented_example_and_input_kinds():
    x = [[0.2, 0.5], [0.3, 0.1], [0.9, 0.6]]
    for y in ([1, 0, 1], np.array([1, 0, 1]), Tensor(np.array([1, 0, 1], np.float32)),
              np.eye(2)[[1, 0, 1]]):
        assert train.Accuracy()(x, y) == pytest.approx(2 / 3)


def test_accuracy_segmentation_shape_and_multilabel():
    x, y = logits(2, 3).reshape(2, 3, 1) + logits(2, 3 * 4).reshape(2, 3, 4), \
        RNG.integers(0, 3, (2, 4))
    assert train.Accuracy()(x, y) == pytest.approx((x.argmax(1) == y).mean())
    p, t = RNG.integers(0, 2, (6, 3)), RNG.integers(0, 2, (6, 3))
    t[0] = p[0]
    assert train.Accuracy("multilabel")(p, t) == pytest.approx((p == t).all(1).mean())


def test_accuracy_errors():
    m = train.Accuracy()
    with pytest.raises(RuntimeError, match="Accuracy"):
        m.eval()
    with pytest.raises(TypeError, match="eval_type"):
        train.Accuracy("regression")
    with pytest.raises(ValueError, match="2 inputs"):
        m.update(logits(2, 3))
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(5,\)"):
        m.update(logits(4, 3), np.zeros(5))
    with pytest.raises(ValueError, match="dimension"):
        m.update(logits(4, 3), np.zeros((4, 2, 2)))
    m.update(logits(4, 3), np.zeros(4))
    with pytest.raises(ValueError, match="classes"):
        m.update(logits(4, 5), np.zeros(4))
    with pytest.raises(ValueError, match="0 or 1"):
        train.Accuracy("multilabel").update(np.full((2, 2), 0.5), np.ones((2, 2)))
    with pytest.raises(ValueError, match="same shape"):
        train.Accuracy("multilabel").update(np.ones((2, 2)), np.ones((2, 3)))
    m.clear()
    with pytest.raises(RuntimeError):
        m.eval()


# ---- Precision, Recall, Fbeta, F1 ----

def class_counts(x, y, c):
    """Reference one-vs-rest counts per class: (tp, predicted positives, actual positives)."""
    pred = x.argmax(1)
    tp = np.array([np.sum((pred == k) & (y == k)) for k in range(c)], float)
    return tp, np.array([np.sum(pred == k) for k in range(c)], float), \
        np.array([np.sum(y == k) for k in range(c)], float)


def two_batches(c=4):
    xs = [logits(9, c), logits(6, c)]
    ys = [RNG.integers(0, c, 9), RNG.integers(0, c, 6)]
    ys[0][:c] = np.arange(c)  # every class present
    return xs, ys


def test_precision_recall_fbeta_per_class_and_average():
    xs, ys = two_batches()
    tp, predicted, actual = class_counts(np.concatenate(xs), np.concatenate(ys), 4)
    safe = lambda a, b: np.where(b > 0, a / np.where(b > 0, b, 1), 0.0)  # noqa: E731
    want = {"Precision": safe(tp, predicted), "Recall": safe(tp, actual)}
    for beta in (0.5, 1.0, 2.0):
        want[beta] = safe((1 + beta ** 2) * tp, beta ** 2 * actual + predicted)
    for key, ref in want.items():
        m = train.Fbeta(key) if isinstance(key, float) else getattr(train, key)()
        for x, y in zip(xs, ys):
            m.update(Tensor(x), y.tolist())
        np.testing.assert_allclose(m.eval(), ref, rtol=1e-12)
        assert m.eval(True) == pytest.approx(ref.mean())
    np.testing.assert_allclose(train.F1()(xs[0], ys[0]), train.Fbeta(1)(xs[0], ys[0]))


def test_precision_recall_multilabel_are_per_sample():
    p = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 0]])
    t = np.array([[1, 1, 0], [0, 1, 0], [1, 1, 0]])
    np.testing.assert_allclose(train.Precision("multilabel")(p, t), [0.5, 0.0, 1.0])
    np.testing.assert_allclose(train.Recall("multilabel")(p, t), [0.5, 0.0, 1.0])
    m = train.Recall("multilabel")
    m.update(p, t)
    m.update(t[:1], t[:1])
    np.testing.assert_allclose(m.eval(), [0.5, 0.0, 1.0, 1.0])
    assert m.eval(average=True) == pytest.approx(2.5 / 4)


def test_precision_recall_fbeta_errors():
    for m in (train.Precision(), train.Recall(), train.F1()):
        with pytest.raises(RuntimeError):
            m.eval()
        m.update(logits(3, 2), [0, 1, 1])
        with pytest.raises(TypeError, match="average"):
            m.eval(1)
        with pytest.raises(ValueError, match="class 4"):
            m.update(logits(3, 2), [0, 4, 1])
        with pytest.raises(ValueError, match="whole numbers"):
            m.update(logits(3, 2), [0, 0.5, 1])
    with pytest.raises(ValueError, match="beta"):
        train.Fbeta(0)
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(4,\)"):
        train.F1().update(logits(3, 2), [0, 1, 1, 0])
    with pytest.raises(TypeError, match="eval_type"):
        train.Recall("binary")


# ---- MAE, MSE, Loss ----

def test_mae_mse_sum_per_sample_over_samples():
    a, b = RNG.normal(0, 1, (5, 3)), RNG.normal(0, 1, (5, 3))
    c, d = RNG.normal(0, 1, (2, 3)), RNG.normal(0, 1, (2, 3))
    mae, mse = train.MAE(), train.MSE()
    for m in (mae, mse):
        m.update(Tensor(a.astype(np.float32)), b.astype(np.float32))
        m.update(c.reshape(2, 3, 1), d)  # y is reshaped to y_pred's shape
    assert mae.eval() == pytest.approx((np.abs(a - b).sum() + np.abs(c - d).sum()) / 7, 1e-6)
    assert mse.eval() == pytest.approx((((a - b) ** 2).sum() + ((c - d) ** 2).sum()) / 7, 1e-6)
    assert type(mae.eval()) is np.float64 and type(mse.eval()) is np.float64
    with pytest.raises(ValueError, match=r"\(5, 3\).*\(4,\)"):
        mae.update(a, np.zeros(4))
    mse.clear()
    with pytest.raises(RuntimeError, match="MSE"):
        mse.eval()


def test_loss_averages_updates():
    m = train.Loss()
    m.update(Tensor(np.float32(2.0)))
    m.update(np.array([1.0, 3.0, 5.0]))
    assert m.eval() == pytest.approx((2.0 + 3.0) / 2) and type(m.eval()) is np.float64
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        m.update(np.ones((2, 2)))
    with pytest.raises(ValueError, match="1 inputs"):
        m.update(1.0, 2.0)
    with pytest.raises(RuntimeError):
        train.Loss().eval()


# ---- TopK ----

def test_topk_against_a_rank_count():
    x, y = logits(20, 6), RNG.integers(0, 6, 20)
    rank = (x > x[np.arange(20), y][:, None]).sum(1)  # how many classes beat the label
    for k in (1, 2, 5):
        m = train.TopKCategoricalAccuracy(k)
        m.update(x[:12], y[:12])
        m.update(Tensor(x[12:]), np.eye(6)[y[12:]])  # one-hot labels
        assert m.eval() == pytest.approx((rank < k).mean())
    assert train.Top1CategoricalAccuracy()(x, y) == pytest.approx((rank < 1).mean())
    assert train.Top5CategoricalAccuracy()(x, y) == pytest.approx((rank < 5).mean())
    with pytest.raises(TypeError, match="k"):
        train.TopKCategoricalAccuracy(2.0)
    with pytest.raises(ValueError, match="k"):
        train.TopKCategoricalAccuracy(0)
    with pytest.raises(ValueError, match=r"\(20, 6\).*\(3,\)"):
        train.Top1CategoricalAccuracy().update(x, y[:3])
    with pytest.raises(RuntimeError):
        train.Top5CategoricalAccuracy().eval()


# ---- ConfusionMatrix ----

def counted(y, pred, n):
    m = np.zeros((n, n))
    for i, j in zip(y, pred):
        m[i, j] += 1
    return m


def test_confusion_matrix_counts_and_normalizations():
    x1, y1, x2, y2 = logits(10, 3), RNG.integers(0, 3, 10), logits(5, 3), RNG.integers(0, 3, 5)
    y1[:2] = 2  # class 2 present; class predictions may miss one: a zero column
    raw = counted(np.r_[y1, y2], np.r_[x1.argmax(1), x2.argmax(1)], 3)
    rows, cols = raw.sum(1, keepdims=True), raw.sum(0, keepdims=True)
    want = {"no_norm": raw, "all": raw / raw.sum(),
            "target": np.where(rows > 0, raw / np.maximum(rows, 1), 0),
            "prediction": np.where(cols > 0, raw / np.maximum(cols, 1), 0)}
    for normalize, ref in want.items():
        m = train.ConfusionMatrix(3, normalize)
        m.update(Tensor(x1), y1)
        m.update(x2, Tensor(y2.astype(np.int32)))
        np.testing.assert_allclose(m.eval(), ref)


def test_confusion_matrix_threshold_and_indices():
    p, y = np.array([0.1, 0.6, 0.3, 0.9]), np.array([0, 1, 1, 0])
    np.testing.assert_array_equal(train.ConfusionMatrix(2, threshold=0.25)(p, y),
                                  [[1, 1], [0, 2]])
    np.testing.assert_array_equal(train.ConfusionMatrix(2)(p, y), [[1, 1], [1, 1]])
    np.testing.assert_array_equal(train.ConfusionMatrix(3)(np.array([2, 0]), np.array([2, 1])),
                                  counted([2, 1], [2, 0], 3))


def test_confusion_matrix_errors():
    with pytest.raises(TypeError, match="num_classes"):
        train.ConfusionMatrix(2.0)
    with pytest.raises(TypeError, match="threshold"):
        train.ConfusionMatrix(2, threshold=1)
    with pytest.raises(ValueError, match="normalize"):
        train.ConfusionMatrix(2, "rows")
    m = train.ConfusionMatrix(2)
    with pytest.raises(RuntimeError, match="update"):
        m.eval()
    with pytest.raises(ValueError, match="outside"):
        m.update(np.array([0, 2]), np.array([0, 1]))
    with pytest.raises(ValueError, match="dimensions"):
        m.update(np.zeros((2, 2, 2)), np.zeros(2))


def reference_counts(p, y):
    """(tp, fp, tn, fn) summed over everything, by a loop."""
    tp = fp = tn = fn = 0
    for a, b in zip(p.reshape(-1), y.reshape(-1)):
        tp, fp = tp + (a == 1 and b == 1), fp + (a == 1 and b == 0)
        tn, fn = tn + (a == 0 and b == 0), fn + (a == 0 and b == 1)
    return tp, fp, tn, fn


def test_confusion_matrix_metric_of_totals():
    p, y = RNG.integers(0, 2, (3, 2, 4, 4)), RNG.integers(0, 2, (3, 2, 4, 4))
    tp, fp, tn, fn = reference_counts(p, y)
    want = {"sensitivity": tp / (tp + fn), "Specificity": tn / (tn + fp),
            "precision": tp / (tp + fp), "f1 score": 2 * tp / (2 * tp + fp + fn),
            "accuracy": (tp + tn) / (tp + tn + fp + fn),
            "mcc": (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)),
            "ba": (tp / (tp + fn) + tn / (tn + fp)) / 2}
    for name, ref in want.items():
        m = train.ConfusionMatrixMetric(metric_name=name)
        m.update(Tensor(p[:2]), y[:2])
        m.update(p[2:], y[2:])
        np.testing.assert_allclose(m.eval(), [ref])
    # without skip_channel the first channel (background) is left out
    tp, fp, tn, fn = reference_counts(p[:, 1:], y[:, 1:])
    np.testing.assert_allclose(train.ConfusionMatrixMetric(False, "tpr")(p, y), [tp / (tp + fn)])


def test_confusion_matrix_metric_per_sample_mean():
    p, y = RNG.integers(0, 2, (3, 2, 5)), RNG.integers(0, 2, (3, 2, 5))
    y[0, 0] = 0  # no positives: this sample/class has no sensitivity and is skipped
    scores = []
    for b in range(3):
        per_class = []
        for c in range(2):
            tp, _, _, fn = reference_counts(p[b, c], y[b, c])
            if tp + fn:
                per_class.append(tp / (tp + fn))
        scores.append(np.mean(per_class))
    m = train.ConfusionMatrixMetric(metric_name="recall", calculation_method=True)
    assert m(p, y) == pytest.approx(np.mean(scores))


def test_confusion_matrix_metric_errors():
    with pytest.raises(NotImplementedError, match="nope"):
        train.ConfusionMatrixMetric(metric_name="nope")
    with pytest.raises(ValueError, match="decrease"):
        train.ConfusionMatrixMetric(decrease="median")
    with pytest.raises(TypeError, match="skip_channel"):
        train.ConfusionMatrixMetric(skip_channel=1)
    m = train.ConfusionMatrixMetric()
    with pytest.raises(RuntimeError):
        m.eval()
    with pytest.raises(ValueError, match="binarized"):
        m.update(np.ones((2, 2)), np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="same shape"):
        m.update(np.ones((2, 2)), np.ones((2, 3)))


# ---- ROC, auc ----

def reference_roc(scores, positive):
    """(fpr, tpr) at each distinct threshold, highest first, starting at (0, 0)."""
    fpr, tpr = [0.0], [0.0]
    for t in sorted(set(scores), reverse=True):
        chosen = scores >= t
        tpr.append((chosen & positive).sum() / positive.sum())
        fpr.append((chosen & ~positive).sum() / (~positive).sum())
    return np.array(fpr), np.array(tpr)


def test_roc_binary_with_ties_and_pos_label():
    scores = np.array([0.1, 0.4, 0.4, 0.8, 0.3, 0.9, 0.1])
    labels = np.array([0, 1, 0, 1, 0, 1, 1])
    for pos in (1, 0):
        fpr, tpr, thresholds = train.ROC(pos_label=pos)(Tensor(scores), labels)
        ref_fpr, ref_tpr = reference_roc(scores, labels == pos)
        np.testing.assert_allclose(fpr, ref_fpr)
        np.testing.assert_allclose(tpr, ref_tpr)
        np.testing.assert_allclose(thresholds, [1.9, 0.9, 0.8, 0.4, 0.3, 0.1])
    # auc of the curve: the probability that a positive outscores a negative (ties count 1/2)
    pos, neg = scores[labels == 1], scores[labels == 0]
    pairs = (pos[:, None] > neg[None]).mean() + 0.5 * (pos[:, None] == neg[None]).mean()
    fpr, tpr, _ = train.ROC()(scores, labels)
    assert train.auc(fpr, tpr) == pytest.approx(pairs)


def test_roc_one_vs_rest():
    x, y = RNG.uniform(0, 1, (9, 3)), np.array([0, 1, 2, 0, 1, 2, 0, 1, 2])
    fpr, tpr, thresholds = train.ROC(class_num=3)(x, y)
    assert len(fpr) == len(tpr) == len(thresholds) == 3
    for c in range(3):
        ref_fpr, ref_tpr = reference_roc(x[:, c], y == c)
        np.testing.assert_allclose(fpr[c], ref_fpr)
        np.testing.assert_allclose(tpr[c], ref_tpr)


def test_roc_uses_the_last_update_and_errors():
    m = train.ROC()
    with pytest.raises(RuntimeError, match="update"):
        m.eval()
    m.update(np.array([0.2, 0.7]), np.array([1, 0]))
    m.update(np.array([0.2, 0.7]), np.array([0, 1]))
    np.testing.assert_allclose(m.eval()[1], [0, 1, 1])
    with pytest.raises(ValueError, match="negative samples"):
        train.ROC()(np.array([0.2, 0.7]), np.array([1, 1]))
    with pytest.raises(ValueError, match="class_num"):
        train.ROC(class_num=2)(np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="class_num"):
        train.ROC(class_num=2)(np.zeros((3, 3)), np.zeros(3))
    with pytest.raises(ValueError, match="pos_label"):
        train.ROC(class_num=3, pos_label=1)(np.zeros((3, 3)), np.zeros(3))
    with pytest.raises(TypeError, match="class_num"):
        train.ROC(class_num=2.0)


def test_auc_trapezoid_and_errors():
    x, y = np.array([0.0, 0.2, 0.5, 1.0]), np.array([0.0, 0.5, 0.7, 1.0])
    want = 0.2 * 0.25 + 0.3 * 0.6 + 0.5 * 0.85
    assert train.auc(x, y) == pytest.approx(want)
    assert train.auc(x[::-1], y[::-1]) == pytest.approx(want)  # decreasing x
    assert train.auc(x[[2, 0, 3, 1]], y[[2, 0, 3, 1]], reorder=True) == pytest.approx(want)
    assert train.auc(x.reshape(4, 1), y) == pytest.approx(want)
    with pytest.raises(ValueError, match="increasing or decreasing"):
        train.auc(x[[2, 0, 3, 1]], y)
    with pytest.raises(TypeError, match="ndarray"):
        train.auc([0, 1], [0, 1])
    with pytest.raises(ValueError, match="2 points"):
        train.auc(np.array([0.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="same number"):
        train.auc(x, y[:3])


# ---- Dice ----

def test_dice_one_coefficient_per_update_over_samples():
    a, b = RNG.uniform(0, 1, (3, 4)), RNG.integers(0, 2, (3, 4))
    c, d = RNG.uniform(0, 1, (2, 4)), RNG.integers(0, 2, (2, 4))

    def coefficient(p, t):
        return 2 * (p * t).sum() / ((p * p).sum() + (t * t).sum() + 1e-5)

    m = train.Dice()
    m.update(Tensor(a), b)
    m.update(c, d.tolist())
    assert m.eval() == pytest.approx((coefficient(a, b) + coefficient(c, d)) / 5)
    with pytest.raises(TypeError, match="smooth"):
        train.Dice(1)
    with pytest.raises(ValueError, match="smooth"):
        train.Dice(-1.0)
    with pytest.raises(ValueError, match="same shape"):
        m.update(a, b[:, :2])
    with pytest.raises(RuntimeError, match="Dice"):
        train.Dice().eval()


def test_every_name_makes_its_metric():
    needs_arg = {"topk": 2, "confusion_matrix": 2}
    for name in names():
        if name == "auc":  # a function, not a class: get_metric_fn calls it
            assert get_metric_fn(name, np.array([0.0, 1.0]), np.array([1.0, 1.0])) == 1.0
            continue
        made = get_metric_fn(name, *([needs_arg[name]] if name in needs_arg else []))
        assert isinstance(made, Metric), name
    assert isinstance(get_metric_fn("F1"), train.F1)
    assert isinstance(get_metric_fn("top_5_accuracy"), train.Top5CategoricalAccuracy)
