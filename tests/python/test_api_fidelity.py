"""Dtype and argument fidelity with MindSpore 2.10 (issue #15 item 5), in both modes: each case
was checked against MindSpore itself."""

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, ops


def _both(fn, *args):
    return fn(*args), ms.jit(fn)(*args)


def test_argmin_is_int32_and_argmax_int64_as_in_mindspore():
    x = Tensor(np.array([[1.0, 3.0], [4.0, 0.0]], np.float32))
    for out in _both(lambda t: (ops.argmin(t, axis=1), ops.argmax(t, dim=1), t.argmin()), x):
        assert (out[0].dtype, out[1].dtype, out[2].dtype) == (ms.int32, ms.int64, ms.int32)
        np.testing.assert_array_equal(out[0].asnumpy(), [0, 1])
        assert int(out[2]) == 3


def test_ones_and_zeros_take_shape_by_keyword():
    for out in _both(lambda: (ops.ones(shape=(2, 3)), ops.zeros(shape=(1,), dtype=ms.int32))):
        assert out[0].shape == (2, 3) and out[0].dtype == ms.float32
        assert out[1].dtype == ms.int32
    with pytest.raises(TypeError, match="give the shape once"):
        ops.ones((2,), shape=(2,))


def test_bmm_takes_several_batch_dimensions():
    a = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((2, 3, 5, 6)).astype(np.float32)
    for out in _both(ops.bmm, Tensor(a), Tensor(b)):
        np.testing.assert_allclose(out.asnumpy(), a @ b, rtol=1e-5)
    with pytest.raises(ValueError, match="rank 3 or more"):
        ops.bmm(Tensor(a[0, 0]), Tensor(b[0, 0]))


def test_value_and_grad_with_a_sensitivity_argument():
    fn = ms.value_and_grad(lambda a: a * 2.0, sens_param=True)
    x, sens = Tensor(np.ones(2, np.float32)), Tensor(np.full(2, 3.0, np.float32))
    for value, grad in _both(fn, x, sens):
        np.testing.assert_array_equal(value.asnumpy(), [2.0, 2.0])
        np.testing.assert_array_equal(grad.asnumpy(), [6.0, 6.0])
