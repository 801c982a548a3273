"""NumPy indexing (getitem/setitem) and the indexing ops (advanced_index, index_put, nonzero,
gather, one_hot, masked_select) vs NumPy."""
import numpy as np
import pytest
from helpers import ALL_DTYPES, INT_DTYPES, assert_close, non_contiguous, random_array, to_kiln

import kiln as ms
from kiln import ops
from kiln.ops import _indexing
from kiln.ops._core import call

RNG = np.random.default_rng(1)
SHAPE = (4, 5, 6)
BASE = np.arange(np.prod(SHAPE)).reshape(SHAPE)
MASK = (BASE % 3) == 0

# Index expressions as NumPy reads them; each is applied to a (4, 5, 6) array.
INDICES = [
    0, -1, 3, (1, 2), (1, 2, 3), (-1, -2, -3), slice(None), slice(1, 3), slice(None, None, 2),
    slice(-3, None), slice(10, 20), slice(3, 1), slice(None, None, -1), slice(None, None, -2),
    slice(3, 0, -1), slice(-1, -10, -3), slice(1, 1, -1), (slice(None), 2), (Ellipsis, 1),
    (Ellipsis,), (0, Ellipsis, 0), (None,), (None, 0), (1, None, slice(None), None),
    (Ellipsis, None), (slice(None, None, -1), slice(None, None, 2), slice(4, None, -3)), (),
    [0, 2], [-1, 0, 0], np.array([[1, 2], [3, 0]]), ([0, 1], [2, 3]), ([0, 1], [2, 3], [4, 5]),
    (slice(None), [0, 4]), (slice(None), [0, 4], [1, 2]), ([0, 3], slice(None), [1, 2]),
    ([0, 3], 1, [1, 2]), (1, slice(None), [1, 2]), (Ellipsis, [5, 0]), (None, [1, 2], None),
    ([[0], [3]], slice(1, 3), [[1, 2]]), ([[0], [3]], [1, 2]), (slice(None, None, -1), [1, 2]),
    ([2, 1], slice(None, None, -2), [0, 5]), ([1], slice(None), slice(None, None, -1)),
    MASK, (1, MASK[0]), (MASK[:, :, 0], 1), (MASK[:, :, 0], slice(None)),
    (slice(None), MASK[0, :, 0]),
    (MASK[:, 0, 0], 2, slice(1, 4)), [True, False, True, True], True, False, (True, 1),
    (0, False), [], (slice(None), []), np.array([], np.int64), ([0, 1], np.array(2)),
    (np.int64(2), slice(None)), (Ellipsis, np.array(3)),
]


def ids(items):
    return [str(i)[:40].replace(" ", "") for i in items]


def as_kiln_index(index):
    """The same index with NumPy arrays turned into kiln tensors (both forms are supported)."""
    def convert(item):
        if isinstance(item, np.ndarray):
            return ms.Tensor(item)
        return item
    if isinstance(index, tuple):
        return tuple(convert(i) for i in index)
    return convert(index)


@pytest.mark.parametrize("index", INDICES, ids=ids(INDICES))
@pytest.mark.parametrize("tensor_indices", [False, True])
def test_getitem(index, tensor_indices):
    x = ms.Tensor(BASE.astype(np.float32))
    idx = as_kiln_index(index) if tensor_indices else index
    out = _indexing.getitem(x, idx)
    assert_close(out, BASE.astype(np.float32)[index])
    assert_close(x[idx], BASE.astype(np.float32)[index])


@pytest.mark.parametrize("index", INDICES, ids=ids(INDICES))
def test_getitem_strided_input(index):
    a = random_array(SHAPE, np.float32, RNG)
    x = non_contiguous(a, ms.float32)
    assert_close(_indexing.getitem(x, index), a[index])


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("index", [1, (slice(None), [1, 2]), MASK, slice(None, None, -1),
                                   ([0, 3], 1, [1, 2])], ids=ids([1, "adv", "mask", "rev", "mix"]))
