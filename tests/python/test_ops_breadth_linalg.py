"""Determinants, inverses, Cholesky (linalg_solve.py) and the network helpers of nn_ext.py
(unique, lrn, mirror_pad, iou, unpooling, rotary embedding, ...): NumPy references (MindSpore
2.10 gave the same values where its CPU build runs them), both modes, gradients."""
import numpy as np
import pytest
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor, ops

F32 = np.float32
RNG = np.random.default_rng(0)
M = RNG.normal(size=(2, 4, 4)).astype(F32)
SPD = (M @ M.transpose(0, 2, 1) + 4 * np.eye(4)).astype(F32)


def both_modes(fn, *args):
    def run(*a):
        return fn(*a)

    return assert_same_in_both_modes(run, *args)


def np_lrn(x, r, bias, alpha, beta):
    sq = np.pad(x * x, ((0, 0), (r, r), (0, 0), (0, 0)))
    total = sum(sq[:, i:i + x.shape[1]] for i in range(2 * r + 1))
    return x / (bias + alpha * total) ** beta


CASES = [
    ("det", ops.det, np.linalg.det, M), ("matrix_determinant", ops.matrix_determinant,
                                         np.linalg.det, M),
    ("slogdet", ops.slogdet, lambda a: tuple(np.linalg.slogdet(a)), M),
    ("log_matrix_determinant", ops.log_matrix_determinant, lambda a: tuple(np.linalg.slogdet(a)),
     M),
    ("logdet", ops.logdet, lambda a: np.log(np.linalg.det(a)), SPD),
    ("inverse", ops.inverse, np.linalg.inv, M), ("cholesky", ops.cholesky, np.linalg.cholesky,
                                                 SPD),
    ("cholesky_upper", lambda x: ops.cholesky(x, True),
     lambda a: np.linalg.cholesky(a).transpose(0, 2, 1), SPD),
    ("cholesky_inverse", lambda x: ops.cholesky_inverse(ops.cholesky(x)), np.linalg.inv, SPD),
    ("cholesky_solve", lambda x: ops.cholesky_solve(x[..., :2], ops.cholesky(x)),
     lambda a: np.linalg.solve(a, a[..., :2]), SPD),
    ("lrn", lambda x: ops.lrn(x, 2, 2.0, 0.5, 0.75), lambda a: np_lrn(a, 2, 2.0, 0.5, 0.75),
     np.abs(M).reshape(1, 4, 2, 4)),
    ("mirror_pad_reflect", lambda x: ops.mirror_pad(x, [[0, 0], [1, 2], [3, 0]], "REFLECT"),
     lambda a: np.pad(a, ((0, 0), (1, 2), (3, 0)), "reflect"), M),
    ("mirror_pad_symmetric", lambda x: ops.mirror_pad(x, [[1, 0], [0, 0], [2, 4]], "SYMMETRIC"),
     lambda a: np.pad(a, ((1, 0), (0, 0), (2, 4)), "symmetric"), M),
    ("rope_half", lambda x: ops.rotary_position_embedding(x, x * 0 + 0.5, x * 0 + 0.25),
     lambda a: a * 0.5 + np.concatenate([-a[..., 2:], a[..., :2]], -1) * 0.25, M),
    ("rope_pairs", lambda x: ops.rotary_position_embedding(x, x * 0 + 0.5, x * 0 + 0.25, 1),
     lambda a: a * 0.5 + np.stack([-a[..., 1::2], a[..., ::2]], -1).reshape(a.shape) * 0.25, M),
    ("bidense", lambda x: ops.bidense(x[0], x[1], x),
     lambda a: np.einsum("ni,oij,nj->no", a[0], a, a[1]), M),
    ("mse_loss_ext", lambda x: ops.mse_loss_ext(x, x * 0.5, "sum"),
     lambda a: np.sum((a * 0.5) ** 2), M),
]


@pytest.mark.parametrize("name,fn,ref,x", CASES, ids=[c[0] for c in CASES])
def test_matches_numpy_in_both_modes(name, fn, ref, x):
    got, want = both_modes(fn, Tensor(x)), ref(x.astype(np.float64))
    got = list(got) if isinstance(got, tuple) else [got]
    want = list(want) if isinstance(want, tuple) else [want]
    for g, w in zip(got, want):
        assert g.shape == np.shape(w), f"{name}: {g.shape} != {np.shape(w)}"
        np.testing.assert_allclose(g.asnumpy(), w, rtol=2e-4, atol=2e-5, err_msg=name)


