"""kiln.nn losses vs NumPy: MSELoss, L1Loss, CrossEntropyLoss, SoftmaxCrossEntropyWithLogits."""
import numpy as np
import pytest
from helpers import assert_close

import kiln as ms
from kiln import Tensor, nn

RNG = np.random.default_rng(1)


def log_softmax(x, axis=-1):
    x = x.astype(np.float64)
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_and_l1(reduction):
    a = RNG.standard_normal((4, 5)).astype(np.float32)
    b = RNG.standard_normal((4, 5)).astype(np.float32)
    reduce = {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction]
    assert_close(nn.MSELoss(reduction)(Tensor(a), Tensor(b)), reduce((a - b) ** 2), rtol=1e-5)
    assert_close(nn.L1Loss(reduction)(Tensor(a), Tensor(b)), reduce(np.abs(a - b)), rtol=1e-5)


def test_loss_argument_errors():
    with pytest.raises(ValueError, match="MSELoss: reduction"):
        nn.MSELoss("avg")
    with pytest.raises(ValueError, match=r"MSELoss.*\(2, 3\).*\(3, 2\)"):
        nn.MSELoss()(Tensor(np.zeros((2, 3), np.float32)), Tensor(np.zeros((3, 2), np.float32)))


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
def test_cross_entropy_class_indices(label_dtype):
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    y = np.array([0, 3, 1, 2, 2, 0], label_dtype)
    ref = -log_softmax(x)[np.arange(6), y]
    assert_close(nn.CrossEntropyLoss()(Tensor(x), Tensor(y)), ref.mean(), rtol=1e-5)
    assert_close(nn.CrossEntropyLoss(reduction="sum")(Tensor(x), Tensor(y)), ref.sum(),
                 rtol=1e-5)
    assert_close(nn.CrossEntropyLoss(reduction="none")(Tensor(x), Tensor(y)), ref, rtol=1e-5)


def test_cross_entropy_weight_ignore_index_and_smoothing():
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    y = np.array([0, 2, -100, 1, 2], np.int32)
    w = np.array([0.2, 1.0, 3.0], np.float32)
    lp = log_softmax(x)
    valid = y != -100
    ys = np.where(valid, y, 0)
    per = -lp[np.arange(5), ys] * w[ys] * valid
    loss = nn.CrossEntropyLoss(weight=Tensor(w))(Tensor(x), Tensor(y))
    assert_close(loss, per.sum() / (w[ys] * valid).sum(), rtol=1e-5)
    eps = 0.1
    target = np.eye(3)[ys] * (1 - eps) + eps / 3
    per = -(target * lp).sum(1) * valid
    loss = nn.CrossEntropyLoss(label_smoothing=eps)(Tensor(x), Tensor(y))
    assert_close(loss, per.sum() / valid.sum(), rtol=1e-5)


def test_cross_entropy_probabilities_and_spatial():
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    p = np.abs(RNG.standard_normal((4, 3))).astype(np.float32)
    p /= p.sum(1, keepdims=True)
    ref = -(p * log_softmax(x)).sum(1).mean()
    assert_close(nn.CrossEntropyLoss()(Tensor(x), Tensor(p)), ref, rtol=1e-5)
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)    # (N, C, d)
    y = RNG.integers(0, 3, (2, 4)).astype(np.int32)
    lp = log_softmax(x, axis=1)
    ref = -np.take_along_axis(lp, y[:, None, :], 1)[:, 0, :]
    assert_close(nn.CrossEntropyLoss(reduction="none")(Tensor(x), Tensor(y)), ref, rtol=1e-5)
    with pytest.raises(ValueError, match="CrossEntropyLoss"):
        nn.CrossEntropyLoss()(Tensor(x), Tensor(np.zeros((2, 5), np.int32)))


def test_softmax_cross_entropy_with_logits():
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    y = np.array([1, 0, 3, 3, 2], np.int32)
    ref = -log_softmax(x)[np.arange(5), y]
    sparse = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    assert_close(sparse(Tensor(x), Tensor(y)), ref.mean(), rtol=1e-5)
    dense = nn.SoftmaxCrossEntropyWithLogits()         # sparse=False, reduction='none'
    assert_close(dense(Tensor(x), Tensor(np.eye(4, dtype=np.float32)[y])), ref, rtol=1e-5)
    with pytest.raises(ValueError, match="SoftmaxCrossEntropyWithLogits"):
        sparse(Tensor(x), Tensor(np.eye(4, dtype=np.float32)[y]))


def test_large_logits_do_not_overflow():
    x = np.array([[1000.0, 0.0]], np.float32)
    loss = nn.CrossEntropyLoss()(Tensor(x), Tensor(np.array([1], np.int32)))
    assert_close(loss, 1000.0, rtol=1e-5)
    assert ms.Tensor(loss).asnumpy() == pytest.approx(1000.0)
