"""Reductions, scans, sorting and selection added for API breadth (reduce_ext.py, selection.py):
values against NumPy in PyNative and compiled, index dtypes, gradients, bad input."""
import numpy as np
import pytest
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor, ops

F32 = np.float32
A = np.array([[3.0, -1.0, 2.0, 2.0], [0.5, 4.0, -3.0, 1.0], [2.0, 2.0, 0.0, -1.5]], F32)
I = np.array([[3, 0, 2], [1, 5, 0]], np.int32)


def both_modes(fn, *args):
    def run(*a):
        return fn(*a)

    return assert_same_in_both_modes(run, *args)


def np_topk(a, k, axis, largest):
    order = np.argsort(-a if largest else a, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(a, idx, axis), idx


CASES = [
    ("var", lambda x: ops.var(x, 1, ddof=1), lambda a: np.var(a, 1, ddof=1), A),
    ("var_all", lambda x: ops.var(x), np.var, A),
    ("std", lambda x: ops.std(x, (0, 1), keepdims=True), lambda a: np.std(a, keepdims=True), A),
    ("var_mean", lambda x: ops.var_mean(x, 0, ddof=1),
     lambda a: (np.var(a, 0, ddof=1), np.mean(a, 0)), A),
    ("std_mean", lambda x: ops.std_mean(x, 1, keepdims=True),
     lambda a: (np.std(a, 1, keepdims=True), np.mean(a, 1, keepdims=True)), A),
    ("all", lambda x: ops.all(x, 1), lambda a: np.all(a, 1), I),
    ("any", lambda x: ops.any(x), np.any, I),
    ("nansum", lambda x: ops.nansum(x, 0), lambda a: np.nansum(a, 0), np.where(A > 2, np.nan, A)),
    ("nanmean", lambda x: ops.nanmean(x, 1), lambda a: np.nanmean(a, 1),
     np.where(A > 2, np.nan, A)),
    ("count_nonzero", lambda x: ops.count_nonzero(x, 1), lambda a: np.count_nonzero(a, 1), I),
    ("aminmax", lambda x: ops.aminmax(x, axis=1), lambda a: (a.min(1), a.max(1)), A),
    ("cumsum", lambda x: ops.cumsum(x, 1), lambda a: np.cumsum(a, 1), A),
    ("cumsum_int", lambda x: ops.cumsum(x, 0), lambda a: np.cumsum(a, 0, dtype=np.int32), I),
    ("cumprod", lambda x: ops.cumprod(x, 1), lambda a: np.cumprod(a, 1), A),
    ("cumprod_int", lambda x: ops.cumprod(x, 1), lambda a: np.cumprod(a, 1).astype(np.int64), I),
    ("logcumsumexp", lambda x: ops.logcumsumexp(x, 0),
     lambda a: np.logaddexp.accumulate(a.astype(np.float64), 0), A),
    ("cummax", lambda x: ops.cummax(x, 1),
     lambda a: (np.maximum.accumulate(a, 1), np.array([[0, 0, 0, 0], [0, 1, 1, 1],
                                                       [0, 1, 1, 1]])), A),  # ties: later
    ("cummin", lambda x: ops.cummin(x, 0),
     lambda a: (np.minimum.accumulate(a, 0), np.array([[0, 0, 0, 0], [1, 0, 1, 1],
                                                       [1, 0, 1, 2]])), A),
    ("sort", lambda x: ops.sort(x), lambda a: (np.sort(a), np.argsort(a, kind="stable")), A),
    ("sort_desc0", lambda x: ops.sort(x, 0, True),
     lambda a: (-np.sort(-a, 0), np.argsort(-a, 0, kind="stable")), A),
    ("argsort", lambda x: ops.argsort(x, 1, True), lambda a: np.argsort(-a, 1, kind="stable"), A),
    ("msort", ops.msort, lambda a: np.sort(a, 0), A),
    ("topk", lambda x: ops.topk(x, 2), lambda a: np_topk(a, 2, -1, True), A),
    ("topk_small0", lambda x: ops.topk(x, 2, 0, False), lambda a: np_topk(a, 2, 0, False), A),
    ("top_k", lambda x: ops.top_k(x, 3), lambda a: np_topk(a, 3, -1, True), A),
    ("median", lambda x: ops.median(x, 1),
     lambda a: (np.sort(a, 1)[:, 1], np.array([2, 0, 2])), A),
    ("vector_norm", lambda x: ops.vector_norm(x, 3, 1), lambda a: np.sum(np.abs(a) ** 3, 1)
     ** (1 / 3), A),
    ("vector_norm_inf", lambda x: ops.vector_norm(x, float("inf")), lambda a: np.abs(a).max(), A),
    ("norm", lambda x: ops.norm(x, dim=0), lambda a: np.linalg.norm(a, axis=0), A),
    ("diff", lambda x: ops.diff(x, 2, 1), lambda a: np.diff(a, 2, 1), A),
    ("trace", lambda x: ops.trace(x), np.trace, A),
    ("gather_elements", lambda x: ops.gather_elements(x, 1, Tensor(np.array([[3, 0], [1, -1]]))),
     lambda a: np.take_along_axis(a[:2], np.array([[3, 0], [1, 3]]), 1), A),
    ("gather_d", lambda x: ops.gather_d(x, 0, Tensor(np.array([[2, 0, 1, 1]], np.int32))),
     lambda a: np.take_along_axis(a, np.array([[2, 0, 1, 1]]), 0), A),
    ("index_select", lambda x: ops.index_select(x, 1, Tensor(np.array([3, 0, 3], np.int32))),
     lambda a: a[:, [3, 0, 3]], A),
    ("take", lambda x: ops.take(x, Tensor(np.array([[0, 11], [5, 5]]))),
     lambda a: np.take(a, [[0, 11], [5, 5]]), A),
    ("masked_fill", lambda x: ops.masked_fill(x, x > 1, -7.0),
     lambda a: np.where(a > 1, -7.0, a), A),
    ("argwhere", lambda x: ops.argwhere(x), np.argwhere, I),
    ("searchsorted", lambda x: ops.searchsorted(Tensor(np.array([-1.0, 0.5, 2.0, 2.0], F32)), x),
     lambda a: np.searchsorted([-1.0, 0.5, 2.0, 2.0], a), A),
    ("searchsorted_right", lambda x: ops.searchsorted(
        Tensor(np.array([-1.0, 0.5, 2.0, 2.0], F32)), x, right=True),
     lambda a: np.searchsorted([-1.0, 0.5, 2.0, 2.0], a, side="right"), A),
    ("bucketize", lambda x: ops.bucketize(x, [-1.0, 2.0]),
     lambda a: np.searchsorted([-1.0, 2.0], a), A),
    ("bucketize_right", lambda x: ops.bucketize(x, [-1.0, 2.0], right=True),
     lambda a: np.searchsorted([-1.0, 2.0], a, side="right"), A),
]


def _flat(v):
    return list(v) if isinstance(v, tuple) else [v]


@pytest.mark.parametrize("name,fn,ref,x", CASES, ids=[c[0] for c in CASES])
def test_matches_numpy_in_both_modes(name, fn, ref, x):
    got, want = _flat(both_modes(fn, Tensor(x))), _flat(ref(x))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape}"
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-5, atol=1e-6, err_msg=name)