def test_getitem_dtypes(index, dtype, np_dtype):
    x = to_kiln(random_array(SHAPE, np_dtype, RNG), dtype)
    a = x.asnumpy()
    assert_close(_indexing.getitem(x, index), a[index], dtype)


@pytest.mark.parametrize("index,shape", [((), ()), (None, ()), (Ellipsis, ()), (True, ()),
                                         (False, ()), (0, (1,)), (slice(None), (0, 3)),
                                         ([0, 0], (1, 2)), (-1, (3,)), (0, (1, 0))])
def test_getitem_small_and_empty(index, shape):
    a = random_array(shape, np.float32, RNG)
    assert_close(_indexing.getitem(ms.Tensor(a), index), a[index])


@pytest.mark.parametrize("index", [0, (1, 2), slice(1, 3), (Ellipsis, 1), (None, 0),
                                   slice(None, None, 2), (slice(1, None), None, 3), ()])
def test_basic_indexing_is_a_view(index):
    x = ms.Tensor(BASE.astype(np.float32))
    v = _indexing.getitem(x, index)
    assert v._shares_storage(x)
    assert v is not x


def test_advanced_indexing_copies():
    x = ms.Tensor(BASE.astype(np.float32))
    assert not _indexing.getitem(x, [0, 1])._shares_storage(x)


SET_INDICES = [i for i in INDICES if not (isinstance(i, bool) and not i)] + [
    (slice(None), MASK[0]), ([0, 0, 1], [1, 1, 2]),
]


def value_for(shape, kind):
    if kind == "scalar":
        return 7, 7
    if kind == "array":
        v = np.arange(int(np.prod(shape))).reshape(shape).astype(np.float64) + 0.25
        return v, v
    if kind == "tensor":
        v = np.arange(int(np.prod(shape))).reshape(shape).astype(np.float32) - 5
        return ms.Tensor(v), v
    # a broadcast value: the last dimension only (with an extra leading size-1 axis, which
    # NumPy strips, when the target has two or more dimensions)
    if not shape:
        return 3, 3
    v = np.arange(shape[-1]) * 10.0
    v = v.reshape((1, 1, shape[-1])) if len(shape) >= 2 else v
    return ms.Tensor(v.astype(np.float32)), v


@pytest.mark.parametrize("kind", ["scalar", "array", "tensor", "broadcast"])
@pytest.mark.parametrize("index", SET_INDICES, ids=ids(SET_INDICES))
def test_setitem(index, kind):
    a = BASE.astype(np.float32)
    x = ms.Tensor(a.copy())
    target_shape = a[index].shape
    value, np_value = value_for(target_shape, kind)
    expected = a.copy()
    expected[index] = np_value
    _indexing.setitem(x, as_kiln_index(index), value)
    assert_close(x, expected)
    y = ms.Tensor(a.copy())
    y[index] = value
    assert_close(y, expected)


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("index", [1, (slice(None), [1, 2]), MASK, slice(None, None, -2),
                                   (Ellipsis, [0, 0])], ids=ids([1, "adv", "mask", "rev", "dup"]))
def test_setitem_dtypes(index, dtype, np_dtype):
    x = to_kiln(random_array(SHAPE, np_dtype, RNG), dtype)
    a = x.asnumpy().copy()
    v = random_array(a[index].shape, np_dtype, RNG)
    vt = to_kiln(v, dtype)
    a[index] = vt.asnumpy()
    _indexing.setitem(x, index, vt)
    assert_close(x, a, dtype)


def test_setitem_strided_target_writes_through():
    a = random_array(SHAPE, np.float32, RNG)
    x = non_contiguous(a, ms.float32)
    base_strides = x._strides
    _indexing.setitem(x, (slice(None), [0, 2]), 1.5)
    _indexing.setitem(x, (0, slice(None, None, -1)), ms.Tensor(np.arange(6, dtype=np.float32)))
    a[:, [0, 2]] = 1.5
    a[0, ::-1] = np.arange(6)
    assert_close(x, a)
    assert x._strides == base_strides


