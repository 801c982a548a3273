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


def test_where_of_two_python_numbers_takes_mindspore_default_dtypes():
    c = Tensor(np.array([True, False]))
    for out in _both(lambda c: (ops.where(c, 1.0, 2.0), ops.where(c, 1, 2), ops.where(c, 1, 2.5),
                                ops.where(c, True, False)), c):
        assert [o.dtype for o in out] == [ms.float32, ms.int64, ms.float32, ms.bool_]
        np.testing.assert_array_equal(out[2].asnumpy(), [1.0, 2.5])


def test_arange_with_a_float_step_in_both_modes():
    for out in _both(lambda: (ops.arange(0, 1, 0.25), ops.arange(1.5, -1, -1), ops.arange(3))):
        assert (out[0].dtype, out[2].dtype) == (ms.float32, ms.int64)
        np.testing.assert_allclose(out[0].asnumpy(), [0, 0.25, 0.5, 0.75])
        np.testing.assert_allclose(out[1].asnumpy(), [1.5, 0.5, -0.5])


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_gradients_agree_with_numpy_in_both_modes(accumulate):
    # Integer coordinates (one repeated) and a boolean mask, which stands for the coordinates of
    # its True elements (PyTorch's meaning), never for indices 0 and 1.
    x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    rows, cols = Tensor(np.array([0, 1, 0], np.int32)), Tensor(np.array([1, 2, 1], np.int32))
    mask = np.array([[True, False, True], [False, True, False]])
    v = Tensor(np.array([1.0, 2.0, 3.0], np.float32))

    def loss_for(by_mask):
        key = (Tensor(mask),) if by_mask else (rows, cols)

        def loss(x, v):
            y = (x * 1.0).index_put(key, v, accumulate=accumulate)
            return (y * y).sum()

        return loss

    for by_mask in (False, True):
        want_y = x.asnumpy().copy()
        coords = np.nonzero(mask) if by_mask else ([0, 1, 0], [1, 2, 1])
        if accumulate:
            np.add.at(want_y, coords, v.asnumpy())
        else:
            want_y[coords] = v.asnumpy()  # the last write of a repeated index wins
        written = np.zeros_like(want_y, bool)
        written[coords] = True
        want_dx = np.where(written & (not accumulate), 0.0, 2 * want_y)
        want_dv = 2 * want_y[coords]  # gathered, repeats included (as PyTorch's rule)
        grad = ms.grad(loss_for(by_mask), grad_position=(0, 1))
        for dx, dv in (grad(x, v), ms.jit(grad)(x, v)):
            np.testing.assert_allclose(dx.asnumpy(), want_dx, err_msg=f"mask={by_mask}")
            np.testing.assert_allclose(dv.asnumpy(), want_dv, err_msg=f"mask={by_mask}")


def test_vmap_is_exported_at_the_top_level_as_in_mindspore():
    assert ms.vmap is ops.vmap
    out = ms.vmap(lambda row: row * 2)(Tensor(np.ones((3, 2), np.float32)))
    np.testing.assert_allclose(out.asnumpy(), np.full((3, 2), 2.0))
