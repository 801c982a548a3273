"""Class labels and ids outside their range raise IndexError in PyNative and Graph mode alike
(the check lives in the kernels, which are the first to see the values in a compiled graph)."""
import numpy as np
import pytest

import kiln as ms
from kiln import nn, ops

LOGITS = np.arange(6, dtype=np.float32).reshape(2, 3) / 4


@pytest.fixture(params=["pynative", "graph"])
def mode(request):
    ms.set_context(mode=ms.GRAPH_MODE if request.param == "graph" else ms.PYNATIVE_MODE)
    yield request.param
    ms.reset_context()


def run(mode, fn, *args):
    """fn(*args) eagerly, or compiled with ms.jit in graph mode."""
    return (ms.jit(fn) if mode == "graph" else fn)(*args)


def cross_entropy(x, t):
    return ops.cross_entropy(x, t)


def nll_loss(x, t):
    return ops.nll_loss(x, t)


def nll_loss_ignoring_7(x, t):
    return ops.nll_loss(x, t, ignore_index=7)


def one_hot(t):
    return ops.one_hot(t, 3, 1.0, 0.0)


@pytest.mark.parametrize("fn,op,label", [
    (cross_entropy, "cross_entropy", 9), (cross_entropy, "cross_entropy", 3),
    (nll_loss, "nll_loss", -3), (nll_loss_ignoring_7, "nll_loss", 8)])
def test_out_of_range_class_raises(mode, fn, op, label):
    x, t = ms.Tensor(LOGITS), ms.Tensor(np.array([label, 0]))
    with pytest.raises(IndexError, match=rf"{op}: target class {label} is out of range \[0, 3\)"):
        run(mode, fn, x, t)


@pytest.mark.parametrize("ignored", [-100, 7])
def test_ignore_index_outside_the_range_still_works(mode, ignored):
    def loss(x, t):
        return ops.cross_entropy(x, t, ignore_index=ignored)

    x = ms.Tensor(LOGITS)
    got = run(mode, loss, x, ms.Tensor(np.array([ignored, 2]))).asnumpy()
    logp = LOGITS[1] - np.log(np.exp(LOGITS[1]).sum())
    np.testing.assert_allclose(got, -logp[2], rtol=1e-6)


def test_nn_losses_reject_out_of_range_labels(mode):
    x = ms.Tensor(LOGITS)
    for loss, labels in [(nn.CrossEntropyLoss(), [0, 5]),
                         (nn.SoftmaxCrossEntropyWithLogits(sparse=True), [-1, 0])]:
        with pytest.raises(IndexError, match=rf"{type(loss).__name__}: label -?\d is out of "
                                             rf"range \[0, 3\)"):
            loss(x, ms.Tensor(np.array(labels, np.int32)))


@pytest.mark.parametrize("use_one_hot", [False, True])
def test_embedding_rejects_out_of_range_ids(mode, use_one_hot):
    emb = nn.Embedding(4, 2, use_one_hot=use_one_hot)
    np.testing.assert_array_equal(emb(ms.Tensor(np.array([3, 0], np.int32))).asnumpy(),
                                  emb.embedding_table.asnumpy()[[3, 0]])
    with pytest.raises(IndexError, match="out of (range|bounds)"):
        emb(ms.Tensor(np.array([4, 0], np.int32)))


def test_one_hot_keeps_all_off_rows_for_out_of_range_indices_in_both_modes(mode):
    """ops.one_hot's documented (TensorFlow/MindSpore) rule, identical compiled and eager."""
    got = run(mode, one_hot, ms.Tensor(np.array([5, -1, 1]))).asnumpy()
    np.testing.assert_array_equal(got, [[0, 0, 0], [0, 0, 0], [0, 1, 0]])
