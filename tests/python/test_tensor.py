"""kiln.Tensor: construction, NumPy interop (from_numpy and asnumpy without copies), metadata,
conversions, errors."""
import copy
import pickle

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor


def test_from_numpy_shares_memory_both_ways():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = Tensor.from_numpy(x)
    back = t.asnumpy()
    assert np.shares_memory(x, back)
    x[0, 0] = 42.0
    assert t.asnumpy()[0, 0] == 42.0
    assert np.shares_memory(np.asarray(t), x)


def test_top_level_numpy_exchange_names():
    x = np.arange(3, dtype=np.int16)
    t = ms.from_numpy(x)  # mindspore.from_numpy: shares, as Tensor.from_numpy
    x[0] = 5
    assert t.dtype == ms.int16 and t.asnumpy().tolist() == [5, 1, 2]
    assert ms.dtype_to_nptype(ms.int8) is np.int8
    assert ms.dtype_to_pytype(ms.float16) is float and ms.dtype_to_pytype(ms.bool_) is bool
    assert ms.pytype_to_dtype(int) == ms.int64 and ms.pytype_to_dtype(tuple) == ms.tuple_


def test_tensor_of_an_array_copies_it_as_mindspore_does():
    buffer = np.zeros(2, np.float32)
    batches = []
    for i in range(3):  # one buffer refilled per batch: each tensor keeps its own values
        buffer[:] = i
        batches.append(Tensor(buffer))
    assert [b.asnumpy().tolist() for b in batches] == [[0, 0], [1, 1], [2, 2]]
    init = np.ones(3, np.float32)
    w = ms.Parameter(Tensor(init), name="w")
    ms.ops.assign(w, Tensor([5.0, 5.0, 5.0]))  # the array a weight was built from stays as is
    assert init.tolist() == [1, 1, 1]
    view = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2]
    t = Tensor(view)
    assert not np.shares_memory(t.asnumpy(), view)
    np.testing.assert_array_equal(t.asnumpy(), view)


def test_asnumpy_of_a_large_tensor_does_not_copy():
    t = ms.ops.add(Tensor(np.zeros((1024, 1024), np.float32)), 1.0)  # owned by kiln
    a, b = t.asnumpy(), t.asnumpy()
    assert np.shares_memory(a, b)
    assert a.ctypes.data == t._data_ptr
    assert a.ctypes.data % 64 == 0  # kiln's allocator aligns to 64 bytes


def test_non_contiguous_numpy_views_are_shared_with_their_strides():
    x = np.arange(24, dtype=np.float64).reshape(4, 6)
    view = x[:, ::2].T
    t = Tensor.from_numpy(view)
    assert not t.is_contiguous()
    assert t.shape == (3, 4)
    np.testing.assert_array_equal(t.asnumpy(), view)
    assert np.shares_memory(t.asnumpy(), x)


def test_negative_strides_and_read_only_arrays_are_copied():
    x = np.arange(5, dtype=np.int32)
    t = Tensor(x[::-1])
    np.testing.assert_array_equal(t.asnumpy(), [4, 3, 2, 1, 0])
    ro = np.ones(3, np.float32)
    ro.flags.writeable = False
    assert not np.shares_memory(Tensor(ro).asnumpy(), ro)


@pytest.mark.parametrize("data,dtype", [
    (1.5, ms.float32), (3, ms.int64), (True, ms.bool_), ([1.0, 2.0], ms.float32),
    ([[1, 2], [3, 4]], ms.int64), ([True, False], ms.bool_), ((1, 2.5), ms.float32),
    (np.float64(2.0), ms.float64), (np.array([1, 2], np.int8), ms.int8),
    ([np.float64(1.0), np.float64(2.0)], ms.float64),
])
def test_python_data_takes_mindspore_default_dtypes(data, dtype):
    t = Tensor(data)
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.asnumpy(), np.array(data).astype(t.asnumpy().dtype))


@pytest.mark.parametrize("dtype", [ms.float16, ms.bfloat16, ms.float64, ms.int32, ms.uint8,
                                   ms.uint16, ms.uint32, ms.uint64, ms.bool_, "float32",
                                   "uint64", np.int16, np.uint32, np.float32])
def test_explicit_dtype(dtype):
    t = Tensor([[0, 1], [1, 0]], dtype)
    assert t.dtype == ms.dtype.to_dtype(dtype)
    assert t.shape == (2, 2)
    np.testing.assert_array_equal(t.asnumpy().astype(np.float64), [[0, 1], [1, 0]])


