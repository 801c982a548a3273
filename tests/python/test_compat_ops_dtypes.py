"""MindSpore's dtype and operand rules found by its graph-syntax tests, in both modes against
NumPy: P.Reciprocal / ops.reciprocal, P.ReduceSum keeping the input dtype, integer means that
keep their dtype (truncated toward zero), and + / - with a list or tuple of numbers."""

import numpy as np
import pytest
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor, ops
from kiln.ops import operations as P


def _primitive_reciprocal(x):
    return P.Reciprocal()(x)


def _method_reciprocal(x):
    return x.reciprocal()


def _primitive_sum0(x):
    return P.ReduceSum()(x, 0)


def _primitive_mean1(x):
    return P.ReduceMean()(x, 1)


def _ops_mean1(x):
    return ops.mean(x, 1)


def _method_mean1(x):
    return x.mean(1)


# ---- reciprocal ----
@pytest.mark.parametrize("np_dtype,out", [(np.float32, ms.float32), (np.float64, ms.float64),
                                          (np.float16, ms.float16), (np.int32, ms.float32),
                                          (np.int64, ms.float32), (np.bool_, ms.float32)])
def test_reciprocal_matches_numpy_in_both_modes(np_dtype, out):
    a = np.array([[1, 2], [4, 8]]).astype(np_dtype)
    for fn in (_primitive_reciprocal, ops.reciprocal, _method_reciprocal):
        got = assert_same_in_both_modes(fn, Tensor(a))
        assert got.dtype == out
        np.testing.assert_allclose(got.asnumpy(), 1 / a.astype(np.float64), rtol=1e-3)


def test_reciprocal_of_zero_is_inf_and_its_gradient():
    x = Tensor(np.array([0, 2], np.int32))
    np.testing.assert_array_equal(P.Reciprocal()(x).asnumpy(), [np.inf, 0.5])
    g = ms.grad(lambda t: ops.reciprocal(t).sum())(Tensor(np.array([2.0, 4.0], np.float32)))
    np.testing.assert_allclose(g.asnumpy(), [-0.25, -0.0625])
    with pytest.raises(TypeError, match="reciprocal: input must be a Tensor"):
        ops.reciprocal([1.0])


# ---- ReduceSum / ReduceMean / mean on integers ----
@pytest.mark.parametrize("np_dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8])
def test_reduce_sum_primitive_keeps_the_dtype(np_dtype):
    a = np.arange(12).reshape(3, 4).astype(np_dtype)
    got = assert_same_in_both_modes(_primitive_sum0, Tensor(a))
    assert got.dtype == Tensor(a).dtype
    np.testing.assert_array_equal(got.asnumpy(), a.sum(0, dtype=np_dtype))
    assert ops.sum(Tensor(a)).dtype in (ms.int64, ms.uint64)  # the functional form widens


def test_reduce_sum_primitive_wraps_and_bool_is_any():
    wrapped = P.ReduceSum()(Tensor(np.array([100, 100], np.int8)), 0)
    assert wrapped.dtype == ms.int8 and wrapped.item() == np.array([100, 100], np.int8).sum(
        dtype=np.int8)
    flags = Tensor(np.array([[True, False], [False, False]]))
    got = P.ReduceSum(keep_dims=True)(flags, 1)
    assert got.dtype == ms.bool_
    np.testing.assert_array_equal(got.asnumpy(), [[True], [False]])


@pytest.mark.parametrize("np_dtype", [np.int8, np.int32, np.int64, np.uint16])
def test_integer_mean_keeps_dtype_and_truncates(np_dtype):
    a = np.arange(-7, 5).reshape(3, 4)
    a = (a + 7 if np.dtype(np_dtype).kind == "u" else a).astype(np_dtype)
    expected = np.trunc(a.astype(np.float64).mean(1)).astype(np_dtype)
    for fn in (_primitive_mean1, _ops_mean1, _method_mean1):
        got = assert_same_in_both_modes(fn, Tensor(a))
        assert got.dtype == Tensor(a).dtype
        np.testing.assert_array_equal(got.asnumpy(), expected)
    whole = ops.mean(Tensor(a), (0, 1), True)
    np.testing.assert_array_equal(whole.asnumpy(), np.trunc([[a.astype(np.float64).mean()]]))


def test_integer_mean_of_an_empty_axis_is_an_error():
    with pytest.raises(ValueError, match="empty axis"):
        ops.mean(Tensor(np.zeros((0, 3), np.int32)), 0)
    floats = ops.mean(Tensor(np.array([[True, False]])), 1)  # bool still gives float32
    assert floats.dtype == ms.float32 and floats.item() == 0.5


# ---- + and - with a list or tuple of numbers ----
def test_list_plus_tensor_in_both_modes():
    t = np.array([[1, 2], [3, 4]], np.int64)

    def fn(x):
        return [5, 6] + x, x + (1, 2), x - [1, 1], [10, 10] - x, sum(x, [5, 6])

    got = assert_same_in_both_modes(fn, Tensor(t))
    expected = [[5, 6] + t, t + (1, 2), t - 1, 10 - t, np.array([9, 12])]
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g.asnumpy(), e)
        assert g.dtype == ms.int64


def test_list_plus_tensor_promotes_and_lists_of_tensors_stay_errors():
    t = Tensor(np.array([1, 2], np.int32))
    mixed = [0.5, 1] + t
    assert mixed.dtype == ms.float32
    np.testing.assert_allclose(mixed.asnumpy(), [1.5, 3])
    with pytest.raises(TypeError):
        [t, t] + t  # noqa: B018 - a list holding tensors is not converted


def test_integer_mean_of_many_small_integers_and_of_a_dynamic_axis(tmp_path):
    a = np.full(300, 3, np.int8)  # the int8 sum wraps (as MindSpore's), the count does not
    got = ops.mean(Tensor(a))
    assert got.dtype == ms.int8
    assert got.item() == int(np.trunc(int(a.sum(dtype=np.int8)) / 300))

    class ColumnMean(ms.nn.Cell):
        def construct(self, x):
            return ops.mean(x, 0)

    ms.export(ColumnMean(), Tensor(shape=[None, 3], dtype=ms.int32),
              file_name=str(tmp_path / "m"), file_format="MINDIR")
    loaded = ms.nn.GraphCell(ms.load(str(tmp_path / "m.mindir")))
    x = np.array([[1, 2, 3], [4, 5, 7], [-9, -9, -9]], np.int32)
    np.testing.assert_array_equal(loaded(Tensor(x)).asnumpy(),
                                  np.trunc(x.sum(0) / 3).astype(np.int32))
