"""Bitwise ops and the &, |, ^, ~, <<, >> operators: NumPy's results in PyNative and compiled."""

import numpy as np
import pytest
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import ops

INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def ints(np_type, seed):
    info = np.iinfo(np_type)
    rng = np.random.default_rng(seed)
    return rng.integers(info.min, info.max, size=(3, 4), dtype=np_type, endpoint=True)


@pytest.mark.parametrize("np_type", INT_TYPES)
@pytest.mark.parametrize("name, np_fn", [
    ("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
    ("bitwise_xor", np.bitwise_xor)])
def test_bitwise_binary_ops_match_numpy_in_both_modes(np_type, name, np_fn):
    a, b = ints(np_type, 1), ints(np_type, 2)[0]  # b broadcasts over rows
    fn = getattr(ops, name)
    graph = assert_same_in_both_modes(fn, ms.Tensor(a), ms.Tensor(b))
    np.testing.assert_array_equal(graph.asnumpy(), np_fn(a, b))
    assert graph.dtype == ms.Tensor(a).dtype


@pytest.mark.parametrize("np_type", INT_TYPES)
def test_operators_are_bitwise_on_integers_in_both_modes(np_type):
    a, b = ints(np_type, 3), ints(np_type, 4)

    def f(x, y):
        return x & y, x | y, x ^ y, ~x, x & 5, 6 | y

    outs = assert_same_in_both_modes(f, ms.Tensor(a), ms.Tensor(b))
    expected = (a & b, a | b, a ^ b, ~a, a & np_type(5), np_type(6) | b)
    for got, want in zip(outs, expected):
        np.testing.assert_array_equal(got.asnumpy(), want)
        assert got.asnumpy().dtype == np_type


def test_operators_stay_logical_on_bools_in_both_modes():
    a = np.array([True, False, True, False])
    b = np.array([True, True, False, False])

    def f(x, y):
        return x & y, x | y, x ^ y, ~x

    outs = assert_same_in_both_modes(f, ms.Tensor(a), ms.Tensor(b))
    for got, want in zip(outs, (a & b, a | b, a ^ b, ~a)):
        assert got.dtype == ms.bool_
        np.testing.assert_array_equal(got.asnumpy(), want)


@pytest.mark.parametrize("np_type", [np.int8, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                     np.uint64])
def test_shifts_match_numpy_including_counts_past_the_width(np_type):
    bits = np.iinfo(np_type).bits
    a = np.array([1, 3, -5, 100, -128, 7, 1, -1], dtype=np.int64).astype(np_type)
    counts = np.array([0, 1, 2, 3, bits - 1, bits, bits + 5, 1], dtype=np_type)

    def f(x, n):
        return x << n, x >> n

    left, right = assert_same_in_both_modes(f, ms.Tensor(a), ms.Tensor(counts))
    with np.errstate(all="ignore"):
        want_left = np.where(counts < bits, np.left_shift(a, np.minimum(counts, bits - 1)), 0)
        shifted_out = np.where(a < 0, -1, 0).astype(np_type)  # kept in np_type: uint64 is exact
        want_right = np.where(counts < bits, np.right_shift(a, np.minimum(counts, bits - 1)),
                              shifted_out)
    np.testing.assert_array_equal(left.asnumpy(), want_left.astype(np_type))
    np.testing.assert_array_equal(right.asnumpy(), want_right.astype(np_type))


def test_negative_shift_counts_give_zero_or_minus_one():
    x = ms.Tensor(np.array([8, -8], np.int32))
    n = ms.Tensor(np.array([-1, -1], np.int32))
    assert ops.bitwise_left_shift(x, n).asnumpy().tolist() == [0, 0]
    assert ops.bitwise_right_shift(x, n).asnumpy().tolist() == [0, -1]
    assert (2 << ms.Tensor(np.array([3], np.int64))).asnumpy().tolist() == [16]
    assert (ms.Tensor(np.array([16], np.int64)) >> 2).asnumpy().tolist() == [4]


def and_self(x):
    return x & x


def or_one(x):
    return x | 1


def not_(x):
    return ~x


def shift_one(x):
    return x << 1


def xor_self(x):
    return ops.bitwise_xor(x, x)


@pytest.mark.parametrize("expr", [and_self, or_one, not_, shift_one, xor_self])
def test_bitwise_on_floats_is_a_type_error_in_both_modes(expr):
    x = ms.Tensor(np.array([1.0, 2.0], np.float32))
    with pytest.raises(TypeError, match=r"bitwise_\w+: expected (an )?integer"):
        expr(x)
    with pytest.raises(TypeError, match=r"bitwise_\w+: expected (an )?integer"):
        ms.jit(expr)(x)


def test_invert_primitives_and_tensor_methods():
    a = np.array([0, 1, -2], np.int16)
    x = ms.Tensor(a)
    np.testing.assert_array_equal(ops.invert(x).asnumpy(), ~a)
    np.testing.assert_array_equal(ops.Invert()(x).asnumpy(), ~a)
    np.testing.assert_array_equal(ops.BitwiseAnd()(x, x).asnumpy(), a)
    np.testing.assert_array_equal(ops.LeftShift()(x, 1).asnumpy(), a << 1)
    np.testing.assert_array_equal(x.bitwise_xor(x).asnumpy(), a ^ a)
    np.testing.assert_array_equal(x.bitwise_right_shift(1).asnumpy(), a >> 1)


def test_bitwise_of_parameters_while_compiling_stays_a_graph_node():
    flags = ms.Parameter(ms.Tensor(np.array([0b1010], np.int32)), name="flags")

    @ms.jit
    def f(mask):
        return (flags & mask) | (flags >> 1), ~flags

    first, second = f(ms.Tensor(np.array([0b0110], np.int32)))
    assert first.asnumpy().tolist() == [(0b1010 & 0b0110) | (0b1010 >> 1)]
    assert second.asnumpy().tolist() == [~0b1010]


@pytest.mark.parametrize("np_type", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_right_shift_of_unsigned_is_logical_in_both_modes(np_type):
    # The top bit set: an arithmetic shift would copy it, a logical one brings in zeros.
    bits = np.iinfo(np_type).bits
    a = np.array([np.iinfo(np_type).max, 1 << (bits - 1), 5], np_type)
    counts = np.array([1, bits - 1, 0], np_type)
    out = assert_same_in_both_modes(lambda x, n: x >> n, ms.Tensor(a), ms.Tensor(counts))
    np.testing.assert_array_equal(out.asnumpy(), a >> counts)
    assert out.dtype == ms.Tensor(a).dtype


def test_bitwise_of_uint64_and_a_signed_type_is_a_type_error_like_numpy():
    # uint64 with int64 promotes to float64 (NumPy's rule), which bitwise ops refuse.
    u = ms.Tensor(np.array([1], np.uint64))
    i = ms.Tensor(np.array([1], np.int64))
    with pytest.raises(TypeError, match="bitwise_and: expected integer or bool tensors, got "
                                        "float64"):
        ops.bitwise_and(u, i)
    assert (u & 1).dtype == ms.uint64  # a Python int joins uint64 without widening it