def test_tensor_from_tensor_shares_and_casts():
    a = Tensor(np.ones(3, np.float32))
    b = Tensor(a)
    assert b._shares_storage(a)
    c = Tensor(a, ms.int32)
    assert c.dtype == ms.int32 and not c._shares_storage(a)
    assert ms.tensor([1, 2]).dtype == ms.int64


def test_bfloat16_round_trip():
    t = Tensor(np.array([1.0, 1.00390625, 3.14159], np.float32), ms.bfloat16)
    assert t.dtype == ms.bfloat16
    np.testing.assert_array_equal(t.asnumpy(), np.array([1.0, 1.0, 3.140625], np.float32))
    with pytest.raises(TypeError, match="bfloat16"):
        t._numpy()


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="ragged"):
        Tensor([[1, 2], [3]])
    with pytest.raises(TypeError):
        Tensor(np.array([1 + 2j]))
    with pytest.raises(TypeError):
        Tensor(np.array([1], np.longdouble))
    with pytest.raises(TypeError):
        Tensor(["a", "b"])
    with pytest.raises(TypeError):
        Tensor([1.0], dtype="float128")
    with pytest.raises(ValueError):
        Tensor()


def test_metadata():
    t = Tensor(np.zeros((2, 3, 4), np.float16))
    assert t.shape == (2, 3, 4) and isinstance(t.shape, tuple)
    assert t.ndim == 3 and t.size == 24 and t.itemsize == 2 and t.nbytes == 48
    assert t.strides == (24, 8, 2)
    assert t.dtype == ms.float16 and str(t.dtype) == "Float16"
    assert len(t) == 2


def test_scalar_conversions():
    t = Tensor(np.array([2.5], np.float32))
    assert t.item() == 2.5 and float(t) == 2.5 and int(t) == 2 and bool(t)
    assert not bool(Tensor(0))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(Tensor([1, 2]))
    with pytest.raises(ValueError, match="Only one element tensors"):
        Tensor([1, 2]).item()
    with pytest.raises(TypeError):
        len(Tensor(1.0))
    assert Tensor([[1, 2]]).tolist() == [[1, 2]]
    assert f"{Tensor(1.25):.1f}" == "1.2"


def test_repr_shows_shape_dtype_and_values():
    r = repr(Tensor([[1.0, 2.0]]))
    assert "shape=[1, 2]" in r and "dtype=Float32" in r and "1." in r and "2." in r
    assert str(Tensor([1, 2])) == "[1 2]"


def test_copy_and_pickle_make_independent_tensors():
    t = Tensor(np.arange(4, dtype=np.float32))
    for other in (copy.copy(t), copy.deepcopy(t), pickle.loads(pickle.dumps(t)), t.copy()):
        assert not other._shares_storage(t)
        np.testing.assert_array_equal(other.asnumpy(), t.asnumpy())


def test_astype_and_methods():
    t = Tensor([1.7, -2.2])
    assert t.astype(ms.int32).asnumpy().tolist() == [1, -2]
    assert t.astype("float64").dtype == ms.float64
    np.testing.assert_allclose(t.abs().asnumpy(), [1.7, 2.2], rtol=1e-6)
    np.testing.assert_allclose(Tensor([1.0]).exp().asnumpy(), [np.e], rtol=1e-6)
    np.testing.assert_allclose(Tensor([4.0]).sqrt().asnumpy(), [2.0])
    np.testing.assert_allclose(Tensor([1.0]).log().asnumpy(), [0.0])


def test_tensors_hash_by_identity_and_compare_elementwise():
    a, b = Tensor([1.0]), Tensor([1.0])
    assert len({a, b}) == 2
    assert (a == b).asnumpy().tolist() == [True]


def test_thread_count_is_settable():
    n = ms.get_num_threads()
    ms.set_num_threads(1)
    assert ms.get_num_threads() == 1
    ms.set_num_threads(n)
    with pytest.raises(ValueError):
        ms.set_num_threads(0)


def test_caching_allocator_reuses_freed_blocks():
    from kiln import _C

    Tensor(np.ones(1)) + 1  # warm up
    for _ in range(3):
        ms.ops.add(Tensor(np.ones((256, 256), np.float32)), 1.0)
    before = _C.allocator_stats()["system_allocations"]
    for _ in range(20):
        ms.ops.add(Tensor(np.ones((256, 256), np.float32)), 1.0)
    assert _C.allocator_stats()["system_allocations"] == before
    _C.empty_cache()
    assert _C.allocator_stats()["cached_bytes"] == 0
