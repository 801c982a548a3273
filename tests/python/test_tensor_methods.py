"""Tensor methods that map to kiln's ops: values against NumPy, in PyNative and compiled."""
import numpy as np
import pytest
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32)
ROW = RNG.standard_normal((4,)).astype(np.float32)
SQ = RNG.standard_normal((4, 4)).astype(np.float32)
I = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
POS = np.abs(A) + 0.5
MASK = A > 0


def _t(a):
    return Tensor(a)


# (id, method call, numpy reference, inputs)
CASES = [
    ("absolute", lambda x: x.absolute(), np.abs, (A,)),
    ("neg", lambda x: x.neg(), np.negative, (A,)),
    ("negative_int", lambda x: x.negative(), np.negative, (I,)),
    ("cos", lambda x: x.cos(), np.cos, (A,)),
    ("sin", lambda x: x.sin(), np.sin, (A,)),
    ("expm1", lambda x: x.expm1(), np.expm1, (A,)),
    ("log1p", lambda x: x.log1p(), np.log1p, (POS,)),
    ("rsqrt", lambda x: x.rsqrt(), lambda a: 1 / np.sqrt(a), (POS,)),
    ("floor", lambda x: x.floor(), np.floor, (A,)),
    ("square_int", lambda x: x.square(), np.square, (I,)),
    ("sign", lambda x: x.sign(), np.sign, (A,)),
    ("invert", lambda x: x.invert(), np.invert, (I,)),
    ("logical_not", lambda x: x.logical_not(), np.logical_not, (A,)),
    ("add_alpha", lambda x, y: x.add(y, alpha=2), lambda a, b: a + 2 * b, (A, B)),
    ("sub_alpha", lambda x, y: x.sub(y, alpha=3), lambda a, b: a - 3 * b, (A, B)),
    ("subtract", lambda x, y: x.subtract(y), np.subtract, (A, ROW)),
    ("mul", lambda x, y: x.mul(y), np.multiply, (A, ROW)),
    ("multiply", lambda x, y: x.multiply(y), np.multiply, (A, B)),
    ("div_int", lambda x: x.div(4), lambda a: a / 4, (I,)),
    ("div_floor", lambda x: x.div(4, rounding_mode="floor"), lambda a: a // 4, (I,)),
    ("divide", lambda x, y: x.divide(y), np.divide, (A, POS)),
    ("true_divide", lambda x, y: x.true_divide(y), np.divide, (A, POS)),
    ("floor_divide", lambda x: x.floor_divide(4), lambda a: a // 4, (I,)),
    ("fmod", lambda x: x.fmod(3), lambda a: np.fmod(a, 3), (I,)),
    ("remainder", lambda x: x.remainder(3), lambda a: np.remainder(a, 3), (I,)),
    ("pow", lambda x: x.pow(2), np.square, (A,)),
    ("maximum", lambda x, y: x.maximum(y), np.maximum, (A, B)),
    ("minimum", lambda x, y: x.minimum(y), np.minimum, (A, B)),
    ("gt", lambda x, y: x.gt(y), np.greater, (A, B)),
    ("ge", lambda x, y: x.ge(y), np.greater_equal, (A, B)),
    ("lt", lambda x, y: x.lt(y), np.less, (A, B)),
    ("le", lambda x, y: x.le(y), np.less_equal, (A, B)),
    ("greater", lambda x, y: x.greater(y), np.greater, (A, B)),
    ("greater_equal", lambda x, y: x.greater_equal(y), np.greater_equal, (A, B)),
    ("less", lambda x, y: x.less(y), np.less, (A, B)),
    ("less_equal", lambda x, y: x.less_equal(y), np.less_equal, (A, B)),
    ("ne", lambda x, y: x.ne(y), np.not_equal, (A, A)),
    ("not_equal", lambda x, y: x.not_equal(y), np.not_equal, (A, B)),
    ("equal", lambda x, y: x.equal(y), np.equal, (A, A)),
    ("logical_and", lambda x, y: x.logical_and(y), np.logical_and, (A, I)),
    ("logical_or", lambda x, y: x.logical_or(y), np.logical_or, (A, I)),
    ("logical_xor", lambda x, y: x.logical_xor(y), np.logical_xor, (A, I)),
    ("mm", lambda x, y: x.mm(y), np.matmul, (A, SQ)),
    ("bmm", lambda x: x.bmm(x.swapaxes(1, 2)), lambda a: a @ a.transpose(0, 2, 1),
     (A.reshape(3, 2, 2),)),
    ("amax", lambda x: x.amax(1, True), lambda a: a.max(1, keepdims=True), (A,)),
    ("amin", lambda x: x.amin(), np.min, (A,)),
    ("clip", lambda x: x.clip(-0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), (A,)),
    ("hardshrink", lambda x: x.hardshrink(0.5), lambda a: np.where(np.abs(a) > 0.5, a, 0), (A,)),
    ("logsumexp", lambda x: x.logsumexp(1, keepdim=True),
     lambda a: np.log(np.exp(a).sum(1, keepdims=True)), (A,)),
    ("round", lambda x: (x * 10).round(), lambda a: np.round(a * 10), (A,)),
    ("round_decimals", lambda x: x.round(decimals=2), lambda a: np.round(a, 2), (A,)),
    ("roll", lambda x: x.roll(1, 1), lambda a: np.roll(a, 1, 1), (A,)),
    ("tril", lambda x: x.tril(1), lambda a: np.tril(a, 1), (A,)),
    ("triu", lambda x: x.triu(-1), lambda a: np.triu(a, -1), (A,)),
    ("narrow", lambda x: x.narrow(1, 1, 2), lambda a: a[:, 1:3], (A,)),
    ("where", lambda x, y: x.where(x > 0, y), lambda a, b: np.where(a > 0, a, b), (A, B)),
    ("masked_select", lambda x: x.masked_select(x > 0), lambda a: a[a > 0], (A,)),
    ("masked_fill", lambda x, m: x.masked_fill(m, 2.5), lambda a, m: np.where(m, 2.5, a),
     (A, MASK)),
    ("masked_fill_int", lambda x: x.masked_fill(x > 0, 2.5), lambda a: np.where(a > 0, 2, a),
     (I,)),
    ("fill_int", lambda x: x.fill(3.5), lambda a: np.full_like(a, 3), (I,)),
    ("tile", lambda x: x.tile((2, 1)), lambda a: np.tile(a, (2, 1)), (A,)),
    ("repeat", lambda x: x.repeat(2, 1, 2), lambda a: np.tile(a, (2, 1, 2)), (A,)),
    ("gather_dim", lambda x, i: x.gather(1, i), lambda a, i: np.take_along_axis(a, i, 1),
     (A, np.array([[0, 3], [1, 1], [2, 0]], np.int64))),
    ("gather_axis", lambda x, i: x.gather(i, 1), lambda a, i: np.take(a, i, 1),
     (A, np.array([3, 0], np.int32))),
    ("select_dim", lambda x: x.select(1, 2), lambda a: a[:, 2], (A,)),
    ("select_cond", lambda x, y: x.select(x > 0, y), lambda a, b: np.where(a > 0, a, b),
     (A, B)),
    ("nonzero", lambda x: x.nonzero(), np.argwhere, (I,)),
    ("ravel", lambda x: x.ravel(), np.ravel, (A,)),
    ("flip", lambda x: x.flip((0, 1)), lambda a: a[::-1, ::-1], (A,)),
    ("t", lambda x: x.t(), np.transpose, (A,)),
    ("mT", lambda x: x.mT, lambda a: a.swapaxes(-1, -2), (A.reshape(3, 2, 2),)),
    ("moveaxis", lambda x: x.moveaxis(0, 2), lambda a: np.moveaxis(a, 0, 2),
     (A.reshape(3, 2, 2),)),
    ("movedim", lambda x: x.movedim((0, 1), (2, 0)), lambda a: np.moveaxis(a, (0, 1), (2, 0)),
     (A.reshape(3, 2, 2),)),
    ("swapdims", lambda x: x.swapdims(0, 1), lambda a: a.swapaxes(0, 1), (A,)),
    ("view_as", lambda x, y: x.view_as(y), lambda a, b: a.reshape(b.shape), (A, A.reshape(2, 6))),
    ("reshape_as", lambda x, y: x.reshape_as(y), lambda a, b: a.reshape(b.shape), (A, SQ[:3])),
    ("expand", lambda x: x.expand(2, -1, 4), lambda a: np.broadcast_to(a, (2, 3, 4)),
     (A[:, :1],)),
    ("sum_to_size", lambda x: x.sum_to_size(1, 4), lambda a: a.sum(0, keepdims=True), (A,)),
    ("type_as", lambda x, y: x.type_as(y), lambda a, b: a.astype(b.dtype), (A, I)),
    ("double", lambda x: x.double(), lambda a: a.astype(np.float64), (A,)),
    ("half", lambda x: x.half(), lambda a: a.astype(np.float16), (A,)),
    ("short", lambda x: x.short(), lambda a: a.astype(np.int16), (I,)),
    ("byte", lambda x: x.byte(), lambda a: a.astype(np.uint8), (np.abs(I),)),
    ("new_zeros", lambda x: x.new_zeros((2, 3)), lambda a: np.zeros((2, 3), a.dtype), (I,)),
    ("new_ones", lambda x: x.new_ones(2, dtype=ms.float16), lambda a: np.ones(2, np.float16),
     (I,)),
    ("new_full", lambda x: x.new_full((2,), 7), lambda a: np.full((2,), 7, a.dtype), (A,)),
    ("resize_grow", lambda x: x.resize(4, 4), lambda a: np.resize(np.append(a, [0] * 4), (4, 4)),
     (A,)),
    ("resize_cut", lambda x: x.resize((2, 2)), lambda a: a.ravel()[:4].reshape(2, 2), (A,)),
    ("argmax_with_value", lambda x: x.argmax_with_value(1), lambda a: (a.max(1), a.argmax(1)),
     (A,)),
    ("argmin_with_value", lambda x: x.argmin_with_value(0, True),
     lambda a: (a.min(0, keepdims=True), a.argmin(0)[None]), (A,)),
    ("gather_elements", lambda x, i: x.gather_elements(0, i),
     lambda a, i: np.take_along_axis(a, i, 0), (A, np.array([[2, 0, 1, 1]], np.int64))),
    ("soft_shrink", lambda x: x.soft_shrink(0.5),
     lambda a: np.where(a > 0.5, a - 0.5, np.where(a < -0.5, a + 0.5, 0)), (A,)),
    ("eq", lambda x: x.eq(x[0]), lambda a: a == a[0], (A,)),
    ("bitwise_not", lambda x: x.bitwise_not(), np.invert, (I,)),
    ("H", lambda x: x.H, np.transpose, (A,)),
    ("mH_adjoint", lambda x: x.mH + x.adjoint(), lambda a: 2 * a.swapaxes(-1, -2),
     (A.reshape(3, 2, 2),)),
    ("conj_real_imag", lambda x: x.conj() + x.real() + x.imag(), lambda a: 2 * a, (A,)),
    ("reverse", lambda x: x.reverse((1,)), lambda a: a[:, ::-1], (A,)),
    ("fliplr", lambda x: x.fliplr(), np.fliplr, (A,)),
    ("flipud", lambda x: x.flipud(), np.flipud, (A,)),
    ("fill_diagonal", lambda x: x.fill_diagonal(9.0, wrap=True), None,
     (np.zeros((7, 3), np.float32),)),
]


def _fill_diag_ref(a):
    out = a.copy()
    np.fill_diagonal(out, 9.0, wrap=True)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_method_against_numpy_in_both_modes(case):
    _, method, ref, inputs = case
    ref = ref or _fill_diag_ref
    got = assert_same_in_both_modes(method, *(_t(a) for a in inputs))
    want = ref(*inputs)
    got = [g.asnumpy() for g in got] if isinstance(got, (tuple, list)) else got.asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if not isinstance(got, list):
        assert got.dtype == np.asarray(want).dtype or got.dtype == np.float32


def test_chunk_and_split_take_dim_or_axis():
    x = _t(A)
    for parts in (x.chunk(2, 1), x.chunk(2, dim=1), x.chunk(2, axis=1)):
        assert [p.shape for p in parts] == [(3, 2), (3, 2)]
    assert [p.shape for p in x.split([1, 3], dim=1)] == [(3, 1), (3, 3)]
    assert [p.shape for p in x.split(2, axis=0)] == [(2, 4), (1, 4)]


def test_metadata_methods():
    x = _t(A)
    assert (x.numel(), x.nelement(), x.dim(), x.ndimension()) == (12, 12, 2, 2)
    assert x.stride() == (4, 1) and x.stride(-2) == 4 and x[1].storage_offset() == 4
    assert x.type() == "Float32" and x.type(ms.int32).dtype == ms.int32
    assert x.is_floating_point() and not _t(I).is_floating_point() and not x.is_complex()
    assert _t(I).is_signed() and not Tensor(np.ones(2, np.uint8)).is_signed()
    assert x.element_size() == 4 and x.data_ptr() == x[0].data_ptr()
    assert x.bfloat16().dtype == ms.bfloat16 and x.new_empty((2,)).shape == (2,)


def test_uniform_range_shape_and_dtype():
    x = Tensor(np.zeros((100,), np.float64))
    u = x.uniform(2.0, 3.0)
    assert u.shape == (100,) and u.dtype == ms.float64
    assert 2.0 <= u.asnumpy().min() and u.asnumpy().max() < 3.0


@pytest.mark.parametrize("bad", [
    lambda x: x.t() if x.ndim > 2 else x.reshape(2, 2, 3).t(),
    lambda x: x.repeat(2),
    lambda x: x.flip(2),
    lambda x: x.sum_to_size(2, 4),
    lambda x: x.moveaxis((0, 1), 1),
])
def test_bad_arguments_raise_value_error(bad):
    with pytest.raises(ValueError):
        bad(_t(A))


def test_graph_tensor_has_the_methods():
    from kiln.jit.graph_tensor import GraphTensor  # noqa: PLC0415

    for name in ("add_", "flip", "gather", "new_zeros", "stride", "fill_diagonal_", "mT"):
        assert hasattr(GraphTensor, name), name


def test_device_and_storage_methods():
    x = _t(A)
    assert (x.device, x.has_init, x.init_flag, x.virtual_flag) == ("CPU", False, False, False)
    assert x.value() is x and x.data is not x and x.data._shares_storage(x)
    moved = x.move_to("CPU")
    assert not moved._shares_storage(x)
    np.testing.assert_array_equal(moved.asnumpy(), A)
    with pytest.raises(ValueError, match="CPU"):
        x.move_to("Ascend")
    assert x.get_bytes() == A.tobytes() and x.data_sync(True) is None
    assert not x.is_pinned() and not x.is_shared()
    p = ms.Parameter(x, name="p")
    assert p.data is p  # a Parameter's data is itself, as in MindSpore
