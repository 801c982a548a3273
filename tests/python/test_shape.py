"""Shape ops vs NumPy: views (sharing storage), reshape, concat/stack/split, assign, errors."""
import numpy as np
import pytest
from helpers import ALL_DTYPES, assert_close, non_contiguous, random_array, to_kiln

import kiln as ms
from kiln import ops
from kiln.ops._core import call

RNG = np.random.default_rng(0)
LAYOUTS = ["contiguous", "strided"]


def make(shape, dtype, np_dtype, layout="contiguous"):
    """A kiln tensor and the NumPy array of exactly its values."""
    arr = random_array(shape, np_dtype, RNG)
    x = to_kiln(arr, dtype) if layout == "contiguous" else non_contiguous(arr, dtype)
    return x, x.asnumpy().copy()


def check(out, expected, dtype):
    assert_close(out, expected, dtype)


# (name, input shape, kiln fn, numpy fn, is a view)
VIEW_CASES = [
    ("transpose", (2, 3, 4), lambda x: ops.transpose(x, (2, 0, 1)),
     lambda a: a.transpose(2, 0, 1)),
    ("transpose_neg", (2, 3), lambda x: ops.transpose(x, (-1, 0)), lambda a: a.T),
    ("transpose_0d", (), lambda x: ops.transpose(x, ()), lambda a: a),
    ("permute", (2, 1, 3), lambda x: ops.permute(x, (1, 2, 0)), lambda a: a.transpose(1, 2, 0)),
    ("swapaxes", (2, 3, 4), lambda x: ops.swapaxes(x, 0, -1), lambda a: a.swapaxes(0, -1)),
    ("broadcast", (3, 1), lambda x: ops.broadcast_to(x, (2, 3, 4)),
     lambda a: np.broadcast_to(a, (2, 3, 4))),
    ("broadcast_keep", (3, 1), lambda x: ops.broadcast_to(x, (2, -1, 5)),
     lambda a: np.broadcast_to(a, (2, 3, 5))),
    ("broadcast_0d", (), lambda x: ops.broadcast_to(x, (2, 2)),
     lambda a: np.broadcast_to(a, (2, 2))),
    ("broadcast_empty", (0, 1), lambda x: ops.broadcast_to(x, (0, 4)),
     lambda a: np.broadcast_to(a, (0, 4))),
    ("squeeze_all", (1, 3, 1), lambda x: ops.squeeze(x), lambda a: a.squeeze()),
    ("squeeze_axis", (1, 3, 1), lambda x: ops.squeeze(x, -1), lambda a: a.squeeze(-1)),
    ("squeeze_axes", (1, 3, 1), lambda x: ops.squeeze(x, (0, 2)), lambda a: a.squeeze((0, 2))),
    ("squeeze_none", (2, 3), lambda x: ops.squeeze(x), lambda a: a),
    ("squeeze_0d", (), lambda x: ops.squeeze(x), lambda a: a),
    ("expand_dims", (2, 3), lambda x: ops.expand_dims(x, 1), lambda a: a[:, None]),
    ("expand_dims_end", (2, 3), lambda x: ops.expand_dims(x, -1), lambda a: a[..., None]),
    ("unsqueeze_0d", (), lambda x: ops.unsqueeze(x, 0), lambda a: a[None]),
    ("narrow", (5, 4), lambda x: ops.narrow(x, 0, 1, 3), lambda a: a[1:4]),
    ("narrow_last", (5, 4), lambda x: ops.narrow(x, -1, 2, 2), lambda a: a[:, 2:4]),
    ("narrow_empty", (5, 4), lambda x: ops.narrow(x, 1, 4, 0), lambda a: a[:, 4:4]),
    ("strided_slice", (6, 5, 2),
     lambda x: call("strided_slice", (x,), ((1, -4), (100, 5), (2, 3))),
     lambda a: a[1:100:2, -4:5:3]),
    ("strided_slice_empty", (4, 3),
     lambda x: call("strided_slice", (x,), ((3,), (1,), (1,))), lambda a: a[3:1]),
    ("depend", (2, 3), lambda x: ops.depend(x, ops.zeros((1,))), lambda a: a),
    ("reshape_view", (2, 3, 4), lambda x: ops.reshape(x, (6, -1)), lambda a: a.reshape(6, 4)),
    ("flatten", (2, 3, 4), lambda x: ops.flatten(x), lambda a: a.reshape(2, 12)),
    ("flatten_range", (2, 3, 4, 5), lambda x: ops.flatten(x, start_dim=1, end_dim=2),
     lambda a: a.reshape(2, 12, 5)),
]


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("name,shape,fn,ref", VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
def test_views(name, shape, fn, ref, dtype, np_dtype):
    x, a = make(shape, dtype, np_dtype)
    out = fn(x)
    check(out, ref(a), dtype)
    assert out._shares_storage(x), f"{name} should be a view"


@pytest.mark.parametrize("name,shape,fn,ref", [c for c in VIEW_CASES if c[1] and 0 not in c[1]
                                               and c[0] != "reshape_view"],
                         ids=[c[0] for c in VIEW_CASES if c[1] and 0 not in c[1]
                              and c[0] != "reshape_view"])
def test_views_of_strided_inputs(name, shape, fn, ref):
    x, a = make(shape, ms.float32, np.float32, "strided")
    out = fn(x)
    check(out, ref(a), ms.float32)
    assert out._shares_storage(x)


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape,target", [((2, 3, 4), (4, 6)), ((2, 3, 4), (-1,)),
                                          ((), (1, 1)), ((1,), ()), ((0, 3), (3, 0)),
                                          ((0, 3), (-1, 5)), ((6,), (2, 1, 3)),
                                          ((3, 4), (4, 3))])
