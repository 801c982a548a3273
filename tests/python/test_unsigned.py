"""uint16, uint32, uint64 (and uint8) against NumPy in PyNative and Graph mode: wrapping
arithmetic, values past int64, mixed promotion, Python ints, reductions, casts at the edges,
indexing, creation, printing and gradients. The dtype-parametrized suites (helpers.ALL_DTYPES)
cover the ordinary values; this file covers what only unsigned types have."""
import numpy as np
import pytest
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import ops

UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]
WIDE_UNSIGNED = [np.uint16, np.uint32, np.uint64]


def kiln_dtype(np_type):
    return ms.dtype.to_dtype(np_type)


def extremes(np_type):
    """Values that catch signed-compare and wrap bugs: 0, 1, the top bit, the maximum."""
    info = np.iinfo(np_type)
    return np.array([0, 1, 2, 7, 1 << (info.bits - 1), info.max - 1, info.max], np_type)


def check_exact(got, want):
    """Exact equality of values and dtype (no float comparison: uint64 needs every bit)."""
    want = np.asarray(want)
    assert got.dtype == kiln_dtype(want.dtype), f"{got.dtype} != {want.dtype}"
    np.testing.assert_array_equal(got.asnumpy(), want)


def arithmetic(x, y):
    return x + y, x - y, x * y, x // y, x % y, -x, x ** y


def comparisons(x, y):
    return x < y, x >= y, x == y, ops.maximum(x, y), ops.minimum(x, y)


@pytest.mark.parametrize("np_type", UNSIGNED)
def test_arithmetic_wraps_like_numpy_in_both_modes(np_type):
    a = extremes(np_type)
    b = np.roll(a, 3)  # every pair of small, top-bit and maximum values, zeros included
    got = assert_same_in_both_modes(arithmetic, ms.Tensor(a), ms.Tensor(b), rtol=0, atol=0)
    with np.errstate(all="ignore"):
        want = (a + b, a - b, a * b, np.floor_divide(a, b), np.remainder(a, b), -a, a ** b)
    for g, w in zip(got, want):
        check_exact(g, w)  # division and remainder by zero give 0, as NumPy's


@pytest.mark.parametrize("np_type", UNSIGNED)
def test_comparisons_and_extrema_are_unsigned_in_both_modes(np_type):
    a = extremes(np_type)
    b = a[::-1].copy()
    got = assert_same_in_both_modes(comparisons, ms.Tensor(a), ms.Tensor(b), rtol=0, atol=0)
    want = (a < b, a >= b, a == b, np.maximum(a, b), np.minimum(a, b))
    for g, w in zip(got, want):
        check_exact(g, w)


MIXED_PAIRS = [
    (np.uint8, np.uint16), (np.uint16, np.uint64), (np.uint16, np.int8), (np.uint16, np.int16),
    (np.uint16, np.int64), (np.uint32, np.int32), (np.uint32, np.int8), (np.uint8, np.int32),
    (np.bool_, np.uint32), (np.uint64, np.int64), (np.uint64, np.int8),
]


def add_and_multiply(x, y):
    return x + y, x * y, y - x


@pytest.mark.parametrize("ta,tb", MIXED_PAIRS, ids=lambda t: np.dtype(t).name)
def test_mixed_integer_promotion_matches_numpy_in_both_modes(ta, tb):
    a = np.array([0, 1, 3, 100], ta) if ta is not np.bool_ else np.array([0, 1, 1, 0], ta)
    b = np.array([5, 1, 0, 2], tb)
    got = assert_same_in_both_modes(add_and_multiply, ms.Tensor(a), ms.Tensor(b))
    for g, w in zip(got, (a + b, a * b, b - a)):
        check_exact(g, w)  # uint64 with a signed type: float64, as NumPy


@pytest.mark.parametrize("np_type", UNSIGNED)
def test_an_unsigned_with_a_float_gives_the_float_in_both_modes(np_type):
    # kiln's rule (PyTorch's and MindSpore's for every integer): NumPy would widen the float.
    a = np.array([0, 3, 250], np_type)
    f = np.array([0.5, -1.0, 2.0], np.float32)
    got = assert_same_in_both_modes(lambda_add, ms.Tensor(a), ms.Tensor(f))
    assert got.dtype == ms.float32
    np.testing.assert_array_equal(got.asnumpy(), a.astype(np.float32) + f)


def lambda_add(x, y):
    return x + y


def add_max_uint64(x):
    return x + (2**64 - 1), x - 2**63, x * 3


