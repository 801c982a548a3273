"""Reductions against NumPy: sum/mean/prod/amax/amin, max/min with indices, argmax/argmin,
logsumexp; every dtype, 0-d/size-1/empty shapes, negative axes, keepdims, strided inputs."""
import numpy as np
import pytest
from helpers import ALL_DTYPES, FLOAT_DTYPES, assert_close, non_contiguous, random_array, to_kiln

import kiln as ms
from kiln import ops

# NumPy warns when it computes the reference mean of an empty slice (kiln gives NaN silently).
pytestmark = pytest.mark.filterwarnings("ignore:Mean of empty slice",
                                        "ignore:invalid value encountered")

# (shape, axis) pairs: axis None / () mean all; tuples cover adjacent and non-adjacent axes.
AXIS_CASES = [
    ((), None), ((), 0), ((), -1), ((1,), None), ((1,), 0), ((5,), 0), ((5,), ()),
    ((3, 4), None), ((3, 4), 0), ((3, 4), -1), ((3, 4), (0, 1)), ((2, 3, 4), (0, 2)),
    ((2, 3, 4), (-1, -3)), ((2, 3, 4), 1), ((2, 1, 4), (1,)), ((2, 1, 4), (0, 1)),
    ((3, 5, 300), 1), ((0, 3), 1), ((3, 0), 0), ((0, 3), 0), ((2, 0, 3), None),
]


def _input(shape, dtype, np_dtype, strided, seed=0, low=-3, high=3):
    """A kiln input (strided or not) and the NumPy values it holds (bfloat16 rounds them)."""
    arr = random_array(shape, np_dtype, np.random.default_rng(seed), low=low, high=high)
    x = non_contiguous(arr, dtype) if strided else to_kiln(arr, dtype)
    return x, x.asnumpy()


def _np_axis(axis):
    return None if axis == () else axis


def _is_empty_reduction(shape, axis):
    if axis is None or axis == ():
        return 0 in shape
    axes = (axis,) if isinstance(axis, int) else axis
    nd = max(len(shape), 1)
    return any(shape[a % nd] == 0 for a in axes if shape)


# Integer sums and products: uint64 for uint16/32/64 (NumPy's), int64 for the rest (uint8 too).
_WIDE_UNSIGNED = {np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64)}


def _sum_dtype(dtype):
    if dtype.is_floating_point:
        return dtype
    return ms.uint64 if dtype in (ms.uint16, ms.uint32, ms.uint64) else ms.int64


def _mean_dtype(dtype):
    """An integer mean keeps the integer dtype (MindSpore's rule); a bool mean is float32."""
    return ms.float32 if dtype is ms.bool_ else dtype


def _is_integer(dtype):
    return not dtype.is_floating_point and dtype is not ms.bool_


def _ref(fn, a, axis, keepdims):
    axis = _np_axis(axis)
    if a.ndim == 0 and axis is not None:
        axis = None  # a 0-d tensor accepts axis 0/-1 (PyTorch, MindSpore); NumPy does not
    work = a.astype(np.float64) if a.dtype.kind == "f" else a
    if fn in (np.sum, np.prod) and a.dtype.kind in "biu":
        work = a.astype(np.uint64 if a.dtype in _WIDE_UNSIGNED else np.int64)
    if fn is np.mean:
        work = a.astype(np.float64)
    return np.asarray(fn(work, axis=axis, keepdims=keepdims))


REDUCE_OPS = [
    ("sum", lambda x, ax, kd: ops.sum(x, ax, kd), np.sum, _sum_dtype),
    ("mean", lambda x, ax, kd: ops.mean(x, ax, kd), np.mean, _mean_dtype),
    ("prod", lambda x, ax, kd: ops.prod(x, ax, kd), np.prod, _sum_dtype),
    ("amax", lambda x, ax, kd: ops.amax(x, ax, kd), np.max, lambda d: d),
    ("amin", lambda x, ax, kd: ops.amin(x, ax, kd), np.min, lambda d: d),
]


@pytest.mark.parametrize("name,fn,ref,out_dtype", REDUCE_OPS, ids=[r[0] for r in REDUCE_OPS])
@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("shape,axis", AXIS_CASES, ids=[f"{s}-{a}" for s, a in AXIS_CASES])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("strided", [False, True])
def test_reduce_matches_numpy(name, fn, ref, out_dtype, dtype, np_dtype, shape, axis, keepdims,
                              strided):
    low, high = (-2, 2) if name == "prod" else (-3, 3)
    if name == "prod" and dtype.is_floating_point:
        low, high = 0.5, 1.5  # keeps products of up to 4500 values finite in float16
    x, a = _input(shape, dtype, np_dtype, strided, low=low, high=high)
    integer_mean = name == "mean" and _is_integer(dtype)
    if (name in ("amax", "amin") or integer_mean) and _is_empty_reduction(shape, axis):
        with pytest.raises(ValueError, match="reduce_m|empty axis"):
            fn(x, axis, keepdims)
        return
    expected = _ref(ref, a, axis, keepdims)
    if name == "prod" and dtype.is_floating_point:
        expected = expected.astype(np.float64)
    got = fn(x, axis, keepdims)
    tol = {}
    if name in ("sum", "mean", "prod") and dtype in (ms.float16, ms.bfloat16):
        tol = dict(atol=0.05 if dtype is ms.bfloat16 else 0.01)  # one rounding of a large result
    if name == "mean" and dtype is ms.bool_:
        expected = expected.astype(np.float32)
    elif integer_mean:  # the mean truncated toward zero (no overflow at these values)
        expected = np.trunc(expected).astype(np_dtype)
    assert_close(got, expected, out_dtype(dtype), **tol)


