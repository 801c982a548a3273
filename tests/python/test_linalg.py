"""matmul / bmm / mm / dense against NumPy: shapes, broadcasting, transposes, views, dtypes."""
import numpy as np
import pytest
from helpers import ALL_DTYPES, NUMERIC_DTYPES, assert_close, non_contiguous, to_kiln
from scipy import special as scipy_special

import kiln as ms
from kiln import ops
from kiln.ops._core import call

RNG = np.random.default_rng(0)

SHAPES = [
    ((3,), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3,)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)),
    ((5, 2, 3), (3,)),
    ((3,), (5, 3, 4)),
    ((5, 1, 2, 3), (1, 4, 3, 2)),
    ((2, 1, 2, 3), (3, 3, 2)),
    ((1, 1), (1, 1)),
    ((4, 0), (0, 3)),
    ((0, 3), (3, 2)),
    ((2, 3), (3, 0)),
]


def ints(shape, low=-3, high=3):
    """Small integer values: every dtype holds their products' sums exactly (K <= 8)."""
    return RNG.integers(low, high + 1, size=shape).astype(np.float64)


def reference(a, b, np_dtype):
    """NumPy's matmul in float64 (exact for small ints), cast like kiln stores the result."""
    return np.matmul(a, b).astype(np_dtype)


@pytest.mark.parametrize("shape_a,shape_b", SHAPES)
def test_matmul_shapes_float32(shape_a, shape_b):
    a, b = ints(shape_a), ints(shape_b)
    out = ops.matmul(to_kiln(a.astype(np.float32), ms.float32),
                     to_kiln(b.astype(np.float32), ms.float32))
    assert_close(out, reference(a, b, np.float32), ms.float32)


@pytest.mark.parametrize("dtype,np_dtype", NUMERIC_DTYPES, ids=lambda d: str(d))
@pytest.mark.parametrize("shape_a,shape_b", [((3,), (3,)), ((2, 3), (3, 4)), ((5, 2, 7), (1, 7, 4)),
                                             ((6, 8), (8,)), ((9, 5), (5, 300))])
def test_matmul_dtypes(dtype, np_dtype, shape_a, shape_b):
    low = 0 if np.issubdtype(np_dtype, np.unsignedinteger) else -3
    a, b = ints(shape_a, low), ints(shape_b, low)
    out = ops.matmul(to_kiln(a.astype(np_dtype), dtype), to_kiln(b.astype(np_dtype), dtype))
    assert_close(out, reference(a, b, np_dtype), dtype)


def test_matmul_bool_is_or_of_ands():
    a, b = RNG.random((4, 5)) > 0.5, RNG.random((5, 3)) > 0.5
    out = ops.matmul(ms.Tensor(a), ms.Tensor(b))
    assert out.dtype == ms.bool_
    np.testing.assert_array_equal(out.asnumpy(), np.matmul(a, b))


def test_matmul_integer_overflow_wraps_like_numpy():
    a = np.full((2, 8), 100, np.int8)
    b = np.full((8, 2), 3, np.int8)
    out = ops.matmul(ms.Tensor(a), ms.Tensor(b))
    np.testing.assert_array_equal(out.asnumpy(), np.matmul(a, b))


@pytest.mark.parametrize("dtype,np_dtype", [(ms.int32, np.int32), (ms.float32, np.float32),
                                            (ms.float64, np.float64)], ids=str)
def test_matmul_promotes_mixed_dtypes(dtype, np_dtype):
    a, b = ints((3, 4)), ints((4, 2))
    out = ops.matmul(to_kiln(a.astype(np.int16), ms.int16), to_kiln(b.astype(np_dtype), dtype))
    assert_close(out, reference(a, b, np_dtype), dtype)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("dtype,np_dtype", [(ms.float32, np.float32), (ms.float64, np.float64),
                                            (ms.bfloat16, np.float32), (ms.int64, np.int64)],
                         ids=str)
@pytest.mark.parametrize("shape_a,shape_b", [((3, 4, 5), (3, 5, 6)), ((40, 7), (7, 3)),
                                             ((2, 7), (7, 33)), ((1, 40, 7), (7, 33))])
def test_matmul_transpose_flags(ta, tb, dtype, np_dtype, shape_a, shape_b):
    # Row counts on both sides of the small-M (sgemm) / primitive split, batched and not.
    a, b = ints(shape_a), ints(shape_b)
    a_in = np.swapaxes(a, -1, -2) if ta else a
    b_in = np.swapaxes(b, -1, -2) if tb else b
    out = call("matmul", (to_kiln(np.ascontiguousarray(a_in).astype(np_dtype), dtype),
                          to_kiln(np.ascontiguousarray(b_in).astype(np_dtype), dtype)), (ta, tb))
    assert_close(out, reference(a, b, np_dtype), dtype)