def test_unique_family():
    values, idx = both_modes(ops.unique, Tensor(np.array([3, 1, 3, 2, 1, 5], np.int32)))
    assert values.asnumpy().tolist() == [3, 1, 2, 5]  # order of first appearance
    assert idx.dtype == ms.int32 and idx.asnumpy().tolist() == [0, 1, 0, 2, 1, 3]
    out, inv, counts = ops.unique_consecutive(Tensor(np.array([1, 1, 2, 2, 1], np.int32)), True,
                                              True)
    assert out.asnumpy().tolist() == [1, 2, 1] and inv.asnumpy().tolist() == [0, 0, 1, 1, 2]
    assert counts.dtype == ms.int64 and counts.asnumpy().tolist() == [2, 2, 1]
    assert ops.unique(Tensor(np.array([[0.5, -1.0], [0.5, 2.0]], F32)))[1].shape == (2, 2)


def test_boxes_and_unpooling():
    anchors = Tensor(np.array([[0, 0, 2, 2], [1, 0, 4, 2]], F32))
    gts = Tensor(np.array([[1, 1, 3, 3], [0, 0, 1, 1]], F32))
    np.testing.assert_allclose(ops.iou(anchors, gts).asnumpy(),
                               [[4 / 14, 6 / 15], [4 / 9, 2 / 14]], rtol=1e-6)
    np.testing.assert_allclose(ops.iou(anchors, gts, "iof").asnumpy(), [[4 / 9, 6 / 9],
                                                                         [1.0, 0.5]], rtol=1e-6)
    x = Tensor(np.array([[[[5.0, 8.0], [1.0, 2.0]]]], F32))
    idx = Tensor(np.array([[[[1, 7], [8, 15]]]]))
    out = both_modes(lambda a: ops.max_unpool2d(a, idx, 2), x).asnumpy().reshape(-1)
    assert out.tolist() == [0, 5, 0, 0, 0, 0, 0, 8, 1, 0, 0, 0, 0, 0, 0, 2]
    out = ops.max_unpool1d(Tensor(np.array([[[5.0, 8.0]]], F32)), Tensor(np.array([[[1, 3]]])), 2)
    assert out.asnumpy().tolist() == [[[0, 5, 0, 8]]]
    pooled = ops.adaptive_max_pool1d(Tensor(np.array([[[1.0, 5.0, 2.0, 8.0]]], F32)), 2)
    assert pooled.asnumpy().tolist() == [[[5.0, 8.0]]]


def test_gumbel_softmax():
    ms.set_seed(1)
    logits = Tensor(np.log(np.array([[0.1, 0.6, 0.3]] * 2000, F32)))
    soft = ops.gumbel_softmax(logits, 0.5)
    np.testing.assert_allclose(soft.asnumpy().sum(-1), 1.0, rtol=1e-5)
    hard = ops.gumbel_softmax(logits, 1.0, hard=True).asnumpy()
    assert set(np.unique(hard)) == {0.0, 1.0}
    assert abs(hard.mean(0)[1] - 0.6) < 0.04


GRAD = [
    ("det", ops.det), ("slogdet", lambda x: ops.slogdet(x)[1]), ("inverse", ops.inverse),
    ("cholesky", lambda x: ops.cholesky(ops.matmul(x, x.swapaxes(-1, -2)) + 3 * ops.eye(3))),
    ("lrn", lambda x: ops.lrn(ops.reshape(x, (1, 3, 1, 3)), 1)),
    ("mirror_pad", lambda x: ops.mirror_pad(x, [[1, 1], [0, 2]], "REFLECT")),
    ("bidense", lambda x: ops.bidense(x, x * x, ops.stack([x, x * 2], 0))),
    ("rope", lambda x: ops.rotary_position_embedding(x[:, :2], x[:, 1:] * 0.5, x[:, 1:], 1)),
]


@pytest.mark.parametrize("name,fn", GRAD, ids=[g[0] for g in GRAD])
def test_gradient_matches_finite_differences(name, fn):
    x = np.array([[1.3, 0.2, -0.5], [0.4, -1.1, 0.7], [0.6, 0.9, 2.1]])
    check_grad(fn, x, rtol=1e-4, atol=1e-6)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="det: input must be square"):
        ops.det(Tensor(np.zeros((2, 3), F32)))
    with pytest.raises(TypeError, match="inverse: input must be a float"):
        ops.inverse(Tensor(np.eye(2, dtype=np.int32)))
    with pytest.raises(ValueError, match="mirror_pad: padding"):
        ops.mirror_pad(Tensor(np.zeros((2, 2), F32)), [[2, 0], [0, 0]], "REFLECT")
    with pytest.raises(ValueError, match="unique_consecutive: dim"):
        ops.unique_consecutive(Tensor(np.zeros(3, F32)), dim=0)
    with pytest.raises(ValueError, match="iou: mode"):
        ops.iou(Tensor(np.zeros((1, 4), F32)), Tensor(np.zeros((1, 4), F32)), "giou")
