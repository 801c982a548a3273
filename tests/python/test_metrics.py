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
    assert names() == sorted(names()) and {"acc", "accuracy"} <= set(names())
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
