"""kiln.mint: PyTorch-style signatures and MindSpore 2.10's results, against NumPy, both modes."""
import inspect

import numpy as np
import pytest
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor, mint
from kiln.mint.nn import functional as F

RNG = np.random.default_rng(5)
A = RNG.standard_normal((3, 4)).astype(np.float32)
I = np.arange(12, dtype=np.int32).reshape(3, 4) - 4

# (id, mint call, numpy reference, inputs, expected dtype or None for the reference's)
CASES = [
    ("sum_int64", lambda x: mint.sum(x), np.sum, (I,), ms.int64),
    ("sum_dim", lambda x: mint.sum(x, dim=1, keepdim=True), lambda a: a.sum(1, keepdims=True),
     (A,), None),
    ("mean_int_keeps_dtype", lambda x: mint.mean(x), lambda a: np.trunc(a.mean()), (I,),
     ms.int32),
    ("mean_dim", lambda x: mint.mean(x, 1, True), lambda a: a.mean(1, keepdims=True), (A,), None),
    ("prod_int64", lambda x: mint.prod(x + 5, 1), lambda a: (a + 5).prod(1), (I,), ms.int64),
    ("max_all", lambda x: mint.max(x), np.max, (A,), None),
    ("max_dim", lambda x: mint.max(x, 1)[0], lambda a: a.max(1), (A,), None),
    ("max_dim_indices", lambda x: mint.max(x, dim=1, keepdim=True)[1],
     lambda a: a.argmax(1)[:, None], (A,), ms.int64),
    ("max_other", lambda x, y: mint.max(x, y), np.maximum, (A, A.T.reshape(3, 4)), None),
    ("min_dim", lambda x: mint.min(x, 0)[0], lambda a: a.min(0), (A,), None),
    ("amax_all", lambda x: mint.amax(x), np.max, (A,), None),
    ("amin_dim", lambda x: mint.amin(x, 1), lambda a: a.min(1), (A,), None),
    ("argmax_flat", lambda x: mint.argmax(x), np.argmax, (A,), ms.int64),
    ("argmin_dim", lambda x: mint.argmin(x, 1, keepdim=True), lambda a: a.argmin(1)[:, None],
     (A,), ms.int64),
    ("all", lambda x: mint.all(x, 1), lambda a: a.all(1), (I,), ms.bool_),
    ("any", lambda x: mint.any(x, dim=0, keepdim=True), lambda a: a.any(0, keepdims=True), (I,),
     ms.bool_),
    ("logsumexp", lambda x: mint.logsumexp(x, 1), lambda a: np.log(np.exp(a).sum(1)), (A,), None),
    ("softmax", lambda x: mint.softmax(x, dim=0), lambda a: np.exp(a) / np.exp(a).sum(0), (A,),
     None),
    ("transpose_swaps", lambda x: mint.transpose(x, 0, 1), np.transpose, (A,), None),
    ("permute", lambda x: mint.permute(x, (1, 0)), np.transpose, (A,), None),
    ("cat", lambda x: mint.cat((x, x), dim=1), lambda a: np.concatenate((a, a), 1), (A,), None),
    ("stack", lambda x: mint.stack((x, x), 1), lambda a: np.stack((a, a), 1), (A,), None),
    ("flatten", lambda x: mint.flatten(x), np.ravel, (A,), None),
    ("reshape", lambda x: mint.reshape(x, (4, 3)), lambda a: a.reshape(4, 3), (A,), None),
    ("squeeze", lambda x: mint.squeeze(x[:1], 0), lambda a: a[0], (A,), None),
    ("unsqueeze", lambda x: mint.unsqueeze(x, -1), lambda a: a[..., None], (A,), None),
    ("gather", lambda x, i: mint.gather(x, 1, i), lambda a, i: np.take_along_axis(a, i, 1),
     (A, np.array([[0, 3], [1, 1], [2, 0]], np.int64)), None),
    ("select", lambda x: mint.select(x, 1, 2), lambda a: a[:, 2], (A,), None),
    ("flip", lambda x: mint.flip(x, (0,)), lambda a: a[::-1], (A,), None),
    ("ravel", lambda x: mint.ravel(x), np.ravel, (A,), None),
    ("t", lambda x: mint.t(x), np.transpose, (A,), None),
    ("clone", lambda x: mint.clone(x), np.copy, (A,), None),
    ("bitwise_not", lambda x: mint.bitwise_not(x), np.invert, (I,), None),
    ("where", lambda x: mint.where(x > 0, x, 0.5), lambda a: np.where(a > 0, a, 0.5), (A,), None),
    ("add_alpha", lambda x: mint.add(x, x, alpha=3), lambda a: 4 * a, (A,), None),
    ("sub_alpha", lambda x: mint.sub(x, 1, alpha=2), lambda a: a - 2, (A,), None),
    ("clamp", lambda x: mint.clamp(x, -0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), (A,), None),
    ("div_floor", lambda x: mint.div(x, 3, rounding_mode="floor"), lambda a: a // 3, (I,), None),
    ("eq", lambda x: mint.eq(x, 0), lambda a: a == 0, (I,), None),
    ("zeros", lambda x: mint.zeros((2, 3)) + x[0, 0] * 0, lambda a: np.zeros((2, 3)), (A,),
     ms.float32),
    ("ones_int", lambda x: mint.ones(3, dtype=ms.int32), lambda a: np.ones(3, np.int32), (A,),
     None),
    ("full_int64", lambda x: mint.full((2,), 3), lambda a: np.full(2, 3), (A,), ms.int64),
    ("arange", lambda x: mint.arange(1, 9, 2), lambda a: np.arange(1, 9, 2), (A,), ms.int64),
    ("F_relu", lambda x: F.relu(x), lambda a: np.maximum(a, 0), (A,), None),
    ("F_leaky_relu", lambda x: F.leaky_relu(x), lambda a: np.where(a > 0, a, 0.01 * a), (A,),
     None),
    ("F_softmax", lambda x: F.softmax(x, 1), lambda a: np.exp(a) / np.exp(a).sum(1, keepdims=True),
     (A,), None),
    ("F_log_softmax", lambda x: F.log_softmax(x, dim=1),
     lambda a: a - np.log(np.exp(a).sum(1, keepdims=True)), (A,), None),
    ("F_linear", lambda x, w: F.linear(x, w), lambda a, w: a @ w.T, (A, A[:2]), None),
    ("F_smooth_l1", lambda x: F.smooth_l1_loss(x, x * 0, beta=0.5),
     lambda a: np.where(np.abs(a) < 0.5, 0.5 * a * a / 0.5, np.abs(a) - 0.25).mean(), (A,), None),
    ("F_one_hot", lambda x: F.one_hot(x, 4), lambda a: np.eye(4, dtype=np.int64)[a],
     (np.array([0, 3, 1], np.int32),), ms.int64),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_mint_against_numpy_in_both_modes(case):
    _, fn, ref, inputs, dtype = case
    got = assert_same_in_both_modes(fn, *(Tensor(a) for a in inputs))
    want = np.asarray(ref(*inputs))
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-6)
    if dtype is not None:
        assert got.dtype == dtype


def test_mint_equal_is_one_bool():
    x = Tensor(A)
    assert mint.equal(x, Tensor(A.copy())) is True
    assert mint.equal(x, x + 1) is False and mint.equal(x, x[:1]) is False


def test_where_of_one_argument_gives_indices():
    rows, cols = mint.where(Tensor(I > 4))
    np.testing.assert_array_equal(rows.asnumpy(), np.nonzero(I > 4)[0])
    np.testing.assert_array_equal(cols.asnumpy(), np.nonzero(I > 4)[1])


def test_inplace_activation_writes_input():
    x = Tensor(A.copy())
    assert F.relu(x, inplace=True) is x
    np.testing.assert_allclose(x.asnumpy(), np.maximum(A, 0))


@pytest.mark.parametrize("name, params", [
    ("sum", ["input", "dim", "keepdim", "dtype"]),
    ("transpose", ["input", "dim0", "dim1"]),
    ("gather", ["input", "dim", "index"]),
    ("softmax", ["input", "dim", "dtype"]),
    ("cat", ["tensors", "dim"]),
])
def test_mint_signatures(name, params):
    assert list(inspect.signature(getattr(mint, name)).parameters) == params


def test_missing_mint_name_points_at_the_coverage_doc():
    with pytest.raises(AttributeError, match="compatibility.md"):
        mint.polar  # noqa: B018


def _np_layer_norm(a, eps):
    return (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + eps)


CELLS = [
    ("Softmax", lambda: mint.nn.Softmax(), lambda a: np.exp(a) / np.exp(a).sum(-1, keepdims=True)),
    ("LogSoftmax", lambda: mint.nn.LogSoftmax(0), lambda a: a - np.log(np.exp(a).sum(0))),
    ("GELU_tanh", lambda: mint.nn.GELU("tanh"),
     lambda a: 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))),
    ("SiLU", lambda: mint.nn.SiLU(), lambda a: a / (1 + np.exp(-a))),
    ("ELU", lambda: mint.nn.ELU(0.5), lambda a: np.where(a > 0, a, 0.5 * (np.exp(a) - 1))),
    ("LayerNorm", lambda: mint.nn.LayerNorm(4, eps=1e-3), lambda a: _np_layer_norm(a, 1e-3)),
    ("Dropout_eval", lambda: mint.nn.Dropout(0.3), lambda a: a),
    ("Identity", lambda: mint.nn.Identity(3, k=1), lambda a: a),
    ("Hardswish", lambda: mint.nn.Hardswish(), lambda a: a * np.clip(a + 3, 0, 6) / 6),
]


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
@pytest.mark.parametrize("case", CELLS, ids=[c[0] for c in CELLS])
def test_mint_nn_cells(case, mode):
    _, make, ref = case
    ms.set_context(mode=mode)
    np.testing.assert_allclose(make()(Tensor(A)).asnumpy(), ref(A), rtol=1e-4, atol=1e-5)


def test_mint_nn_losses_and_parameters():
    x, t = Tensor(A), Tensor((A > 0).astype(np.float32))
    got = mint.nn.SmoothL1Loss(beta=0.5)(x, x * 0).asnumpy()
    want = np.where(np.abs(A) < 0.5, A * A, np.abs(A) - 0.25).mean()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    got = mint.nn.BCEWithLogitsLoss(reduction="sum")(x, t).asnumpy()
    want = (np.maximum(A, 0) - A * (A > 0) + np.log1p(np.exp(-np.abs(A)))).sum()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert [p.name for p in mint.nn.LayerNorm((4,)).get_parameters()] == ["weight", "bias"]
    assert list(mint.nn.LayerNorm(4, elementwise_affine=False).get_parameters()) == []
    drop = mint.nn.Dropout(0.5)
    drop.set_train(True)
    out = drop(Tensor(np.ones((1000,), np.float32))).asnumpy()
    assert set(np.unique(out)) <= {0.0, 2.0} and 300 < (out == 0).sum() < 700
