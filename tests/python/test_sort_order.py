"""argsort, sort and topk against a reference order: every value type, NaN and signed zeros,
ties kept in index order, short runs and long ones (32-bit keys sort by radix above 64)."""
import math

import numpy as np
import pytest
from helpers import to_kiln

import kiln as ms
from kiln import ops

RNG = np.random.default_rng(23)
DTYPES = [(ms.float32, np.float32), (ms.float16, np.float16), (ms.bfloat16, np.float32),
          (ms.float64, np.float64), (ms.int8, np.int8), (ms.uint8, np.uint8),
          (ms.int16, np.int16), (ms.int32, np.int32), (ms.int64, np.int64), (ms.bool_, np.bool_)]


def reference_order(row, descending):
    """Stable order: NaN last ascending and first descending, -0 tied with +0."""
    def key(j):
        v = float(row[j])
        if math.isnan(v):
            return (not descending, 0.0, j)
        return (descending, -v if descending else v, j)
    return sorted(range(len(row)), key=key)


def values(np_dtype, shape):
    if np_dtype == np.bool_:
        return RNG.integers(0, 2, shape).astype(bool)
    if np.issubdtype(np_dtype, np.integer):
        info = np.iinfo(np_dtype)
        low, high = max(info.min, -20), min(info.max, 20)
        x = RNG.integers(low, high + 1, shape).astype(np_dtype)  # many ties
        x.flat[::37] = info.min
        x.flat[5::41] = info.max
        return x
    x = np.round(RNG.standard_normal(shape) * 4).astype(np_dtype)  # many ties
    x.flat[::31] = np.nan
    x.flat[3::29] = -0.0
    x.flat[7::43] = np.inf
    x.flat[11::47] = -np.inf
    return x


@pytest.mark.parametrize("kdt,ndt", DTYPES, ids=str)
@pytest.mark.parametrize("n", [20, 300])
@pytest.mark.parametrize("descending", [False, True])
def test_argsort_is_the_stable_order(kdt, ndt, n, descending):
    x = values(ndt, (3, n))
    t = to_kiln(x, kdt)
    held = t.asnumpy().astype(np.float64) if kdt != ms.bool_ else t.asnumpy()
    got = ops.argsort(t, axis=-1, descending=descending).asnumpy()
    for r in range(3):
        assert got[r].tolist() == reference_order(held[r], descending)
    along0 = ops.argsort(to_kiln(np.ascontiguousarray(x.T), kdt), axis=0,
                         descending=descending).asnumpy()
    np.testing.assert_array_equal(along0, got.T)


@pytest.mark.parametrize("kdt,ndt", [(ms.float32, np.float32), (ms.int32, np.int32)], ids=str)
def test_sort_values_and_topk_follow_the_same_order(kdt, ndt):
    x = values(ndt, (4, 500))
    t = to_kiln(x, kdt)
    held = t.asnumpy().astype(np.float64)
    for descending in (False, True):
        want = [reference_order(held[r], descending) for r in range(4)]
        sorted_values, idx = ops.sort(t, axis=-1, descending=descending)
        np.testing.assert_array_equal(idx.asnumpy(), want)
        np.testing.assert_array_equal(sorted_values.asnumpy(),
                                      np.take_along_axis(x, np.array(want), -1))
    top_values, top_idx = ops.topk(t, 7)
    want = [reference_order(held[r], True)[:7] for r in range(4)]
    np.testing.assert_array_equal(top_idx.asnumpy(), want)
    np.testing.assert_array_equal(top_values.asnumpy(), np.take_along_axis(x, np.array(want), -1))