def test_setitem_overlap_and_conversion():
    x = ms.Tensor(np.arange(6, dtype=np.int32))
    x[1:] = x[:-1]
    assert_close(x, np.array([0, 0, 1, 2, 3, 4], np.int32))
    x[[0, 1]] = x[[4, 5]]
    assert_close(x, np.array([3, 4, 1, 2, 3, 4], np.int32))
    x[2] = 9.7  # converted like NumPy: truncation
    assert x.asnumpy()[2] == 9
    big = ms.Tensor(np.zeros(2, np.int64))
    big[0] = 2**62 + 1
    assert int(big.asnumpy()[0]) == 2**62 + 1
    x[x > 3] = 0
    assert_close(x, np.array([3, 0, 0, 2, 3, 0], np.int32))


GET_ERRORS = [
    (5, IndexError, "out of bounds for axis 0 with size 4"),
    ((0, -6), IndexError, "axis 1 with size 5"),
    ((0, 0, 0, 0), IndexError, "too many indices"),
    ((Ellipsis, Ellipsis), IndexError, "single ellipsis"),
    ([0, 4], IndexError, "advanced_index: index 4 is out of bounds for axis 0 with size 4"),
    ((slice(None), [-6]), IndexError, "index -6 is out of bounds for axis 1 with size 5"),
    (MASK[0], IndexError, "boolean index did not match"),
    (1.5, TypeError, "invalid index"),
    ("a", TypeError, "invalid index"),
    (np.array([1.0]), TypeError, "integer or bool"),
    (ms.Tensor(np.array([1.0], np.float32)), TypeError, "integer or bool"),
    (([0, 1], [0, 1, 2]), ValueError, "advanced_index"),
]


@pytest.mark.parametrize("index,exc,match", GET_ERRORS,
                         ids=[str(i) for i in range(len(GET_ERRORS))])
def test_getitem_errors(index, exc, match):
    x = ms.Tensor(BASE.astype(np.float32))
    with pytest.raises(exc, match=match):
        _indexing.getitem(x, index)


def test_setitem_errors():
    x = ms.Tensor(BASE.astype(np.float32))
    with pytest.raises(ValueError, match="assign"):
        _indexing.setitem(x, 0, ms.Tensor(np.zeros((3, 3), np.float32)))
    with pytest.raises(ValueError, match="index_put"):
        _indexing.setitem(x, [0, 1], ms.Tensor(np.zeros((3, 5, 6), np.float32)))
    with pytest.raises(IndexError, match="index_put: index 7"):
        _indexing.setitem(x, (slice(None), [7]), 1.0)
    with pytest.raises(TypeError):
        _indexing.setitem(x, 0, "text")
    with pytest.raises(TypeError, match="invalid index"):
        _indexing.setitem(x, {0: 1}, 1.0)


# ---- the ops directly ----

@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("idx_dtype,idx_np", INT_DTYPES, ids=[str(d[0]) for d in INT_DTYPES])
def test_advanced_index_index_dtypes(dtype, np_dtype, idx_dtype, idx_np):
    x = to_kiln(random_array((3, 4), np_dtype, RNG), dtype)
    a = x.asnumpy()
    i = np.array([[2, 0], [1, 1]], idx_np)
    j = np.array([3, 0], idx_np)
    out = call("advanced_index", (x, to_kiln(i, idx_dtype), to_kiln(j, idx_dtype)), ((0, 1),))
    assert_close(out, a[i, j], dtype)
    out = call("advanced_index", (x, to_kiln(j, idx_dtype)), ((1,),))
    assert_close(out, a[:, j], dtype)


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
def test_index_put(dtype, np_dtype, accumulate):
    x = to_kiln(random_array((4, 3), np_dtype, RNG), dtype)
    a = x.asnumpy().copy()
    rows = np.array([0, 2, 0, 3])
    v = to_kiln(random_array((4, 3), np_dtype, RNG), dtype)
    out = call("index_put", (x, v, ms.Tensor(rows)), ((0,), accumulate))
    if accumulate:
        acc = a.astype(np.float64)
        np.add.at(acc, rows, v.asnumpy().astype(np.float64))
        expected = to_kiln(acc.astype(a.dtype) if np_dtype != np.bool_ else acc != 0,
                           dtype).asnumpy()
        assert_close(x, expected, dtype, rtol=2e-2, atol=2e-2)
    else:
        a[rows] = v.asnumpy()
        assert_close(x, a, dtype)
    assert out._shares_storage(x)