def test_reshape(shape, target, layout, dtype, np_dtype):
    x, a = make(shape, dtype, np_dtype, layout)
    check(ops.reshape(x, target), a.reshape(target), dtype)


def test_reshape_copies_when_no_view_exists():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = ops.transpose(ms.Tensor(a), (1, 0))
    out = ops.reshape(x, (12,))
    assert_close(out, a.T.reshape(12))
    assert out.is_contiguous()
    y = ms.Tensor(a)
    assert ops.reshape(y, (2, 6))._shares_storage(y)


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shapes,axis", [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 0)], 1),
                                         ([(2, 3)], -1), ([(0, 3), (1, 3)], 0),
                                         ([(1,), (1,)], 0), ([(2, 1, 3), (2, 2, 3)], -2)])
def test_concat(shapes, axis, layout, dtype, np_dtype):
    pairs = [make(s, dtype, np_dtype, layout) for s in shapes]
    out = ops.concat([x for x, _ in pairs], axis)
    check(out, np.concatenate([a for _, a in pairs], axis), dtype)
    check(ops.cat(tuple(x for x, _ in pairs), axis=axis), np.concatenate([a for _, a in pairs],
                                                                         axis), dtype)


def test_concat_promotes():
    a = ms.Tensor(np.array([1, 2], np.int32))
    b = ms.Tensor(np.array([0.5], np.float32))
    c = ms.Tensor(np.array([True]))
    out = ops.concat([a, b, c])
    assert out.dtype == ms.float32
    assert_close(out, np.array([1, 2, 0.5, 1], np.float32))
    assert ops.concat([a, ms.Tensor(np.array([3], np.int64))]).dtype == ms.int64


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("shape,axis", [((2, 3), 0), ((2, 3), 2), ((2, 3), -1), ((), 0),
                                        ((0, 2), 1)])
