"""MindSpore's sparse tensor classes (COOTensor, CSRTensor, RowTensor) and kiln._c_expression:
dense forms against NumPy, in PyNative and compiled code, and their argument checks."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor
from kiln.common.sparse_tensor import COOTensor, CSRTensor, RowTensor, RowTensorInner

MODES = ["pynative", "graph"]


def run(mode, fn, *args):
    """fn(*args) eagerly, or compiled by ms.jit."""
    return fn(*args) if mode == "pynative" else ms.jit(fn)(*args)


def coo_reference(indices, values, shape):
    dense = np.zeros(shape, values.dtype)
    for idx, v in zip(indices, values):
        dense[tuple(idx)] += v  # duplicates add up
    return dense


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("index_dtype", [np.int16, np.int32, np.int64])
@pytest.mark.parametrize("value_dtype", [np.float32, np.int32, np.float64])
def test_coo_to_dense_matches_numpy(mode, index_dtype, value_dtype):
    rng = np.random.default_rng(0)
    shape = (3, 4, 2)
    indices = np.stack([rng.integers(0, d, 6) for d in shape], 1).astype(index_dtype)
    indices[5] = indices[0]  # a duplicate position
    values = rng.integers(-5, 6, 6).astype(value_dtype)
    out = run(mode, lambda i, v: COOTensor(i, v, shape).to_dense(),
              Tensor(indices), Tensor(values))
    assert out.asnumpy().dtype == values.dtype
    np.testing.assert_array_equal(out.asnumpy(), coo_reference(indices, values, shape))


@pytest.mark.parametrize("mode", MODES)
def test_coo_bool_values_to_dense(mode):
    indices = Tensor(np.array([[0, 0], [1, 2]], np.int32))
    values = Tensor(np.array([True, True]))
    out = run(mode, lambda i, v: COOTensor(i, v, (2, 3)).to_dense(), indices, values)
    assert out.dtype == ms.bool_
    np.testing.assert_array_equal(out.asnumpy(), [[True, False, False], [False, False, True]])


@pytest.mark.parametrize("mode", MODES)
def test_csr_to_dense_and_to_coo(mode):
    # rows: 0 -> cols 1, 3; 1 -> nothing; 2 -> col 0
    indptr = Tensor(np.array([0, 2, 2, 3], np.int32))
    indices = Tensor(np.array([1, 3, 0], np.int32))
    values = Tensor(np.array([1.5, -2.0, 4.0], np.float32))
    expect = np.array([[0, 1.5, 0, -2.0], [0, 0, 0, 0], [4.0, 0, 0, 0]], np.float32)

    def both(p, i, v):
        csr = CSRTensor(p, i, v, (3, 4))
        coo = csr.to_coo()
        return csr.to_dense(), coo.indices, coo.to_dense(), coo.to_csr().indptr

    dense, coo_indices, coo_dense, indptr_again = run(mode, both, indptr, indices, values)
    np.testing.assert_array_equal(dense.asnumpy(), expect)
    np.testing.assert_array_equal(coo_indices.asnumpy(), [[0, 1], [0, 3], [2, 0]])
    np.testing.assert_array_equal(coo_dense.asnumpy(), expect)
    np.testing.assert_array_equal(indptr_again.asnumpy(), [0, 2, 2, 3])


@pytest.mark.parametrize("mode", MODES)
def test_row_tensor_to_dense(mode):
    indices = Tensor(np.array([2, 0], np.int32))
    values = Tensor(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    out = run(mode, lambda i, v: RowTensorInner(i, v, (3, 2)).to_dense(), indices, values)
    np.testing.assert_array_equal(out.asnumpy(), [[3.0, 4.0], [0, 0], [1.0, 2.0]])
    public = RowTensor(indices, values, dense_shape=(3, 2))
    assert public.dense_shape == (3, 2) and isinstance(public, RowTensorInner)


@pytest.mark.parametrize("mode", MODES)
def test_properties_astype_abs_and_isinstance(mode):
    indices = Tensor(np.array([[0, 1], [1, 0]], np.int64))
    values = Tensor(np.array([-1.0, 2.0], np.float32))

    def props(i, v):
        x = COOTensor(i, v, (2, 3))
        y = x.astype(ms.float64).abs()
        return (y.to_dense(), isinstance(x, COOTensor), isinstance(x, (Tensor, CSRTensor)),
                x.ndim, x.size, x.itemsize)

    dense, is_coo, is_other, ndim, size, itemsize = run(mode, props, indices, values)
    assert dense.dtype == ms.float64
    np.testing.assert_array_equal(dense.asnumpy(), [[0, 1.0, 0], [2.0, 0, 0]])
    assert (bool(is_coo), bool(is_other), int(ndim), int(size), int(itemsize)) == (
        True, False, 2, 2, 4)
    x = COOTensor(indices, values, (2, 3))
    assert x.shape == (2, 3) and x.dtype == ms.float32
    indices_back, values_back, shape_back = x.to_tuple()
    assert indices_back is indices and values_back is values and shape_back == (2, 3)
    assert COOTensor(coo_tensor=x).indices is indices


def test_bad_arguments_are_mindspore_exceptions():
    i2 = Tensor(np.array([[0, 1]], np.int32))
    v1 = Tensor(np.array([1.0], np.float32))
    with pytest.raises(TypeError, match="indices must be int16, int32 or int64"):
        COOTensor(Tensor(np.array([[0.0, 1.0]], np.float32)), v1, (2, 2))
    with pytest.raises(ValueError, match="indices has 2 columns but shape"):
        COOTensor(i2, v1, (2, 2, 2))
    with pytest.raises(ValueError, match="1 rows but values has 2"):
        COOTensor(i2, Tensor(np.array([1.0, 2.0], np.float32)), (2, 2))
    with pytest.raises(TypeError, match="shape must be a tuple of positive ints"):
        COOTensor(i2, v1, (2, -1))
    with pytest.raises(TypeError, match="values must be a Tensor"):
        COOTensor(i2, [1.0], (2, 2))
    p = Tensor(np.array([0, 1], np.int32))
    with pytest.raises(ValueError, match=r"shape\[0\] \+ 1 = 3"):
        CSRTensor(p, Tensor(np.array([0], np.int32)), v1, (2, 2))
    with pytest.raises(TypeError, match="one dtype"):
        CSRTensor(p, Tensor(np.array([0], np.int64)), v1, (1, 2))
    with pytest.raises(ValueError, match="is 2-D"):
        CSRTensor(p, Tensor(np.array([0], np.int32)), v1, (1, 2, 2))
    with pytest.raises(ValueError, match="one row of the dense shape"):
        RowTensorInner(Tensor(np.array([0], np.int32)), Tensor(np.ones((1, 3), np.float32)),
                       (2, 2))


def test_names_mindspore_code_imports():
    from kiln import COOTensor as top_coo
    from kiln import CSRTensor as top_csr
    from kiln._c_expression import TensorPy
    from kiln.common import COOTensor as common_coo

    assert top_coo is common_coo is COOTensor and top_csr is CSRTensor
    # TensorPy is the C++ base of Tensor and Parameter, as MindSpore's is.
    assert isinstance(Tensor(1.0), TensorPy)
    assert isinstance(ms.Parameter(Tensor(1.0), name="p"), TensorPy)
    assert not isinstance(np.ones(2), TensorPy)


def test_returning_a_sparse_tensor_from_compiled_code_is_a_clear_error():
    indices = Tensor(np.array([[0, 1]], np.int32))
    values = Tensor(np.array([1.0], np.float32))

    @ms.jit
    def make(i, v):
        return COOTensor(i, v, (3, 4))

    with pytest.raises(TypeError, match="returns a COOTensor whose _indices, _values"):
        make(indices, values)

    @ms.jit
    def parts(i, v):
        return COOTensor(i, v, (3, 4)).to_tuple()

    got_indices, got_values, shape = parts(indices, values)
    np.testing.assert_array_equal(got_indices.asnumpy(), [[0, 1]])
    assert shape == (3, 4)
