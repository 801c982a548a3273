"""Quantiles, histograms, conv1d, space/batch reshuffles, batch_dot and the second names
(stats_ext.py), and the primitive classes over them: NumPy references (values MindSpore 2.10
gave on the same inputs where its CPU build runs them), both modes, gradients."""
import numpy as np
import pytest
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor, ops

F32 = np.float32
Y = np.array([[1.0, 7.0, 3.0, 2.0], [4.0, 5.0, 6.0, 0.5], [7.0, 8.0, -9.0, 1.0]], F32)
NANS = np.where(Y == 5.0, np.nan, Y)


def both_modes(fn, *args):
    def run(*a):
        return fn(*a)

    return assert_same_in_both_modes(run, *args)


def np_s2b(x, b):
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(3, 5, 0, 1, 2, 4)
    return y.reshape(b * b * n, c, h // b, w // b)


def np_conv1d(x, w, stride=1, pad=0, dil=1):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad)))
    k = w.shape[-1]
    span = (k - 1) * dil + 1
    cols = range(0, x.shape[-1] - span + 1, stride)
    return np.stack([np.einsum("nck,ock->no", x[:, :, j:j + span:dil], w) for j in cols], -1)


CASES = [
    ("quantile", lambda x: ops.quantile(x, 0.3, 1), lambda a: np.quantile(a, 0.3, 1), Y),
    ("quantile_q", lambda x: ops.quantile(x, [0.1, 0.9], 0, True),
     lambda a: np.quantile(a, [0.1, 0.9], 0, keepdims=True), Y),
    ("quantile_all", lambda x: ops.quantile(x, 0.5), lambda a: np.quantile(a, 0.5), Y),
    ("quantile_nan", lambda x: ops.quantile(x, 0.5, 1), lambda a: np.quantile(a, 0.5, 1), NANS),
    ("nanquantile", lambda x: ops.nanquantile(x, 0.25, 1),
     lambda a: np.nanquantile(a, 0.25, 1), NANS),
    ("nanmedian", lambda x: ops.nanmedian(x, 1),
     lambda a: (np.array([2.0, 4.0, 1.0]), np.array([3, 0, 3])), NANS),
    ("histc", lambda x: ops.histc(x, 4, 0.0, 8.0),
     lambda a: np.histogram(a[(a >= 0) & (a <= 8)], 4, (0, 8))[0].astype(F32), Y),
    ("histc_auto", lambda x: ops.histc(x, 3), lambda a: np.histogram(a, 3)[0].astype(F32), Y),
    ("intopk", lambda x: ops.intopk(x, Tensor(np.array([1, 0, 3], np.int32)), 2),
     lambda a: np.array([True, False, False]), Y),
    ("reverse_sequence", lambda x: ops.reverse_sequence(x, Tensor(np.array([2, 4, 1])), 1, 0),
     lambda a: np.stack([np.r_[a[0, 1::-1], a[0, 2:]], a[1, ::-1], a[2]]), Y),
    ("space_to_batch_nd", lambda x: ops.space_to_batch_nd(x, 2, [[0, 0], [0, 0]]),
     lambda a: np_s2b(a, 2), np.arange(32, dtype=F32).reshape(2, 1, 4, 4)),
    ("round_trip", lambda x: ops.batch_to_space_nd(ops.space_to_batch_nd(
        x, [2, 2], [[1, 1], [0, 2]]), [2, 2], [[1, 1], [0, 2]]), lambda a: a,
     np.arange(8, dtype=F32).reshape(2, 1, 2, 2)),
    ("conv1d", lambda x: ops.conv1d(x, Tensor(np.arange(12, dtype=F32).reshape(2, 2, 3) / 10)),
     lambda a: np_conv1d(a, np.arange(12).reshape(2, 2, 3) / 10),
     np.arange(20, dtype=F32).reshape(1, 2, 10) / 7),
    ("conv1d_pad", lambda x: ops.conv1d(x, Tensor(np.ones((3, 2, 2), F32)), None, 2, "pad", 1,
                                        2), lambda a: np_conv1d(a, np.ones((3, 2, 2)), 2, 1, 2),
     np.arange(20, dtype=F32).reshape(1, 2, 10) / 7),
    ("batch_dot", lambda x: ops.batch_dot(x, x[:, :, :2], (1, 1)),
     lambda a: np.einsum("bik,bil->bkl", a, a[:, :, :2]),
     np.arange(24, dtype=F32).reshape(2, 3, 4)),
    ("batch_dot_2d", lambda x: ops.batch_dot(x, x), lambda a: (a * a).sum(1, keepdims=True), Y),
    ("fills", lambda x: ops.fills(x, 2.5), lambda a: np.full_like(a, 2.5), Y),
    ("deepcopy", ops.deepcopy, np.copy, Y), ("tensor_muls", lambda x: ops.tensor_muls(x, 3),
                                             lambda a: a * 3, Y),
    ("soft_shrink", lambda x: ops.soft_shrink(x, 2.0),
     lambda a: np.where(a > 2, a - 2, np.where(a < -2, a + 2, 0)), Y),
    ("diff_ext", lambda x: ops.diff_ext(x, 1, 0), lambda a: np.diff(a, 1, 0), Y),
    ("isnan_ext", ops.isnan_ext, np.isnan, NANS),
    ("accumulate_n", lambda x: ops.accumulate_n([x, x, x]), lambda a: 3 * a, Y),
    ("einsum_ext", lambda x: ops.einsum_ext("ij->ji", x), np.transpose, Y),
]