def test_stack(shape, axis, dtype, np_dtype):
    pairs = [make(shape, dtype, np_dtype) for _ in range(3)]
    check(ops.stack([x for x, _ in pairs], axis), np.stack([a for _, a in pairs], axis), dtype)


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("shape,arg,axis,np_sections",
                         [((7, 2), 3, 0, [3, 6]), ((7, 2), [2, 5], 0, [2]),
                          ((2, 6), 2, -1, [2, 4]), ((4,), 4, 0, []),
                          ((4,), [0, 4, 0], 0, [0, 4]), ((0, 3), 1, 0, None)])
def test_split(shape, arg, axis, np_sections, dtype, np_dtype):
    x, a = make(shape, dtype, np_dtype)
    parts = ops.split(x, arg, axis)
    assert isinstance(parts, tuple)
    expected = [a] if np_sections is None else np.split(a, np_sections, axis)
    assert len(parts) == len(expected)
    for p, e in zip(parts, expected):
        check(p, e, dtype)
        assert p._shares_storage(x)


@pytest.mark.parametrize("size,chunks,expected", [(6, 3, [2, 2, 2]), (7, 3, [3, 3, 1]),
                                                  (2, 4, [1, 1]), (5, 1, [5])])
def test_chunk(size, chunks, expected):
    a = np.arange(size * 2, dtype=np.float32).reshape(size, 2)
    parts = ops.chunk(ms.Tensor(a), chunks)
    assert [p.shape[0] for p in parts] == expected
    assert_close(ops.concat(parts), a)


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 1)), ((3,), (2, 2)), ((), (3,)),
                                        ((2, 1, 2), (2,)), ((0, 2), (2, 2))])
def test_tile(shape, reps, dtype, np_dtype):
    x, a = make(shape, dtype, np_dtype)
    check(ops.tile(x, reps), np.tile(a, reps), dtype)


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape,value_shape", [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 3), ()),
                                               ((), ()), ((0, 3), (3,)), ((4, 1), (1,))])
def test_assign(shape, value_shape, layout, dtype, np_dtype):
    var, a = make(shape, dtype, np_dtype, layout)
    value, v = make(value_shape, ms.float64, np.float64)
    version = var._version
    out = call("assign", (var, value))
    expected = np.broadcast_to(v, shape).astype(a.dtype)
    check(var, expected if dtype is not ms.bfloat16 else
          ms.Tensor(expected, ms.bfloat16).asnumpy(), dtype)
    assert out._shares_storage(var)
    assert var._version == version + 1


def test_assign_overlapping():
    x = ms.Tensor(np.arange(6, dtype=np.float32))
    call("assign", (ops.narrow(x, 0, 1, 5), ops.narrow(x, 0, 0, 5)))
    assert_close(x, np.array([0, 0, 1, 2, 3, 4], np.float32))


def test_split_views_write_through():
    x = ms.Tensor(np.zeros((4, 2), np.float32))
    a, b = ops.split(x, 2)
    call("assign", (b, 5.0))
    assert_close(x, np.array([[0, 0], [0, 0], [5, 5], [5, 5]], np.float32))


ERRORS = [
    (lambda x: ops.transpose(x, (0, 0, 1)), ValueError, "transpose"),
    (lambda x: ops.transpose(x, (0, 1)), ValueError, "transpose"),
    (lambda x: ops.transpose(x, (0, 1, 5)), IndexError, "transpose"),
    (lambda x: ops.broadcast_to(x, (3, 3, 4)), ValueError, "broadcast_to"),
    (lambda x: ops.broadcast_to(x, (4,)), ValueError, "broadcast_to"),
    (lambda x: ops.squeeze(x, 0), ValueError, "squeeze"),
    (lambda x: ops.squeeze(x, 7), IndexError, "squeeze"),
    (lambda x: ops.expand_dims(x, 5), IndexError, "expand_dims"),
    (lambda x: ops.reshape(x, (5, 5)), ValueError, "reshape"),
    (lambda x: ops.reshape(x, (-1, -1)), ValueError, "reshape"),
    (lambda x: ops.concat([x, ops.zeros((2, 4, 4))]), ValueError, "concat"),
    (lambda x: ops.concat([x, ops.zeros((2, 3))]), ValueError, "concat"),
    (lambda x: ops.concat([x], 3), IndexError, "concat"),
    (lambda x: ops.concat([ops.zeros(()), ops.zeros(())]), ValueError, "concat"),
    (lambda x: ops.split(x, [1, 2]), ValueError, "split"),
    (lambda x: call("split", (x,), (0, (1, 5))), ValueError, "split"),
    (lambda x: call("strided_slice", (x,), ((0,), (1,), (-1,))), ValueError, "strided_slice"),
    (lambda x: call("strided_slice", (x,), ((0,), (1, 2), (1,))), ValueError, "strided_slice"),
    (lambda x: call("assign", (x, ops.zeros((5,)))), ValueError, "assign"),
    (lambda x: ops.stack([x, ops.zeros((1,))]), ValueError, "stack"),
    (lambda x: ops.narrow(x, 0, 1, 5), ValueError, "narrow"),
]