def test_python_ints_past_int64_join_uint64_in_both_modes():
    a = np.array([0, 1, 2**63, 2**64 - 1], np.uint64)
    got = assert_same_in_both_modes(add_max_uint64, ms.Tensor(a), rtol=0, atol=0)
    with np.errstate(all="ignore"):
        want = (a + np.uint64(2**64 - 1), a - np.uint64(2**63), a * np.uint64(3))
    for g, w in zip(got, want):
        check_exact(g, w)


def add_minus_one(x):
    return x + (-1)


def add_2_pow_63(x):
    return x + 2**63


def add_2_pow_64(x):
    return x + 2**64


@pytest.mark.parametrize("fn,np_type,match", [
    (add_minus_one, np.uint16, "add: Python integer -1 out of bounds for uint16"),
    (add_minus_one, np.uint64, "add: Python integer -1 out of bounds for uint64"),
    (add_2_pow_63, np.int64, "add: Python integer 9223372036854775808 out of bounds for int64"),
    (add_2_pow_63, np.uint32, "out of bounds for uint32"),
    (add_2_pow_64, np.uint64, "18446744073709551616 is out of bounds for an int64 or uint64"),
])
def test_python_ints_out_of_the_dtype_raise_overflow_in_both_modes(fn, np_type, match):
    x = ms.Tensor(np.array([1, 2], np_type))
    with pytest.raises(OverflowError, match=match):
        fn(x)
    with pytest.raises(OverflowError, match=match):
        ms.jit(fn)(x)  # at compile time, naming the op


def test_python_ints_at_the_edges_of_each_unsigned_type_fit():
    for np_type in UNSIGNED:
        top = int(np.iinfo(np_type).max)
        x = ms.Tensor(np.array([0], np_type))
        check_exact(x + top, np.array([top], np_type))
        name = np.dtype(np_type).name  # past uint64: "... for an int64 or uint64 tensor"
        with pytest.raises(OverflowError, match=f"out of bounds for .*{name}"):
            x + (top + 1)
        with pytest.raises(OverflowError):
            ms.Tensor([top + 1], kiln_dtype(np_type))
        check_exact(ms.Tensor([top], kiln_dtype(np_type)), np.array([top], np_type))


def reductions(x):
    return (ops.sum(x), ops.sum(x, 0), ops.prod(x, 1), ops.amax(x), ops.amin(x, 1),
            ops.argmax(x), ops.argmin(x, 1), ops.mean(x))