@pytest.mark.parametrize("dtype,np_dtype", [(ms.float32, np.float32), (ms.float16, np.float16),
                                            (ms.int32, np.int32), (ms.float64, np.float64)],
                         ids=str)
@pytest.mark.parametrize("shape_a,shape_b", [((4, 6), (6, 8)), ((2, 3, 4), (2, 4, 6)),
                                             ((5,), (5, 4)), ((3, 7), (7,))])
def test_matmul_non_contiguous(dtype, np_dtype, shape_a, shape_b):
    a, b = ints(shape_a), ints(shape_b)
    ka = non_contiguous(a.astype(np_dtype), dtype)
    kb = non_contiguous(b.astype(np_dtype), dtype)
    assert_close(ops.matmul(ka, kb), reference(a, b, np_dtype), dtype)
    assert_close(ops.matmul(ka, to_kiln(b.astype(np_dtype), dtype)), reference(a, b, np_dtype),
                 dtype)


def test_matmul_transposed_views_use_strides():
    # A transposed view (column-major) and a strided batch: oneDNN takes both without a copy.
    a, b = ints((5, 6)), ints((4, 7, 6))
    ka = to_kiln(a.astype(np.float32), ms.float32)._as_strided([6, 5], [1, 6], 0)  # a.T
    kb = to_kiln(b.astype(np.float32), ms.float32)._as_strided([2, 7, 6], [84, 6, 1], 0)  # b[::2]
    assert not ka.is_contiguous() and not kb.is_contiguous()
    out = ops.matmul(kb, ka)
    assert_close(out, np.matmul(b[::2], a.T).astype(np.float32), ms.float32)


def test_matmul_large_float32_matches_numpy():
    # The seed network's first layer: exercises oneDNN's blocked, threaded kernel.
    a = RNG.standard_normal((64, 784)).astype(np.float32)
    w = RNG.standard_normal((512, 784)).astype(np.float32)
    out = ops.dense(ms.Tensor(a), ms.Tensor(w))
    expected = a.astype(np.float64) @ w.T.astype(np.float64)
    assert_close(out, expected.astype(np.float32), ms.float32, rtol=1e-4, atol=1e-3)


def test_matmul_large_float64_fallback_matches_numpy():
    a = RNG.standard_normal((3, 70, 130))
    b = RNG.standard_normal((130, 300))
    assert_close(ops.matmul(ms.Tensor(a), ms.Tensor(b)), a @ b, ms.float64, rtol=1e-12, atol=1e-12)


def test_matmul_operator():
    a, b = ints((2, 3)), ints((3, 2))
    ka, kb = ms.Tensor(a.astype(np.float32)), ms.Tensor(b.astype(np.float32))
    assert_close(ka @ kb, (a @ b).astype(np.float32), ms.float32)


@pytest.mark.parametrize("shape_a,shape_b", [((2, 3), (4, 5)), ((3,), (4,)), ((2, 3, 4), (3, 5, 6)),
                                             ((2, 2, 3), (3, 3, 2))])
def test_matmul_shape_errors_name_op_and_shapes(shape_a, shape_b):
    ka, kb = ms.Tensor(np.ones(shape_a, np.float32)), ms.Tensor(np.ones(shape_b, np.float32))
    with pytest.raises(ValueError, match="matmul") as info:
        ops.matmul(ka, kb)
    assert str(shape_a) in str(info.value) and str(shape_b) in str(info.value)


def test_matmul_rejects_scalars():
    with pytest.raises(ValueError, match="matmul"):
        ops.matmul(ms.Tensor(np.float32(2.0)), ms.Tensor(np.ones(3, np.float32)))


def test_bmm_and_mm():
    a, b = ints((4, 2, 3)), ints((4, 3, 5))
    assert_close(ops.bmm(ms.Tensor(a), ms.Tensor(b)), a @ b, ms.float64)
    assert_close(ops.mm(ms.Tensor(a[0]), ms.Tensor(b[0])), a[0] @ b[0], ms.float64)
    with pytest.raises(ValueError, match="bmm"):
        ops.bmm(ms.Tensor(a[0]), ms.Tensor(b[0]))
    with pytest.raises(ValueError, match="mm"):
        ops.mm(ms.Tensor(a), ms.Tensor(b))
    with pytest.raises(TypeError, match="bmm"):
        ops.bmm([[1.0]], ms.Tensor(b))