@pytest.mark.parametrize("name,fn,ref,x", CASES, ids=[c[0] for c in CASES])
def test_matches_numpy_in_both_modes(name, fn, ref, x):
    got, want = both_modes(fn, Tensor(x)), ref(x.astype(np.float64))
    got = list(got) if isinstance(got, tuple) else [got]
    want = list(want) if isinstance(want, tuple) else [want]
    for g, w in zip(got, want):
        assert g.shape == np.shape(w), f"{name}: {g.shape} != {np.shape(w)}"
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-5, atol=1e-5, err_msg=name)


def test_creation_helpers_and_dtypes():
    assert ops.tuple_to_array((1, 2, 3)).dtype == ms.int32
    assert ops.tuple_to_array((1.0, 2)).dtype == ms.float32
    assert ops.scalar_to_tensor(1, ms.int32).asnumpy().item() == 1
    assert ops.dyn_shape(Tensor(Y)).asnumpy().tolist() == [3, 4]
    assert ops.histc(Tensor(np.array([1, 2, 2], np.int32)), 2, 1, 2).dtype == ms.int32
    assert ops.nanmedian(Tensor(NANS), 1)[1].dtype == ms.int64
    probs = ops.random_categorical(Tensor(np.log(np.array([[0.0001, 0.9999]], F32))), 50)
    assert probs.dtype == ms.int64 and probs.shape == (1, 50) and probs.asnumpy().mean() > 0.9
    assert ops.upsample(Tensor(np.ones((1, 1, 2, 2), F32)), size=(4, 4)).shape == (1, 1, 4, 4)