def test_result_dtypes_follow_mindspore():
    x, i = Tensor(A), Tensor(I)
    assert ops.sort(x)[1].dtype == ms.int32
    assert ops.argsort(x).dtype == ms.int32
    assert ops.topk(x, 2)[1].dtype == ms.int32
    assert ops.cummax(x, 0)[1].dtype == ms.int64
    assert ops.cummin(x, 0)[1].dtype == ms.int32  # MindSpore 2.10's, unlike cummax
    assert ops.median(x)[1].dtype == ms.int64
    assert ops.cumsum(i, 0).dtype == ms.int32
    assert ops.cumprod(i, 0).dtype == ms.int64
    assert ops.count_nonzero(i).dtype == ms.int32
    assert ops.all(i).dtype == ms.bool_
    assert ops.nansum(i).dtype == ms.int32
    assert ops.vector_norm(i).dtype == ms.float32
    assert ops.searchsorted(x[0], x, out_int32=True).dtype == ms.int32
    assert ops.cumsum(Tensor(A.astype(np.float16)), 1).dtype == ms.float16


def test_aminmax_skips_nan_and_ddof_takes_a_bool():
    x = Tensor(np.array([[9.0, np.nan], [np.nan, np.nan], [2.0, 5.0]], F32))
    low, high = ops.aminmax(x, axis=1)
    np.testing.assert_array_equal(low.asnumpy(), [9.0, np.nan, 2.0])
    np.testing.assert_array_equal(high.asnumpy(), [9.0, np.nan, 5.0])
    assert ops.aminmax(x, axis=None, keepdims=True)[1].shape == (1, 1)
    np.testing.assert_allclose(ops.var(Tensor(A), 0, ddof=True).asnumpy(), np.var(A, 0, ddof=1),
                               rtol=1e-6)