@pytest.mark.parametrize("fn,exc,name", ERRORS, ids=[f"{e[2]}{i}" for i, e in enumerate(ERRORS)])
def test_errors(fn, exc, name):
    x = ops.zeros((2, 3, 4))
    with pytest.raises(exc, match=name):
        fn(x)


def test_registry_flags():
    for name in ("transpose", "broadcast_to", "squeeze", "expand_dims", "strided_slice",
                 "split", "depend", "reshape"):
        assert ms._C.op_schema(ops._core.KIND[name])["is_view"], name
    assert ms._C.op_schema(ops._core.KIND["assign"])["mutates"] == [0]


# Transposed copies: the tiled path (4-byte elements, both sides >= 16) and the plain loop
# (other dtypes, small sides), with odd sizes, a strided and a broadcast batch.
@pytest.mark.parametrize("dtype,np_dtype", [(ms.float32, np.float32), (ms.int32, np.int32),
                                            (ms.float64, np.float64), (ms.float16, np.float16)],
                         ids=str)
@pytest.mark.parametrize("shape", [(17, 33), (40, 16), (3, 5), (3, 19, 45)])
def test_contiguous_copy_of_a_transposed_view(shape, dtype, np_dtype):
    arr = random_array(shape, np_dtype, RNG)
    x = to_kiln(arr, dtype)
    nd = len(shape)
    strides = [int(np.prod(shape[d + 1:])) for d in range(nd)]  # in elements
    strides[-1], strides[-2] = strides[-2], strides[-1]
    dims = list(shape[:-2]) + [shape[-1], shape[-2]]
    view = x._as_strided(dims, strides, 0)
    assert not view.is_contiguous()
    out = view.contiguous()
    assert out.is_contiguous()
    np.testing.assert_array_equal(out.asnumpy(), np.swapaxes(arr, nd - 1, nd - 2))


def test_transposed_copy_of_strided_and_broadcast_batches():
    arr = random_array((4, 20, 24), np.float32, RNG)
    x = to_kiln(arr, ms.float32)
    every_other = x._as_strided([2, 24, 20], [2 * 480, 1, 24], 0)  # arr[::2] transposed
    np.testing.assert_array_equal(every_other.contiguous().asnumpy(),
                                  np.swapaxes(arr[::2], 1, 2))
    repeated = x._as_strided([3, 24, 20], [0, 1, 24], 480)  # arr[1] transposed, three times
    np.testing.assert_array_equal(repeated.contiguous().asnumpy(),
                                  np.broadcast_to(arr[1].T, (3, 24, 20)))