@pytest.mark.parametrize("dtype,np_dtype", [(ms.float32, np.float32), (ms.float64, np.float64),
                                            (ms.float16, np.float16)], ids=str)
def test_dense(dtype, np_dtype):
    x, w, bias = ints((8, 6)), ints((4, 6)), ints((4,))
    kx, kw, kb = (to_kiln(v.astype(np_dtype), dtype) for v in (x, w, bias))
    assert_close(ops.dense(kx, kw, kb), (x @ w.T + bias).astype(np_dtype), dtype)
    assert_close(ops.dense(kx, kw), (x @ w.T).astype(np_dtype), dtype)
    x3 = ints((2, 3, 6))
    assert_close(ops.dense(to_kiln(x3.astype(np_dtype), dtype), kw, kb),
                 (x3 @ w.T + bias).astype(np_dtype), dtype)


def test_dense_shape_error():
    with pytest.raises(ValueError, match="matmul"):
        ops.dense(ms.Tensor(np.ones((2, 3), np.float32)), ms.Tensor(np.ones((4, 5), np.float32)))


@pytest.mark.parametrize("dtype,np_dtype", ALL_DTYPES, ids=str)
def test_matmul_empty_contraction_gives_zeros(dtype, np_dtype):
    out = ops.matmul(to_kiln(np.zeros((2, 0), np_dtype), dtype),
                     to_kiln(np.zeros((0, 3), np_dtype), dtype))
    assert out.shape == (2, 3)
    assert not out.asnumpy().any()


GRAD_CASES = [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
              ((2, 3), (2, 3, 4)), ((2, 1, 2, 3), (3, 3, 2)), ((3,), (2, 3, 4)),
              ((2, 2, 2, 3), (3, 4))]


@pytest.mark.parametrize("shape_a,shape_b", GRAD_CASES, ids=str)
def test_matmul_gradient(shape_a, shape_b):
    from gradcheck import check_grad  # noqa: PLC0415

    check_grad(ops.matmul, RNG.uniform(-2, 2, shape_a), RNG.uniform(-2, 2, shape_b))


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_gradient_with_transpose_flags(ta, tb):
    from gradcheck import check_grad  # noqa: PLC0415

    a = RNG.uniform(-2, 2, (2, 4, 3) if ta else (2, 3, 4))
    b = RNG.uniform(-2, 2, (5, 4) if tb else (4, 5))
    check_grad(lambda x, y: call("matmul", (x, y), (ta, tb)), a, b)


def test_dense_gradient():
    from gradcheck import check_grad  # noqa: PLC0415

    check_grad(ops.dense, RNG.uniform(-2, 2, (4, 3)), RNG.uniform(-2, 2, (5, 3)),
               RNG.uniform(-2, 2, 5))
    # A sequence input: the weight gradient is one product over all rows.
    check_grad(ops.dense, RNG.uniform(-2, 2, (2, 4, 3)), RNG.uniform(-2, 2, (5, 3)),
               RNG.uniform(-2, 2, 5))


@pytest.mark.parametrize("shape_a,shape_b", [((40, 64), (40, 24)), ((2, 48, 32), (2, 48, 17)),
                                             ((300, 20), (300, 33))])
def test_matmul_with_a_transposed_left_operand(shape_a, shape_b):
    # A weight gradient's shape, dy^T @ x: on oneDNN's jit gemm the left operand is copied
    # row-major first (OnednnMatMul); the result must not depend on it.
    a = RNG.standard_normal(shape_a).astype(np.float32)
    b = RNG.standard_normal(shape_b).astype(np.float32)
    ka = ops.swapaxes(ms.Tensor(a), -1, -2)
    assert not ka.is_contiguous()
    out = ops.matmul(ka, ms.Tensor(b)).asnumpy()
    np.testing.assert_allclose(out, np.matmul(np.swapaxes(a, -1, -2), b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape_a,shape_b", [((300, 40), (40, 24)), ((2, 260, 16), (2, 16, 33)),
                                             ((1, 256, 64), (64, 8))])