@pytest.mark.parametrize("np_type", UNSIGNED)
def test_reductions_match_numpy_in_both_modes(np_type):
    a = extremes(np_type)[1:].reshape(2, 3)  # the top bit and the maximum: sums wrap
    got = assert_same_in_both_modes(reductions, ms.Tensor(a), rtol=0, atol=0)
    acc = np.int64 if np_type is np.uint8 else np.uint64  # uint8 sums in int64, as PyTorch
    with np.errstate(all="ignore"):
        want = (a.sum(dtype=acc), a.sum(0, dtype=acc), a.prod(1, dtype=acc), a.max(),
                a.min(1), np.argmax(a), np.argmin(a, 1).astype(np.int32))
    for g, w in zip(got[:-1], want):
        check_exact(g, w)
    # an integer mean keeps the dtype (MindSpore): the sum in that dtype, wrapping, // count
    assert got[-1].dtype == ms.Tensor(a).dtype
    with np.errstate(all="ignore"):
        check_exact(got[-1], a.sum(dtype=np_type) // np_type(a.size))


# Casts whose values are at a type's edge; NumPy's answer for each (x86, values in int64 range).
EDGE_CASTS = [
    (np.array([0, 1, 2**63, 2**64 - 1], np.uint64), [np.float64, np.float32, np.int64, np.uint8,
                                                     np.uint32, np.int16, np.bool_]),
    (np.array([-1, -2**63, 2**40 + 3, 7], np.int64), [np.uint64, np.uint32, np.uint16]),
    (np.array([-1, -128, 127], np.int8), [np.uint16, np.uint64]),
    (np.array([65535, 32768, 1], np.uint16), [np.int16, np.int8, np.float16, np.uint32]),
    (np.array([-1.7, -2.3, 0.5, 3.9, 65535.0], np.float64), [np.uint8, np.uint16, np.uint32,
                                                             np.uint64, np.int8]),
    (np.array([2.0**63, 2.0**64 - 2048, 1e19], np.float64), [np.uint64]),
    (np.array([4294967295, 2**31], np.uint32), [np.float64, np.int32, np.int64]),
]


def cast_to_every(x, targets):
    return [ops.cast(x, t) for t in targets] + [x.astype(t) for t in targets]


@pytest.mark.parametrize("a,targets", EDGE_CASTS, ids=lambda v: str(getattr(v, "dtype", "")))
def test_casts_at_the_edges_match_numpy_in_both_modes(a, targets):
    targets = [kiln_dtype(t) for t in targets]
    got = assert_same_in_both_modes(cast_to_every, ms.Tensor(a), targets, rtol=0, atol=0)
    with np.errstate(all="ignore"):
        for g, t in zip(got, targets + targets):
            check_exact(g, a.astype(ms.dtype.dtype_to_nptype(t)))


def uses_the_names(x):
    y = ops.cast(x, ms.uint16)
    if y.dtype == ms.uint16:
        y = y + 1
    return y.astype(ms.dtype.uint64), ops.zeros((2,), ms.uint32), y.dtype == ms.dtype.uint32


def test_graph_code_names_the_unsigned_dtypes_as_mindspore_code_does():
    got = assert_same_in_both_modes(uses_the_names, ms.Tensor(np.array([1, 65535], np.int32)))
    check_exact(got[0], np.array([2, 0], np.uint64))
    check_exact(got[1], np.zeros(2, np.uint32))
    assert got[2] is False
    assert ms.dtype.uint_type == (ms.uint8, ms.uint16, ms.uint32, ms.uint64)
    assert all(t in ms.dtype.number_type for t in ms.dtype.uint_type)
    assert [ms.dtype.to_dtype(n) for n in ("uint16", "uint32", "uint64")] == [
        ms.uint16, ms.uint32, ms.uint64]
    assert ms.uint32.itemsize == 4 and not ms.uint64.is_floating_point


def test_float_to_unsigned_outside_int64_and_nan_give_zero():
    a = np.array([np.nan, np.inf, -np.inf, 2.0**64, -1e30], np.float64)
    for t in (ms.uint8, ms.uint16, ms.uint32, ms.uint64):
        assert ops.cast(ms.Tensor(a), t).asnumpy().tolist() == [0] * 5


def test_bfloat16_round_trips_through_unsigned_types():
    b = ms.Tensor(np.array([0.0, 1.0, 255.0, 65280.0], np.float32), ms.bfloat16)
    for t in (ms.uint16, ms.uint32, ms.uint64):
        assert ops.cast(b, t).asnumpy().tolist() == [0, 1, 255, 65280]
        np.testing.assert_array_equal(ops.cast(ops.cast(b, t), ms.bfloat16).asnumpy(),
                                      b.asnumpy())


def creation():
    return (ops.full((2,), 2**64 - 1, dtype=ms.uint64), ops.zeros((2, 1), ms.uint32),
            ops.ones((3,), ms.uint16), ops.fill(ms.uint16, (2,), 65535),
            ops.full((1,), 2**63, dtype=ms.uint64))


def test_creation_in_both_modes():
    got = assert_same_in_both_modes(creation, rtol=0, atol=0)
    want = (np.full(2, 2**64 - 1, np.uint64), np.zeros((2, 1), np.uint32), np.ones(3, np.uint16),
            np.full(2, 65535, np.uint16), np.full(1, 2**63, np.uint64))
    for g, w in zip(got, want):
        check_exact(g, w)
    with pytest.raises(OverflowError, match="full: Python integer 65536 out of bounds for "
                                            "uint16"):
        ops.full((2,), 65536, dtype=ms.uint16)
    with pytest.raises(OverflowError, match="out of bounds for uint64"):
        ops.full((2,), -1, dtype=ms.uint64)
    check_exact(ops.zeros_like(ms.Tensor(np.ones(2, np.uint64))), np.zeros(2, np.uint64))


def index_with(x, i, j):
    return x[i], ops.gather(x, j, 0), ops.one_hot(j, 4)


@pytest.mark.parametrize("np_type", WIDE_UNSIGNED)
def test_unsigned_index_tensors_in_both_modes(np_type):
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    i, j = np.array([3, 0, 3], np_type), np.array([1, 2], np_type)
    got = assert_same_in_both_modes(index_with, ms.Tensor(a), ms.Tensor(i), ms.Tensor(j))
    np.testing.assert_array_equal(got[0].asnumpy(), a[i])
    np.testing.assert_array_equal(got[1].asnumpy(), a[j])
    np.testing.assert_array_equal(got[2].asnumpy(), np.eye(4, dtype=np.float32)[j])


def take_rows(x, i):
    return x[i]


def test_uint64_index_past_int64_is_an_index_error_not_a_wrap():
    # Read as int64, 2**64 - 1 would be -1: the last row.
    x = ms.Tensor(np.arange(6, dtype=np.float32).reshape(3, 2))
    i = ms.Tensor(np.array([0, 2**64 - 1], np.uint64))
    for run in (take_rows, ms.jit(take_rows)):
        with pytest.raises(IndexError, match="index 18446744073709551615 is out of bounds for "
                                             "axis 0 with size 3"):
            run(x, i)
    hot = ops.one_hot(ms.Tensor(np.array([1, 2**64 - 1], np.uint64)), 3)
    np.testing.assert_array_equal(hot.asnumpy(), [[0, 1, 0], [0, 0, 0]])  # an all-off row


def test_clamp_of_unsigned_with_bounds_outside_the_type():
    x = ms.Tensor(np.array([0, 5, 65535], np.uint16))
    check_exact(ops.clamp(x, -1, 70000), np.array([0, 5, 65535], np.uint16))  # limits nothing
    check_exact(ops.clamp(x, 1, 6), np.array([1, 5, 6], np.uint16))
    with pytest.raises(OverflowError, match="clamp: Python integer 70000 out of bounds for "
                                            "uint16"):
        ops.clamp(x, 70000)  # NumPy's clip raises too
    with pytest.raises(OverflowError, match="clamp: Python integer -1 out of bounds"):
        ops.clamp(x, None, -1)


def matmul(a, b):
    return ops.matmul(a, b)


@pytest.mark.parametrize("np_type", WIDE_UNSIGNED)
def test_matmul_wraps_like_numpy_in_both_modes(np_type):
    info = np.iinfo(np_type)
    a = np.array([[info.max, 2], [1 << (info.bits - 1), 3]], np_type)
    b = np.array([[3, 1], [info.max, 7]], np_type)
    got = assert_same_in_both_modes(matmul, ms.Tensor(a), ms.Tensor(b), rtol=0, atol=0)
    with np.errstate(all="ignore"):
        check_exact(got, a @ b)


def print_values(x):
    print("u:", x)
    return x


def test_printing_shows_every_digit(capfd):
    a = np.array([[0, 2**63], [2**64 - 1, 12345678901234567890]], np.uint64)
    x = ms.Tensor(a)
    assert str(x) == str(a)
    assert repr(x) == ("Tensor(shape=[2, 2], dtype=UInt64, value=\n"
                       + np.array2string(a, separator=", ", threshold=1000) + ")")
    assert [str(t) for t in (ms.uint8, ms.uint16, ms.uint32, ms.uint64)] == [
        "UInt8", "UInt16", "UInt32", "UInt64"]
    ms.jit(print_values)(x)  # printed by the executor (runtime/format.cc), not NumPy
    out = capfd.readouterr().out
    assert "u: [[0 9223372036854775808]\n[18446744073709551615 12345678901234567890]]" in out
    assert ms.Tensor(np.array(7, np.uint32)).item() == 7
    assert int(ms.Tensor(np.array(2**64 - 1, np.uint64))) == 2**64 - 1
    assert ms.Tensor(a).tolist() == a.tolist()


def scaled_sum(x, w):
    return (ops.cast(x, ms.float32) * w).sum()


def test_unsigned_tensors_are_not_differentiable_in_both_modes():
    x = ms.Tensor(np.array([1, 2, 3], np.uint32))
    w = ms.Tensor(np.array([0.5, 1.0, 2.0], np.float32))
    for grad in (ms.grad(scaled_sum, grad_position=(0, 1)),
                 ms.jit(ms.grad(scaled_sum, grad_position=(0, 1)))):
        gx, gw = grad(x, w)
        assert gx.asnumpy().tolist() == [0, 0, 0]
        np.testing.assert_array_equal(gw.asnumpy(), [1, 2, 3])


def test_numpy_exchange_shares_memory_and_keeps_the_dtype():
    for np_type in WIDE_UNSIGNED:
        a = extremes(np_type)
        t = ms.Tensor.from_numpy(a)
        assert t.dtype == kiln_dtype(np_type) and t.asnumpy().dtype == np_type
        a[0] = 9  # shared: the tensor sees the write
        assert t.asnumpy()[0] == 9
        assert ms.dtype.dtype_to_nptype(t.dtype) is np_type
    assert ms.Tensor(2**63).dtype == ms.uint64  # NumPy's type for a Python int past int64