def test_primitive_classes():
    v = Tensor(np.array([1.0, 2.0, 3.0], F32))
    got = ops.CumulativeLogsumexp(True)(v, 0).asnumpy()
    assert got[0] == -np.finfo(F32).max
    np.testing.assert_allclose(got[1:], np.logaddexp.accumulate([1.0, 2.0]), rtol=1e-6)
    np.testing.assert_allclose(ops.CumulativeLogsumexp(False, True)(v, 0).asnumpy(),
                               np.logaddexp.accumulate([3.0, 2.0, 1.0])[::-1], rtol=1e-6)
    assert ops.Bucketize([1.0, 2.0])(v).asnumpy().tolist() == [1, 2, 2]
    assert ops.SearchSorted(ms.int32, True)(v, v).dtype == ms.int32
    assert ops.InTopK(1)(Tensor(np.eye(2, dtype=F32)), Tensor(np.array([0, 0], np.int32))) \
        .asnumpy().tolist() == [True, False]
    np.testing.assert_allclose(ops.LogSpace(3, 2)(Tensor(0.0), Tensor(2.0)).asnumpy(), [1, 2, 4])
    np.testing.assert_allclose(ops.Renorm(2, 0, 1.0)(Tensor(np.ones((2, 2), F32))).asnumpy(),
                               np.full((2, 2), 0.5 ** 0.5), rtol=1e-6)
    assert ops.Einsum("ij,jk->ik")((Tensor(Y), Tensor(Y.T))).shape == (3, 3)
    assert ops.MatrixPower(2)(Tensor(np.eye(2, dtype=F32) * 3)).asnumpy()[0, 0] == 9
    assert ops.TensorScatterElements(1, "add")(Tensor(Y), Tensor(np.array([[0]])),
                                                Tensor(np.array([[1.0]], F32))).asnumpy()[0, 0] \
        == 2.0
    assert ops.ReverseSequence(1)(Tensor(Y), Tensor(np.array([4, 4, 4]))).asnumpy()[0, 0] == 2.0
    s = Tensor(np.arange(16, dtype=F32).reshape(1, 1, 4, 4))
    back = ops.BatchToSpaceND(2, [[0, 0], [0, 0]])(ops.SpaceToBatchND(2, [[0, 0], [0, 0]])(s))
    np.testing.assert_array_equal(back.asnumpy(), s.asnumpy())
    for name in ("UnsortedSegmentSum", "GatherNd", "TensorScatterAdd", "ScatterNd", "Gcd",
                 "Lcm", "PopulationCount", "FastGeLU", "MatrixBandPart", "IndexFill"):
        assert callable(getattr(ops, name)()), name


GRAD = [
    ("quantile", lambda x: ops.quantile(x, 0.3, 1)), ("nanquantile",
                                                      lambda x: ops.nanquantile(x, 0.7, 0)),
    ("reverse_sequence", lambda x: ops.reverse_sequence(x, Tensor(np.array([2, 3, 1])), 1)),
    ("space_to_batch_nd", lambda x: ops.space_to_batch_nd(ops.reshape(x, (1, 1, 3, 4)), 1,
                                                          [[1, 0], [0, 2]])),
    ("batch_dot", lambda x: ops.batch_dot(x, x * x)),
]


@pytest.mark.parametrize("name,fn", GRAD, ids=[g[0] for g in GRAD])
def test_gradient_matches_finite_differences(name, fn):
    x = np.random.default_rng(3).permutation(12).reshape(3, 4) * 0.3 - 1.1
    check_grad(fn, x, rtol=1e-4, atol=1e-6)


def test_conv1d_gradients_are_conv2d_gradients():
    # kiln's convolutions compute in float32, too coarse for finite differences: compare with
    # the 2-D convolution conv1d is made of
    rng = np.random.default_rng(0)
    x, w = Tensor(rng.normal(size=(2, 2, 7)).astype(F32)), Tensor(rng.normal(size=(3, 2, 3))
                                                                    .astype(F32))

    def one(a, b):
        return ops.sum(ops.conv1d(a, b, None, 2, "pad", 1) * ops.arange(3.0).reshape(1, 3, 1))

    def two(a, b):
        out = ops.conv2d(ops.expand_dims(a, 2), ops.expand_dims(b, 2), None, (1, 2), "pad",
                         (0, 0, 1, 1))
        return ops.sum(out * ops.arange(3.0).reshape(1, 3, 1, 1))

    g1, g2 = ms.grad(one, (0, 1))(x, w), ms.grad(two, (0, 1))(x, w)
    np.testing.assert_allclose(g1[0].asnumpy(), g2[0].asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(g1[1].asnumpy(), g2[1].asnumpy(), rtol=1e-6)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="quantile: q"):
        ops.quantile(Tensor(Y), 1.5)
    with pytest.raises(TypeError, match="quantile: input must be a float"):
        ops.quantile(Tensor(np.arange(3)), 0.5)
    with pytest.raises(ValueError, match="histc: bins"):
        ops.histc(Tensor(Y), 0)
    with pytest.raises(ValueError, match="space_to_batch_nd"):
        ops.space_to_batch_nd(Tensor(np.zeros((1, 1, 3, 3), F32)), 2, [[0, 0], [0, 0]])
    with pytest.raises(TypeError, match="tuple_to_array"):
        ops.tuple_to_array(())