def test_transposed_copy_keeps_every_bit():
    # Negative zero, infinities and NaNs with payloads move as bits, not as values.
    bits = np.arange(32 * 32, dtype=np.uint32).reshape(32, 32) | np.uint32(0x7F800001)
    bits[0, :4] = [0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000]
    arr = bits.view(np.float32)
    x = to_kiln(arr, ms.float32)
    out = x._as_strided([32, 32], [1, 32], 0).contiguous().asnumpy()
    np.testing.assert_array_equal(out.view(np.uint32), bits.T)


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=[str(d[0]) for d in ALL_DTYPES])
@pytest.mark.parametrize("shape", [(), (0, 3), (2, 3, 4), (1, 1, 1, 5)])
def test_tensor_shape_is_the_shape_as_int64_in_both_modes(shape, dtype, np_dtype):
    x, a = make(shape, dtype, np_dtype)
    eager = call("tensor_shape", (x,))
    graph = ms.jit(tensor_shape_of)(x)
    for out in (eager, graph):
        assert out.dtype == ms.int64 and tuple(out.shape) == (len(shape),)
        np.testing.assert_array_equal(out.asnumpy(), np.array(a.shape, np.int64))


def tensor_shape_of(x):
    return ops.dyn_shape(x)


SUM_TO = [((2, 3, 4), (3, 4)), ((2, 3, 4), (1, 4)), ((2, 3, 4), (3, 1)), ((5, 1, 4), (1, 1, 4)),
          ((2, 3, 4), (2, 3, 4)), ((3, 4), (1,)), ((0, 3), (1, 3))]


@pytest.mark.parametrize("dtype,np_dtype", [(ms.float32, np.float32), (ms.float64, np.float64),
                                            (ms.int32, np.int32)], ids=["f32", "f64", "i32"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("src,dst", SUM_TO, ids=[f"{s}->{d}" for s, d in SUM_TO])
def test_sum_to_like_sums_what_broadcasting_stretched_in_both_modes(src, dst, layout, dtype,
                                                                    np_dtype):
    x, a = make(src, dtype, np_dtype, layout)
    like = ms.Tensor(np.zeros(dst, np.float32))
    lead = len(src) - len(dst)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(dst)
                                      if d == 1 and src[lead + i] != 1)
    want = a.sum(axis=axes, keepdims=True).reshape(dst) if axes else a
    for out in (call("sum_to_like", (x, like)), ms.jit(sum_to_like_of)(x, like)):
        assert out.dtype == dtype and tuple(out.shape) == dst
        assert_close(out.asnumpy(), want)


def sum_to_like_of(x, like):
    return call("sum_to_like", (x, like))


def test_sum_to_like_refuses_a_shape_broadcasting_cannot_reach():
    with pytest.raises(ValueError, match=r"sum_to_like: cannot sum .*\(2, 3\).* \(4,\)"):
        call("sum_to_like", (ms.Tensor(np.ones((2, 3), np.float32)),
                             ms.Tensor(np.ones(4, np.float32))))


def test_reshape_to_a_tensors_shape_in_both_modes():
    # reshape's optional second input gives the target shape as the graph runs (the gradient's
    # way back to several dimensions of any size).
    x, a = make((2, 6), ms.float32, np.float32, "strided")
    like = ms.Tensor(np.zeros((3, 4), np.float32))
    for out in (call("reshape", (x, like), ((),)), ms.jit(reshape_like_of)(x, like)):
        np.testing.assert_array_equal(out.asnumpy(), a.reshape(3, 4))
    with pytest.raises(ValueError, match="reshape: cannot reshape"):
        call("reshape", (x, ms.Tensor(np.zeros((5,), np.float32))), ((),))


def reshape_like_of(x, like):
    return call("reshape", (x, like), ((),))


def test_strided_slice_grad_takes_the_shape_of_like():
    dy = ms.Tensor(np.ones((2, 2), np.float32))
    like = ms.Tensor(np.zeros((4, 3), np.float32))
    out = call("strided_slice_grad", (dy, like), ((), (1, 0), (9, 2), (2, 1)))
    want = np.zeros((4, 3), np.float32)
    want[1::2, 0:2] = 1
    np.testing.assert_array_equal(out.asnumpy(), want)