def test_index_put_accumulate_duplicates():
    x = ms.Tensor(np.zeros(3, np.float32))
    call("index_put", (x, 1.0, ms.Tensor([0, 0, 2, 0])), ((0,), True))
    assert_close(x, np.array([3, 0, 1], np.float32))


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("shape", [(), (0,), (1,), (5,), (3, 4), (2, 0, 3), (2, 3, 2)])
@pytest.mark.parametrize("strided", [False, True])
def test_nonzero(shape, dtype, np_dtype, strided):
    arr = random_array(shape, np_dtype, RNG, low=-1, high=1)
    x = non_contiguous(arr, dtype) if strided else to_kiln(arr, dtype)
    a = x.asnumpy()
    out = ops.nonzero(x)
    expected = np.argwhere(a) if a.ndim else np.zeros((int(a != 0), 0), np.int64)
    assert_close(out, expected.astype(np.int64), ms.int64)
    if a.ndim:
        cols = ops.nonzero(x, as_tuple=True)
        for c, e in zip(cols, np.nonzero(a)):
            assert_close(c, e.astype(np.int64))


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("shape,indices,axis", [((5,), [0, 4, -1], 0),
                                                ((3, 4), [[1, 0], [2, 2]], 0),
                                                ((3, 4), [3, 0], 1), ((2, 3, 4), 2, -1),
                                                ((2, 3, 4), [], 1), ((3, 0), [1], 0)])
def test_gather(shape, indices, axis, dtype, np_dtype):
    x = to_kiln(random_array(shape, np_dtype, RNG), dtype)
    a = x.asnumpy()
    idx = np.asarray(indices, np.int64)
    assert_close(ops.gather(x, ms.Tensor(idx), axis), np.take(a, idx, axis), dtype)
    xs = non_contiguous(a, dtype)
    assert_close(ops.gather(xs, ms.Tensor(idx), axis), np.take(a, idx, axis), dtype)


def test_gather_errors():
    x = ops.zeros((3, 4))
    with pytest.raises(IndexError, match="gather: index 3 is out of bounds for axis 0"):
        ops.gather(x, ms.Tensor([3]), 0)
    with pytest.raises(ValueError, match="gather: batch dimension 0"):
        ops.gather(x, ms.Tensor([[0]]), 1, batch_dims=1)
    with pytest.raises(ValueError, match="gather: batch_dims"):
        ops.gather(x, ms.Tensor([[0, 1, 2]]), 0, batch_dims=1)  # axis before the batch dims
    with pytest.raises(TypeError, match="gather"):
        ops.gather(x, ms.Tensor([0.0]), 0)
    with pytest.raises(IndexError, match="gather"):
        ops.gather(x, ms.Tensor([0]), 2)


def np_one_hot(idx, depth, on, off, axis):
    eye = np.where(np.arange(depth) == idx[..., None], on, off)
    return np.moveaxis(eye, -1, axis if axis >= 0 else eye.ndim - 1)


@pytest.mark.parametrize("shape,axis", [((), -1), ((4,), -1), ((4,), 0), ((2, 3), 1),
                                        ((2, 3), 0), ((0,), -1)])
@pytest.mark.parametrize("on,off,dtype", [(1, 0, ms.int64), (1.0, 0.0, ms.float32),
                                          (ms.Tensor(2.5, ms.float16), -1, ms.float16)])
def test_one_hot(shape, axis, on, off, dtype):
    idx = RNG.integers(-1, 5, size=shape)  # includes out-of-range indices: all off
    out = ops.one_hot(ms.Tensor(idx), 4, on, off, axis)
    on_v = on.item() if hasattr(on, "item") else on
    assert_close(out, np_one_hot(idx, 4, on_v, off, axis), dtype)


