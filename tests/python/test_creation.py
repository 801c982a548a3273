"""Creation ops vs NumPy: fill (zeros/ones/full and *_like), arange, and the random ops."""
import numpy as np
import pytest
from helpers import ALL_DTYPES, FLOAT_DTYPES, assert_close

import kiln as ms
from kiln import ops
from kiln.ops._core import call

SIZES = [(), (0,), (1,), (3,), (2, 3), (2, 0, 4), 5]


def np_shape(size):
    return (size,) if isinstance(size, int) else size


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("size", SIZES, ids=[str(s) for s in SIZES])
def test_zeros_ones_full(size, dtype, np_dtype):
    assert_close(ops.zeros(size, dtype), np.zeros(np_shape(size), np_dtype), dtype)
    assert_close(ops.ones(size, dtype), np.ones(np_shape(size), np_dtype), dtype)
    value = True if dtype is ms.bool_ else 7
    assert_close(ops.full(size, value, dtype=dtype), np.full(np_shape(size), value, np_dtype),
                 dtype)


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
def test_like(dtype, np_dtype):
    x = ms.Tensor(np.ones((2, 3), np_dtype), dtype)
    assert_close(ops.zeros_like(x), np.zeros((2, 3), np_dtype), dtype)
    assert_close(ops.ones_like(x), np.ones((2, 3), np_dtype), dtype)
    assert_close(ops.full_like(x, 1), np.ones((2, 3), np_dtype), dtype)
    assert_close(ops.zeros_like(x, dtype=ms.int32), np.zeros((2, 3), np.int32), ms.int32)
    assert_close(ops.ones_like(x, dtype=ms.float64), np.ones((2, 3)), ms.float64)


def test_default_dtypes():
    assert ops.zeros((2,)).dtype == ms.float32
    assert ops.ones(3).dtype == ms.float32
    assert ops.full((2,), 1).dtype == ms.int64
    assert ops.full((2,), 1.5).dtype == ms.float32
    assert ops.full((2,), True).dtype == ms.bool_
    assert ops.full((2,), ms.Tensor(np.float16(2))).dtype == ms.float16
    assert ops.arange(5).dtype == ms.int64
    assert ops.arange(0, 5, 0.5).dtype == ms.float32
    assert ops.arange(1.0).dtype == ms.float32
    assert ops.rand(2, 3).dtype == ms.float32
    assert ops.randn((2,)).dtype == ms.float32


def test_fill_exact_values():
    big = 2**62 + 3
    assert ops.full((2,), big).asnumpy().tolist() == [big, big]
    assert_close(ops.full((2,), -1.25, dtype=ms.float64), np.full(2, -1.25))
    assert_close(ops.full((3,), 255, dtype=ms.uint8), np.full(3, 255, np.uint8))
    with pytest.raises(OverflowError, match="full: Python integer 300 out of bounds"):
        ops.full((3,), 300, dtype=ms.uint8)  # NumPy 2 refuses it too: never a silent wrap


ARANGES = [(5,), (0, 5), (2, 10, 3), (10, 2, -3), (5, 5), (5, 0), (0, 1, 0.1), (1.5, -2.5, -0.5),
           (-3, 4, 2), (0.0, 1.0, 0.3), (0, 10, 20), (3.0,), (-7, -2, 1)]


@pytest.mark.parametrize("args", ARANGES, ids=[str(a) for a in ARANGES])
def test_arange(args):
    out = ops.arange(*args)
    is_float = any(isinstance(a, float) for a in args)
    expected = np.arange(*args).astype(np.float32 if is_float else np.int64)
    assert_close(out, expected, ms.float32 if is_float else ms.int64)


@pytest.mark.parametrize("dtype,np_dtype", [d for d in ALL_DTYPES if d[0] is not ms.bool_],
                         ids=[str(d[0]) for d in ALL_DTYPES if d[0] is not ms.bool_])
def test_arange_dtypes(dtype, np_dtype):
    assert_close(ops.arange(0, 6, 2, dtype=dtype), np.arange(0, 6, 2).astype(np_dtype), dtype)
    assert_close(ops.arange(3, dtype=dtype), np.arange(3).astype(np_dtype), dtype)