def test_matmul_with_many_rows_and_an_aligned_right_operand(shape_a, shape_b):
    # kiln's buffers are 64-byte aligned; on oneDNN's AVX2 jit gemm such a row-major right
    # operand is copied off the boundary first (OnednnMatMul). Values must not change.
    a = RNG.standard_normal(shape_a).astype(np.float32)
    b = RNG.standard_normal(shape_b).astype(np.float32)
    kb = ms.Tensor(b)._clone()  # kiln-allocated, so aligned
    out = ops.matmul(ms.Tensor(a), kb).asnumpy()
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape_a,shape_b", [((64, 40), (40, 24)), ((37, 20), (20, 520)),
                                             ((255, 3), (3, 17)), ((3, 25, 16), (16, 600)),
                                             ((100, 1), (1, 70))])
@pytest.mark.parametrize("offset_a", [0, 1])
def test_matmul_with_tens_of_rows_packs_the_right_operand_per_call(shape_a, shape_b, offset_a):
    # 32-255 rows by a row-major right operand (a layer's input gradient): below AVX-512 the
    # right operand is packed into 16-column panels for the call (TryPanelMatMul), row tails
    # and column tails included; a left operand whose rows start anywhere is read as given.
    # Values must match NumPy in both modes.
    a = RNG.standard_normal(shape_a[:-1] + (shape_a[-1] + offset_a,)).astype(np.float32)
    b = RNG.standard_normal(shape_b).astype(np.float32)
    ka = ms.Tensor(a)[..., offset_a:]  # a view with a row stride past its width
    kb = ms.Tensor(b)._clone()
    want = np.matmul(a[..., offset_a:], b)
    np.testing.assert_allclose(ops.matmul(ka, kb).asnumpy(), want, rtol=1e-4, atol=1e-4)
    graph = ms.jit(lambda x, y: ops.matmul(x, y))(ms.Tensor(a[..., offset_a:].copy()), kb)
    np.testing.assert_allclose(graph.asnumpy(), want, rtol=1e-4, atol=1e-4)


def check_dense_with_a_weight_given_each_call(act, rows):
    fn = {"none": lambda y: y, "relu": ops.relu, "gelu": ops.gelu}[act]
    f = ms.jit(lambda x, w, b: fn(ops.dense(x, w, b)) + x)
    x = RNG.standard_normal((rows, 40)).astype(np.float32)
    b = RNG.standard_normal(40).astype(np.float32)
    for _ in range(2):
        w = RNG.standard_normal((40, 40)).astype(np.float32)
        z = x.astype(np.float64) @ w.T.astype(np.float64) + b
        ref = {"none": z, "relu": np.maximum(z, 0),
               "gelu": 0.5 * z * (1 + scipy_special.erf(z / np.sqrt(2)))}[act] + x
        out = f(ms.Tensor(x), ms.Tensor(w), ms.Tensor(b)).asnumpy()
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert "fused_matmul" in f.graph_text()


@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
@pytest.mark.parametrize("rows", [256, 301])
def test_dense_with_hundreds_of_rows_and_a_weight_given_each_call(act, rows):
    # A training step's forward: the weight is new on every call, so it is not cached; below
    # AVX-512 it is packed for the call (TryPanelsPerCall), the epilogue applied after.
    check_dense_with_a_weight_given_each_call(act, rows)


@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
@pytest.mark.parametrize("rows", [32, 64, 255])
def test_dense_with_tens_of_rows_and_a_weight_given_each_call_on_a_busy_machine(act, rows):
    # Contended, the per-call panels start at 32 rows (oneDNN would run on one thread there);
    # quiet, these products stay on oneDNN. Both must give the same values.
    try:
        for state in (1, 0):
            ms._C.set_contention_override(state)
            check_dense_with_a_weight_given_each_call(act, rows)
    finally:
        ms._C.set_contention_override(-1)


@pytest.mark.parametrize("rows", [40, 300])
def test_fused_product_with_a_transposed_left_operand(rows):
    # A weight gradient plus a term, dy^T @ x + g (fused into one product with its epilogue):
    # the left operand is column-major, which the panel paths must not read as row-major.
    def f(dy, x, g):
        return ops.matmul(ops.transpose(dy, (1, 0)), x) + g

    dy = RNG.standard_normal((6, rows)).astype(np.float32)
    x = RNG.standard_normal((6, 70)).astype(np.float32)
    g = RNG.standard_normal(70).astype(np.float32)
    jf = ms.jit(f)
    for _ in range(3):  # the third call may read a cached packed copy of x
        out = jf(ms.Tensor(dy), ms.Tensor(x)._clone(), ms.Tensor(g)).asnumpy()
        np.testing.assert_allclose(out, dy.T @ x + g, rtol=1e-4, atol=1e-4)
    assert "fused_matmul" in jf.graph_text()