def test_one_hot_errors():
    with pytest.raises(TypeError, match="one_hot"):
        ops.one_hot(ms.Tensor([0.5]), 3)
    with pytest.raises(IndexError, match="one_hot"):
        ops.one_hot(ms.Tensor([0]), 3, axis=3)
    with pytest.raises(ValueError, match="one_hot"):
        ops.one_hot(ms.Tensor([0]), -2)


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("shape,mask_shape", [((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (3, 4)),
                                              ((), ()), ((0, 2), (2,))])
def test_masked_select(shape, mask_shape, dtype, np_dtype):
    x = to_kiln(random_array(shape, np_dtype, RNG), dtype)
    mask = RNG.random(mask_shape) > 0.4
    full = np.broadcast_shapes(shape, mask_shape)
    expected = np.broadcast_to(x.asnumpy(), full)[np.broadcast_to(mask, full)]
    assert_close(ops.masked_select(x, ms.Tensor(mask)), expected, dtype)


def test_advanced_index_op_errors():
    x = ops.zeros((2, 3))
    with pytest.raises(TypeError, match="advanced_index"):
        call("advanced_index", (x, ms.Tensor([True])), ((0,),))
    with pytest.raises(ValueError, match="advanced_index"):
        call("advanced_index", (x, ms.Tensor([0]), ms.Tensor([0])), ((0, 0),))
    with pytest.raises(IndexError, match="advanced_index"):
        call("advanced_index", (x, ms.Tensor([0])), ((2,),))
    with pytest.raises(ValueError, match="advanced_index"):
        call("advanced_index", (x, ms.Tensor([0])), ((0, 1),))


def test_registry_flags():
    schema = ms._C.op_schema
    kind = ops._core.KIND
    assert schema(kind["index_put"])["mutates"] == [0]
    assert schema(kind["advanced_index"])["inputs"] == ["input", "indices*"]


@pytest.mark.parametrize("strided", [False, True])
def test_gather_along_the_last_axis_of_a_large_tensor(strided):
    # The indexed axis innermost: the kernel walks each row's indices (in parallel over rows).
    a = random_array((300, 2, 257), np.float32, RNG)
    x = non_contiguous(a, ms.float32) if strided else ms.Tensor(a)
    idx = np.array([5, -1, 0, 5, 256, 3] * 40)
    assert_close(x[..., ms.Tensor(idx)], a[..., idx])
    assert_close(ops.flip(x, (2,)), np.flip(a, 2))
    assert_close(ops.flip(x, (0, 2)), np.flip(a, (0, 2)))


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES)
def test_flips_and_negative_steps_on_the_innermost_axis(dtype, np_dtype):
    # An index that walks the last axis at a fixed step into a contiguous output copies runs
    # (reversed for flip), without per-element offsets; other indices keep the general loop.
    x = random_array((3, 5, 300), np_dtype, np.random.default_rng(4))
    t = to_kiln(x, dtype)
    held = t.asnumpy()
    np.testing.assert_array_equal(ops.flip(t, (2,)).asnumpy(), held[..., ::-1])
    np.testing.assert_array_equal(ops.flip(t, (1, 2)).asnumpy(), held[:, ::-1, ::-1])
    np.testing.assert_array_equal(t[..., ::-3].asnumpy(), held[..., ::-3])
    np.testing.assert_array_equal(t[:, 1:4, 2::7].asnumpy(), held[:, 1:4, 2::7])
    transposed = ops.transpose(t, (0, 2, 1))  # strided source
    np.testing.assert_array_equal(ops.flip(transposed, (2,)).asnumpy(),
                                  held.transpose(0, 2, 1)[..., ::-1])
    picks = np.array([4, 0, 299, 17, 17])  # not a progression
    np.testing.assert_array_equal(t[..., ms.Tensor(picks)].asnumpy(), held[..., picks])