def test_sort_places_nan_last_and_is_stable():
    x = Tensor(np.array([1.0, np.nan, 0.0, 1.0, -np.inf], F32))
    values, idx = ops.sort(x)
    assert idx.asnumpy().tolist() == [4, 2, 0, 3, 1]
    assert np.isnan(values.asnumpy()[-1])
    assert ops.sort(x, descending=True)[1].asnumpy().tolist() == [1, 0, 3, 2, 4]


GRAD = [
    ("var", lambda x: ops.var(x, 1, ddof=1)), ("std", lambda x: ops.std(x, 0)),
    ("cumsum", lambda x: ops.cumsum(x, 1)), ("cumsum_rev_axis0", lambda x: ops.cumsum(x, 0)),
    ("cumprod", lambda x: ops.cumprod(x, 1)), ("logcumsumexp", lambda x: ops.logcumsumexp(x, 1)),
    ("sort", lambda x: ops.sort(x, 1)[0]), ("topk", lambda x: ops.topk(x, 2, 0)[0]),
    ("cummax", lambda x: ops.cummax(x, 1)[0]), ("median", lambda x: ops.median(x, 1)[0]),
    ("vector_norm", lambda x: ops.vector_norm(x, 3, 1)), ("norm", lambda x: ops.norm(x)),
    ("nanmean", lambda x: ops.nanmean(x, 0)), ("diff", lambda x: ops.diff(x, 1, 0)),
    ("trace", lambda x: ops.trace(x)),
    ("gather_elements", lambda x: ops.gather_elements(x, 1, Tensor(np.array([[3, 0], [1, 1]])))),
    ("masked_fill", lambda x: ops.masked_fill(x, x > 1, 0.0)),
]


@pytest.mark.parametrize("name,fn", GRAD, ids=[g[0] for g in GRAD])
def test_gradient_matches_finite_differences(name, fn):
    rng = np.random.default_rng(1)
    x = rng.permutation(12).reshape(3, 4) * 0.37 + 0.1  # distinct values: no ties
    check_grad(fn, x, rtol=1e-4, atol=1e-6)


def test_bad_input_is_a_clear_error():
    x = Tensor(A)
    with pytest.raises(ValueError, match="topk: k"):
        ops.topk(x, 9)
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        ops.sort(x, 2)
    with pytest.raises(TypeError, match="var: input must be a float"):
        ops.var(Tensor(I))
    with pytest.raises(ValueError, match="gather_elements: index must have input's rank"):
        ops.gather_elements(x, 0, Tensor(np.array([0])))
    with pytest.raises(TypeError, match="masked_fill: mask"):
        ops.masked_fill(x, Tensor(I), 1.0)
    with pytest.raises(ValueError, match="trace: input must be 2-D"):
        ops.trace(Tensor(np.zeros(3, F32)))


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_topk_on_a_large_tensor_with_ties_and_nan(largest, axis):
    # arg_topk sorts only the first k of each run: every k, ties (lower index first) and NaN
    # (the largest value) as a full stable sort orders them.
    rng = np.random.default_rng(5)
    a = rng.integers(-20, 20, (7, 300, 5)).astype(F32)  # many ties
    a[3, 17, :] = np.nan
    a[:, 40, 2] = np.nan
    key = np.where(np.isnan(a), np.inf, a)
    order = np.argsort(-key if largest else key, axis=axis, kind="stable")
    n = a.shape[axis]
    for k in (0, 1, 3, n):
        values, indices = ops.topk(Tensor(a), k, axis, largest)
        want = np.take(order, np.arange(k), axis=axis)
        np.testing.assert_array_equal(indices.asnumpy(), want)
        np.testing.assert_array_equal(values.asnumpy(), np.take_along_axis(a, want, axis))
    both_modes(lambda x: ops.topk(x, 4, axis, largest), Tensor(a))
    order_all = ops.argsort(Tensor(a), axis, descending=largest).asnumpy()
    np.testing.assert_array_equal(order_all, order)
