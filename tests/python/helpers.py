"""Shared test helpers: inputs in every dtype, non-contiguous views, NumPy comparisons."""
import numpy as np

import kiln as ms

# (kiln dtype, NumPy dtype used to build inputs and reference results)
ALL_DTYPES = [
    (ms.bool_, np.bool_), (ms.uint8, np.uint8), (ms.uint16, np.uint16), (ms.uint32, np.uint32),
    (ms.uint64, np.uint64), (ms.int8, np.int8), (ms.int16, np.int16), (ms.int32, np.int32),
    (ms.int64, np.int64), (ms.float16, np.float16), (ms.bfloat16, np.float32),
    (ms.float32, np.float32), (ms.float64, np.float64),
]
FLOAT_DTYPES = [d for d in ALL_DTYPES if d[0].is_floating_point]
NUMERIC_DTYPES = [d for d in ALL_DTYPES if d[0] is not ms.bool_]
INT_DTYPES = [d for d in ALL_DTYPES if d[0] in ms.dtype.int_type + ms.dtype.uint_type]
UINT_DTYPES = [d for d in ALL_DTYPES if d[0] in ms.dtype.uint_type]

# Tolerances by dtype: 16-bit floats round to ~3 significant digits.
TOLERANCE = {
    ms.float16: dict(rtol=2e-3, atol=2e-3),
    ms.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
    ms.float32: dict(rtol=1e-5, atol=1e-6),
    ms.float64: dict(rtol=1e-10, atol=1e-12),
}


def random_array(shape, np_dtype, rng, low=-3.0, high=3.0):
    """Random values of np_dtype; integers in [low, high], bools half true."""
    if np_dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(np_dtype, np.integer):
        info = np.iinfo(np_dtype)
        lo, hi = max(int(low), info.min), min(int(high), info.max)
        return rng.integers(lo, hi + 1, size=shape).astype(np_dtype)
    return rng.uniform(low, high, size=shape).astype(np_dtype)


def to_kiln(arr, dtype):
    """A kiln tensor of `dtype` holding arr (through float32 for bfloat16)."""
    return ms.Tensor(arr, dtype)


def bf16_round(arr):
    """Rounds float32 values to bfloat16 precision, as kiln stores them."""
    return ms.Tensor(np.asarray(arr, np.float32), ms.bfloat16).asnumpy()


def non_contiguous(arr, dtype):
    """A kiln view with the same values as arr whose strides are not contiguous.

    Builds a tensor with every value repeated twice along the last axis and views every other
    element, so the kernels see a genuinely strided operand.
    """
    arr = np.asarray(arr)
    if arr.ndim == 0 or arr.size == 0:
        return to_kiln(arr, dtype)
    padded = to_kiln(np.repeat(arr, 2, axis=-1), dtype)
    strides = list(padded._strides[:-1]) + [2]
    view = padded._as_strided(list(arr.shape), strides, 0)
    assert arr.shape[-1] <= 1 or not view.is_contiguous()
    return view


def assert_close(actual, expected, dtype=None, **tol):
    """Compares a kiln tensor with a NumPy result: shape, dtype and values."""
    got = actual.asnumpy() if hasattr(actual, "asnumpy") else np.asarray(actual)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
    if dtype is not None:
        assert actual.dtype == dtype, f"dtype {actual.dtype} != {dtype}"
    if got.dtype == np.bool_ or np.issubdtype(got.dtype, np.integer):
        np.testing.assert_array_equal(got, expected)
        return
    options = dict(TOLERANCE.get(dtype, TOLERANCE[ms.float32]))
    options.update(tol)
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                               equal_nan=True, **options)


def jit_train_step(net, opt, loss_fn):
    """A compiled training step: loss_fn(net(x), y) and its gradients, applied by opt in place."""
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, opt.parameters)

    @ms.jit
    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss

    return step