def test_arange_tensor_arguments():
    out = ops.arange(ms.Tensor(1), ms.Tensor(7), ms.Tensor(2))
    assert_close(out, np.arange(1, 7, 2), ms.int64)


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES, ids=[str(d[0]) for d in FLOAT_DTYPES])
def test_uniform(dtype, np_dtype):
    x = ops.rand(2000, dtype=dtype).asnumpy().astype(np.float64)
    assert x.shape == (2000,)
    assert x.min() >= 0 and x.max() < 1
    assert abs(x.mean() - 0.5) < 0.05
    y = ops.uniform((1000,), ms.Tensor(-2.0), ms.Tensor(3.0), dtype=dtype).asnumpy()
    assert y.min() >= -2 and y.max() < 3 and y.max() > 2


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES, ids=[str(d[0]) for d in FLOAT_DTYPES])
def test_normal(dtype, np_dtype):
    x = ops.randn(4000, dtype=dtype).asnumpy().astype(np.float64)
    assert abs(x.mean()) < 0.1 and abs(x.std() - 1) < 0.1
    y = call("standard_normal", (), ((3000,), dtype._enum, 5.0, 0.5, None)).asnumpy()
    assert abs(y.astype(np.float64).mean() - 5) < 0.1
    assert abs(y.astype(np.float64).std() - 0.5) < 0.05


def test_normal_across_chunks_is_one_stream_with_the_right_moments():
    # The kernel transforms 512 values at a time: every length, odd ones and ones that end inside
    # a chunk included, is a prefix of the same stream, and pairs are (cos, sin) of one radius.
    ms._C.set_seed(21)
    long = ops.randn(200_001, dtype=ms.float64).asnumpy()
    for n in (1, 2, 511, 512, 513, 1025, 4097):
        ms._C.set_seed(21)
        np.testing.assert_array_equal(ops.randn(n, dtype=ms.float64).asnumpy(), long[:n])
    assert abs(long.mean()) < 0.01 and abs(long.std() - 1) < 0.01
    pairs = long[:-1].reshape(-1, 2)
    radius_sq = (pairs ** 2).sum(1)  # chi-squared with 2 degrees of freedom: exponential, mean 2
    assert abs(radius_sq.mean() - 2) < 0.03 and abs(np.median(radius_sq) - 2 * np.log(2)) < 0.03
    assert abs(np.corrcoef(pairs[:, 0], pairs[:, 1])[0, 1]) < 0.01
    fourth = (long ** 4).mean()  # 3 for a normal distribution
    assert abs(fourth - 3) < 0.1


@pytest.mark.parametrize("size", [(), (0,), (1,), (3, 2)])
def test_random_shapes(size):
    assert ops.rand(*size).shape == size
    assert ops.rand(size).shape == size
    assert ops.randn(size).shape == size


def test_random_seeds():
    a = ops.rand(5, seed=3).asnumpy()
    assert np.array_equal(a, ops.rand(5, seed=3).asnumpy())
    assert not np.array_equal(a, ops.rand(5, seed=4).asnumpy())
    ms._C.set_seed(11)
    b = ops.randn(4).asnumpy()
    c = ops.randn(4).asnumpy()
    assert not np.array_equal(b, c)  # each call takes the next kernel seed
    ms._C.set_seed(11)
    assert np.array_equal(b, ops.randn(4).asnumpy())
    assert np.array_equal(c, ops.randn(4).asnumpy())


def test_registry_flags():
    for name in ("uniform_real", "standard_normal", "fill", "arange"):
        assert ms._C.is_registered(ops._core.KIND[name])


ERRORS = [
    (lambda: ops.arange(0, 5, 0), ValueError, "arange"),
    (lambda: ops.arange(0.0, 5.0, 0.0), ValueError, "arange"),
    (lambda: ops.zeros((2, -1)), ValueError, "zeros|fill"),
    (lambda: ops.rand(3, dtype=ms.int32), TypeError, "uniform_real"),
    (lambda: ops.randn(3, dtype=ms.bool_), TypeError, "standard_normal"),
    (lambda: ops.uniform((2,), ms.Tensor(1.0), ms.Tensor(0.0)), ValueError, "uniform_real"),
    (lambda: ops.zeros("abc"), TypeError, "zeros"),
    (lambda: ops.full((2,), "x"), TypeError, "number"),
]


@pytest.mark.parametrize("fn,exc,match", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