def test_sum_dtype_argument_and_bool_counts():
    x = ms.Tensor(np.array([[1, 2, 3], [4, 5, 6]], np.int32))
    assert_close(ops.sum(x, 1, dtype=ms.float32), np.array([6, 15], np.float32), ms.float32)
    b = ms.Tensor(np.array([[True, False, True], [True, True, True]]))
    assert_close(ops.sum(b), np.array(5, np.int64), ms.int64)
    assert_close(ops.mean(b, 0), np.array([1, 0.5, 1], np.float32), ms.float32)
    assert_close(ops.amax(b, 1), np.array([True, True]), ms.bool_)


def test_float_sum_accumulates_in_double():
    # 0.1 summed 10**6 times: float32 running sums drift by ~1%, double accumulation does not.
    x = ms.Tensor(np.full(10**6, 0.1, np.float32))
    expected = 10**6 * float(np.float32(0.1))
    assert abs(float(ops.sum(x).asnumpy()) - expected) <= expected * 1e-7
    h = ms.Tensor(np.full(5000, 1.0, np.float16))
    assert float(ops.sum(h).asnumpy()) == 5000.0  # a float16 running sum stops at 2048


def test_integer_sum_and_prod_wrap_like_numpy():
    a = np.array([2**62, 2**62, 2**62], np.int64)
    assert ops.sum(ms.Tensor(a)).asnumpy() == np.sum(a)
    b = np.array([3] * 50, np.int64)
    assert ops.prod(ms.Tensor(b)).asnumpy() == np.prod(b)


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES, ids=[str(d[0]) for d in FLOAT_DTYPES])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_max_min_propagate_nan(dtype, np_dtype, axis):
    a = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -6.0]], np.float32).astype(np_dtype)
    x = ms.Tensor(a, dtype)
    assert_close(ops.amax(x, axis), np.max(a, axis=axis).astype(np.float64), dtype)
    assert_close(ops.amin(x, axis), np.min(a, axis=axis).astype(np.float64), dtype)
    assert_close(ops.argmax(x, axis), np.argmax(a, axis=axis), ms.int64)
    assert_close(ops.argmin(x, axis), np.argmin(a, axis=axis), ms.int32)  # as MindSpore


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("length", [1, 7, 8, 9, 16, 23, 40, 129])
def test_max_min_of_rows_find_nan_and_inf_in_every_lane(np_dtype, length):
    # the row loop steps eight lanes as one vector and finishes the tail one element at a time
    rng = np.random.default_rng(length)
    for where in sorted({0, length // 2, length - 1}):
        for special in (np.nan, np.inf, -np.inf, -0.0):
            a = rng.standard_normal((3, length)).astype(np_dtype)
            a[1, where] = special
            x = ms.Tensor(a)
            for fn, ref in ((ops.amax, np.max), (ops.amin, np.min)):
                np.testing.assert_array_equal(fn(x, 1).asnumpy(), ref(a, axis=1))
                np.testing.assert_array_equal(fn(x).asnumpy(), ref(a))
            probs = ops.softmax(x, -1).asnumpy()
            want = np.exp(a - a.max(axis=1, keepdims=True))
            with np.errstate(invalid="ignore"):
                want = want / want.sum(axis=1, keepdims=True)
            np.testing.assert_allclose(probs, want, rtol=1e-6, atol=1e-7)


ARG_CASES = [((), None), ((), 0), ((1,), 0), ((7,), None), ((7,), -1), ((3, 4), None),
             ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), -2), ((2, 3, 300), 1), ((0, 3), 1)]


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("shape,axis", ARG_CASES, ids=[f"{s}-{a}" for s, a in ARG_CASES])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("strided", [False, True])
def test_argmax_argmin_first_occurrence(dtype, np_dtype, shape, axis, keepdims, strided):
    x, a = _input(shape, dtype, np_dtype, strided, low=-2, high=2)  # many ties
    np_axis = None if a.ndim == 0 else axis
    # argmax gives int64 indices and argmin int32 ones, as MindSpore 2.10's ops do
    for fn, ref, dtype in ((ops.argmax, np.argmax, ms.int64), (ops.argmin, np.argmin, ms.int32)):
        expected = ref(a, axis=np_axis, keepdims=keepdims)
        if a.ndim == 0 and keepdims:
            expected = np.asarray(expected).reshape(())
        assert_close(fn(x, axis, keepdims), np.asarray(expected), dtype)


def test_argmax_long_input_crosses_chunks():
    a = np.zeros(300000, np.float32)
    a[[70000, 250000]] = 5.0
    assert int(ops.argmax(ms.Tensor(a)).asnumpy()) == 70000
    a[200000] = np.nan
    assert int(ops.argmax(ms.Tensor(a)).asnumpy()) == 200000
    assert int(ops.argmin(ms.Tensor(-a)).asnumpy()) == 200000


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_max_min_return_values_and_indices(axis, keepdims):
    a = np.random.default_rng(3).integers(-5, 5, size=(4, 6)).astype(np.float32)
    x = ms.Tensor(a)
    for fn, vref, iref in ((ops.max, np.max, np.argmax), (ops.min, np.min, np.argmin)):
        values, indices = fn(x, axis, keepdims)
        assert_close(values, vref(a, axis=axis, keepdims=keepdims), ms.float32)
        assert_close(indices, np.asarray(iref(a, axis=axis, keepdims=keepdims)), ms.int64)


def test_max_initial_and_where():
    a = np.array([[1.0, 7.0, -2.0], [0.5, -1.0, 0.25]], np.float32)
    mask = np.array([[True, False, True], [True, True, True]])
    x = ms.Tensor(a)
    values, _ = ops.max(x, 1, initial=0.75, where=ms.Tensor(mask))
    assert_close(values, np.max(a, axis=1, initial=0.75, where=mask), ms.float32)
    values, _ = ops.min(x, 1, initial=0.0)
    assert_close(values, np.min(a, axis=1, initial=0.0), ms.float32)
    assert_close(ops.amax(x, (0, 1), initial=10.0), np.array(10.0), ms.float32)
    with pytest.raises(ValueError, match="max"):
        ops.max(x, 1, where=ms.Tensor(mask))


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES, ids=[str(d[0]) for d in FLOAT_DTYPES])
@pytest.mark.parametrize("shape,axis", [((5,), 0), ((3, 4), 1), ((3, 4), (0, 1)), ((2, 3, 4), -2)])
@pytest.mark.parametrize("keep_dims", [False, True])
def test_logsumexp(dtype, np_dtype, shape, axis, keep_dims):
    x, _ = _input(shape, dtype, np_dtype, strided=True)
    x = ops.add(x, 500.0)  # exp would overflow without the shift
    a = x.asnumpy().astype(np.float64)
    m = np.max(a, axis=axis, keepdims=True)
    expected = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=keep_dims)) + (
        m if keep_dims else np.squeeze(m, axis=axis))
    tol = dict(rtol=3e-3) if dtype in (ms.float16, ms.bfloat16) else {}
    assert_close(ops.logsumexp(x, axis, keep_dims), expected, dtype, **tol)


def test_logsumexp_infinities_and_ints():
    x = ms.Tensor(np.array([[-np.inf, -np.inf], [np.inf, 1.0]], np.float32))
    assert_close(ops.logsumexp(x, 1), np.array([-np.inf, np.inf]), ms.float32)
    i = ms.Tensor(np.array([1, 2, 3], np.int32))
    assert_close(ops.logsumexp(i, 0), np.log(np.exp([1.0, 2.0, 3.0]).sum()), ms.float32)


# ---- errors

@pytest.mark.parametrize("fn,op", [(ops.sum, "reduce_sum"), (ops.mean, "reduce_mean"),
                                   (ops.prod, "reduce_prod"), (ops.amax, "reduce_max"),
                                   (ops.amin, "reduce_min")])
def test_bad_axes(fn, op):
    x = ms.Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(IndexError, match=rf"{op}.*\(2, 3\)"):
        fn(x, 2)
    with pytest.raises(IndexError, match=rf"{op}.*\(2, 3\)"):
        fn(x, (0, -3))
    with pytest.raises(ValueError, match=rf"{op}.*duplicate.*\(2, 3\)"):
        fn(x, (1, -1))
    with pytest.raises(TypeError, match=fn.__name__):
        fn(x, "0")
    with pytest.raises(TypeError, match=fn.__name__):
        fn(np.zeros(3))


def test_arg_errors():
    x = ms.Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(IndexError, match=r"argmax.*\(2, 3\)"):
        ops.argmax(x, 5)
    with pytest.raises(TypeError, match="argmin"):
        ops.argmin(x, (0, 1))
    with pytest.raises(ValueError, match=r"argmax.*\(0, 3\)"):
        ops.argmax(ms.Tensor(np.zeros((0, 3), np.float32)))
    with pytest.raises(ValueError, match=r"argmin.*\(0, 3\)"):
        ops.argmin(ms.Tensor(np.zeros((0, 3), np.float32)), 0)
    with pytest.raises(ValueError, match="reduce_max"):
        ops.max(ms.Tensor(np.zeros((0,), np.float32)))
    with pytest.raises(TypeError, match="keepdim"):
        ops.argmax(x, 0, keepdim=1)
