"""svd, qr, triangular_solve and what is composed of them (pinv, lstsq, cond, matrix norms, the
mint.linalg forms) against NumPy/SciPy: values, batching, dtypes, errors, gradients by finite
differences, and Graph mode."""
import numpy as np
import pytest
import scipy.linalg
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor, mint, ops

RNG = np.random.default_rng(11)
SHAPES = [(3, 3), (4, 2), (2, 5), (2, 4, 3), (3, 1, 3, 2), (1, 1)]
FLOATS = [(ms.float32, np.float32, 1e-5), (ms.float64, np.float64, 1e-12)]


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype,np_dtype,tol", FLOATS, ids=["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("full", [False, True])
def test_svd_matches_numpy(dtype, np_dtype, tol, shape, full):
    a = rand(*shape, dtype=np_dtype)
    s, u, v = ops.svd(Tensor(a), full_matrices=full)
    nu, ns, nvh = np.linalg.svd(a.astype(np.float64), full_matrices=full)
    assert s.dtype == dtype and u.shape == nu.shape and v.shape == np.swapaxes(nvh, -1, -2).shape
    np.testing.assert_allclose(s.asnumpy(), ns, rtol=10 * tol, atol=10 * tol)
    k = min(shape[-2:])
    un, vn = u.asnumpy()[..., :k], v.asnumpy()[..., :k]
    np.testing.assert_allclose((un * s.asnumpy()[..., None, :]) @ np.swapaxes(vn, -1, -2), a,
                               rtol=100 * tol, atol=100 * tol)
    for q in (u.asnumpy(), v.asnumpy()):  # orthonormal columns
        eye = np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2)
        np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, eye, atol=100 * tol)
    # singular vectors agree with NumPy's up to sign
    np.testing.assert_allclose(np.abs(un), np.abs(nu[..., :k]), atol=1e3 * tol)
    only_s = ops.svd(Tensor(a), compute_uv=False)
    np.testing.assert_allclose(only_s.asnumpy(), ns, rtol=10 * tol, atol=10 * tol)


def test_svd_tensor_method_empty_and_errors():
    a = rand(3, 2)
    np.testing.assert_allclose(Tensor(a).svd()[0].asnumpy(), np.linalg.svd(a)[1])
    s, u, v = ops.svd(Tensor(np.zeros((0, 3))), full_matrices=True)
    assert s.shape == (0,) and u.shape == (0, 0) and v.shape == (3, 3)
    np.testing.assert_array_equal(v.asnumpy(), np.eye(3))
    with pytest.raises(TypeError, match="float32, float64"):
        ops.svd(Tensor(np.ones((2, 2), np.int32)))
    with pytest.raises(ValueError, match="rank >= 2"):
        ops.svd(Tensor(np.ones(3, np.float32)))
    s = ops.svd(Tensor(np.array([[np.nan, 1.0], [0.0, 1.0]])), compute_uv=False)
    assert np.isnan(s.asnumpy()).all()


@pytest.mark.parametrize("dtype,np_dtype,tol", FLOATS, ids=["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_matches_numpy(dtype, np_dtype, tol, shape, mode):
    a = rand(*shape, dtype=np_dtype)
    q, r = ops.qr(Tensor(a), mode)
    nq, nr = np.linalg.qr(a.astype(np.float64), mode)
    assert q.dtype == dtype and q.shape == nq.shape and r.shape == nr.shape
    np.testing.assert_allclose(q.asnumpy(), nq, rtol=100 * tol, atol=100 * tol)
    np.testing.assert_allclose(r.asnumpy(), nr, rtol=100 * tol, atol=100 * tol)


def test_qr_forms_and_errors():
    a = rand(4, 3)
    q, r = Tensor(a).qr(some=False)
    assert q.shape == (4, 4) and r.shape == (4, 3)
    q2, r2 = mint.linalg.qr(Tensor(a))
    np.testing.assert_allclose(q2.asnumpy(), np.linalg.qr(a)[0])
    empty_q, r3 = mint.linalg.qr(Tensor(a), "r")
    assert empty_q.shape == (0,) and np.allclose(r3.asnumpy(), r2.asnumpy())
    with pytest.raises(TypeError, match="'reduced' or 'complete'"):
        ops.qr(Tensor(a), "r")
    with pytest.raises(ValueError, match="rank >= 2"):
        ops.qr(Tensor(np.ones(3)))


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_triangular_solve_matches_scipy(upper, transpose, unit):
    a = rand(3, 4, 4) + 4 * np.eye(4)
    b = rand(2, 1, 4, 2)
    x, a_out = mint.triangular_solve(Tensor(b), Tensor(a), upper, transpose, unit)
    assert x.shape == (2, 3, 4, 2) and a_out.shape == a.shape
    for i in range(2):
        for j in range(3):
            want = scipy.linalg.solve_triangular(a[j], b[i, 0], lower=not upper,
                                                 trans=1 if transpose else 0, unit_diagonal=unit)
            np.testing.assert_allclose(x.asnumpy()[i, j], want, rtol=1e-10)
    x2, _ = Tensor(b[0, 0]).triangular_solve(Tensor(a[0]), upper, transpose, unit)
    np.testing.assert_allclose(x2.asnumpy(), x.asnumpy()[0, 0], rtol=1e-12)


def test_pinv_lstsq_cond_match_numpy():
    for shape in [(3, 3), (5, 3), (2, 4, 3), (3, 5)]:
        a = rand(*shape)
        np.testing.assert_allclose(ops.pinv(Tensor(a)).asnumpy(), np.linalg.pinv(a), rtol=1e-9,
                                   atol=1e-12)
    low_rank = np.outer([1.0, 2.0, 3.0], [1.0, -1.0])
    np.testing.assert_allclose(ops.pinv(Tensor(low_rank)).asnumpy(), np.linalg.pinv(low_rank),
                               atol=1e-12)
    # atol drops the one singular value below it: everything
    assert np.allclose(ops.pinv(Tensor(low_rank), atol=100.0).asnumpy(), 0)
    np.testing.assert_allclose(ops.pinv(Tensor(low_rank), rtol=Tensor(0.5)).asnumpy(),
                               np.linalg.pinv(low_rank, rcond=0.5), atol=1e-12)
    a, b = rand(6, 3), rand(6, 2)
    np.testing.assert_allclose(ops.lstsq(Tensor(a), Tensor(b)).asnumpy(),
                               np.linalg.lstsq(a, b, rcond=None)[0], rtol=1e-9)
    x32 = ops.lstsq(Tensor(a.astype(np.float32)), Tensor(b.astype(np.float32)))
    assert x32.dtype == ms.float32 and x32.shape == (3, 2)
    np.testing.assert_allclose(Tensor(a).lstsq(Tensor(b[:, 0])).asnumpy(),
                               np.linalg.lstsq(a, b[:, 0], rcond=None)[0], rtol=1e-9)
    sq = rand(2, 3, 3)
    for p in (None, 2, -2, 1, -1, np.inf, -np.inf, "fro", "nuc"):
        np.testing.assert_allclose(ops.cond(Tensor(sq), p).asnumpy(), np.linalg.cond(sq, p),
                                   rtol=1e-8)
    with pytest.raises(TypeError, match="float32, float64"):
        ops.pinv(Tensor(np.ones((2, 2), np.int64)))
    with pytest.raises(ValueError, match="rows"):
        ops.lstsq(Tensor(a), Tensor(rand(5, 2)))


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
def test_matrix_norms_match_numpy(ord):
    a = rand(2, 3, 4)
    want = np.linalg.norm(a, ord, axis=(-2, -1))
    np.testing.assert_allclose(ops.matrix_norm(Tensor(a), ord).asnumpy(), want, rtol=1e-10)
    np.testing.assert_allclose(mint.linalg.matrix_norm(Tensor(a), ord).asnumpy(), want,
                               rtol=1e-10)
    want_dims = np.linalg.norm(a, ord, axis=(2, 0), keepdims=True)
    got = mint.linalg.norm(Tensor(a), ord, (2, 0), True)
    assert got.shape == want_dims.shape
    np.testing.assert_allclose(got.asnumpy(), want_dims, rtol=1e-10)
    np.testing.assert_allclose(ops.norm(Tensor(a[0]), ord).asnumpy(), np.linalg.norm(a[0], ord),
                               rtol=1e-10)


def test_mint_linalg_inv_and_vector_norm():
    a = rand(2, 3, 3) + 3 * np.eye(3)
    np.testing.assert_allclose(mint.linalg.inv(Tensor(a)).asnumpy(), np.linalg.inv(a), rtol=1e-9)
    v = rand(3, 4)
    np.testing.assert_allclose(mint.linalg.vector_norm(Tensor(v), 3, -1).asnumpy(),
                               np.linalg.norm(v, 3, axis=-1), rtol=1e-10)
    np.testing.assert_allclose(mint.linalg.norm(Tensor(v)).asnumpy(), np.linalg.norm(v))


def test_complex_results_are_excluded_with_a_clear_error():
    for name in ("eig", "eigvals", "fft", "rfft"):
        with pytest.raises(AttributeError, match="complex"):
            getattr(ops, name)


# ---- gradients (float64, central differences)
@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4), (2, 3, 3)])
def test_svd_gradients(shape):
    a = rand(*shape)
    check_grad(lambda t: ops.svd(t)[0], a, rtol=1e-5, atol=1e-7)
    # sign-invariant functions of u and v: squares, and the weighted rank-one terms
    check_grad(lambda t: ops.svd(t)[1] ** 2, a, rtol=1e-5, atol=1e-7)
    check_grad(lambda t: ops.svd(t)[2] ** 2, a, rtol=1e-5, atol=1e-7)
    k = min(shape[-2:])
    weights = Tensor(np.arange(1.0, k + 1))

    def weighted_outer(t):
        _, u, v = ops.svd(t)
        return ops.matmul(u * weights, v.swapaxes(-1, -2))

    check_grad(weighted_outer, a, rtol=1e-5, atol=1e-7)
    check_grad(lambda t: ops.svd(t, full_matrices=True)[0], a, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("shape,mode", [((3, 3), "reduced"), ((4, 2), "reduced"),
                                        ((2, 4), "reduced"), ((2, 3, 3), "complete"),
                                        ((2, 4), "complete")])
def test_qr_gradients(shape, mode):
    a = rand(*shape)
    check_grad(lambda t: ops.qr(t, mode)[0], a, rtol=1e-5, atol=1e-7)
    check_grad(lambda t: ops.qr(t, mode)[1], a, rtol=1e-5, atol=1e-7)


def test_qr_complete_tall_refuses_the_undefined_q_gradient():
    a = Tensor(rand(4, 2))
    check_grad(lambda t: ops.qr(t, "complete")[1], a.asnumpy())
    with pytest.raises(ValueError, match="orthonormal completion"):
        ms.grad(lambda t: ops.qr(t, "complete")[0].sum())(a)


@pytest.mark.parametrize("upper,transpose,unit", [(True, False, False), (False, True, False),
                                                  (True, True, True), (False, False, True)])
def test_triangular_solve_gradients(upper, transpose, unit):
    a, b = rand(2, 3, 3) + 3 * np.eye(3), rand(2, 3, 2)
    check_grad(lambda bb, aa: mint.triangular_solve(bb, aa, upper, transpose, unit)[0], b, a)


def test_pinv_lstsq_gradients():
    check_grad(ops.pinv, rand(4, 3))
    check_grad(ops.pinv, rand(2, 2, 3))
    check_grad(ops.lstsq, rand(5, 3), rand(5, 2))
    check_grad(lambda t: ops.matrix_norm(t, "nuc"), rand(3, 4))


# ---- Graph mode
def test_decompositions_in_graph_mode():
    a = Tensor(rand(2, 4, 3).astype(np.float32))
    assert_same_in_both_modes(lambda t: ops.svd(t), a)
    assert_same_in_both_modes(lambda t: ops.svd(t, compute_uv=False), a)
    assert_same_in_both_modes(lambda t: ops.qr(t, "complete"), a)
    assert_same_in_both_modes(lambda t: ops.pinv(t), a)
    assert_same_in_both_modes(lambda t: ops.matrix_norm(t, 2), a)
    b = Tensor(rand(2, 3, 2).astype(np.float32))
    tri = Tensor((np.triu(rand(2, 3, 3)) + 3 * np.eye(3)).astype(np.float32))
    assert_same_in_both_modes(lambda x, y: mint.triangular_solve(x, y)[0], b, tri)


def test_decomposition_gradients_in_graph_mode():
    a = Tensor(rand(2, 4, 3))
    w = Tensor(rand(2, 4, 3))

    def loss(t):
        s, u, v = ops.svd(t)
        q, r = ops.qr(t)
        return (s.sum() + (u * u * w).sum() + (q * w).sum() + r.sum()
                + (ops.pinv(t) ** 2).sum())

    eager = ms.grad(loss)(a)
    graph = ms.jit(lambda t: ms.grad(loss)(t))(a)
    np.testing.assert_allclose(graph.asnumpy(), eager.asnumpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype,np_dtype,tol", FLOATS, ids=["float32", "float64"])
def test_geqrf_orgqr_ormqr_match_lapack(dtype, np_dtype, tol):
    a = rand(2, 4, 3, dtype=np_dtype)
    y, tau = ops.geqrf(Tensor(a))
    assert y.shape == (2, 4, 3) and tau.shape == (2, 3) and y.dtype == dtype
    (raw, raw_tau), _ = scipy.linalg.qr(a[0].astype(np.float64), mode="raw")
    np.testing.assert_allclose(y.asnumpy()[0], raw, rtol=100 * tol, atol=100 * tol)
    np.testing.assert_allclose(tau.asnumpy()[0], raw_tau, rtol=100 * tol, atol=100 * tol)
    q = ops.orgqr(y, tau)
    np.testing.assert_allclose(q.asnumpy(), np.linalg.qr(a)[0], rtol=100 * tol, atol=100 * tol)
    np.testing.assert_allclose(Tensor(a).geqrf()[1].asnumpy(), tau.asnumpy())
    full = np.linalg.qr(a.astype(np.float64), "complete")[0]
    c = rand(2, 4, 5, dtype=np_dtype)
    for left, trans in [(True, False), (True, True)]:
        got = ops.ormqr(y, tau, Tensor(c), left, trans)
        want = (np.swapaxes(full, -1, -2) if trans else full) @ c
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e3 * tol, atol=1e3 * tol)
    d = rand(2, 5, 4, dtype=np_dtype)
    got = ops.Ormqr(left=False, transpose=True)(y, tau, Tensor(d))
    np.testing.assert_allclose(got.asnumpy(), d @ np.swapaxes(full, -1, -2), rtol=1e3 * tol,
                               atol=1e3 * tol)
    with pytest.raises(ValueError, match="m >= n >= k"):
        ops.orgqr(Tensor(rand(3, 4)), Tensor(rand(3)))
    assert_same_in_both_modes(lambda t: ops.orgqr(*ops.geqrf(t)), Tensor(a))


def _lu(a):
    lu, piv = scipy.linalg.lu_factor(a)
    # C order (the finite differences perturb a flat view); 1-based pivots, as LAPACK's
    return np.ascontiguousarray(lu), (piv + 1).astype(np.int32)


@pytest.mark.parametrize("dtype,np_dtype,tol", FLOATS, ids=["float32", "float64"])
def test_lu_unpack_and_lu_solve_match_scipy(dtype, np_dtype, tol):
    a = [rand(4, 4) for _ in range(2)]
    lus = [_lu(x) for x in a]
    lu = Tensor(np.stack([x[0] for x in lus]).astype(np_dtype))
    piv = Tensor(np.stack([x[1] for x in lus]))
    p, low, up = ops.lu_unpack(lu, piv)
    for i in range(2):
        sp_p, sp_l, sp_u = scipy.linalg.lu(a[i])
        np.testing.assert_allclose(p.asnumpy()[i], sp_p, atol=tol)
        np.testing.assert_allclose(low.asnumpy()[i], sp_l, rtol=100 * tol, atol=100 * tol)
        np.testing.assert_allclose(up.asnumpy()[i], sp_u, rtol=100 * tol, atol=100 * tol)
    assert ops.lu_unpack(lu, piv, unpack_data=False)[1] is None
    assert ops.lu_unpack(lu, piv, unpack_pivots=False)[0] is None
    b = rand(3, 1, 4, 2, dtype=np_dtype)
    y = ops.lu_solve(Tensor(b), lu, piv)
    assert y.shape == (3, 2, 4, 2) and y.dtype == dtype
    np.testing.assert_allclose(y.asnumpy(), np.linalg.solve(np.stack(a), b), rtol=1e3 * tol,
                               atol=1e3 * tol)
    np.testing.assert_allclose(Tensor(b[0, 0]).lu_solve(lu[0], piv[0]).asnumpy(),
                               y.asnumpy()[0, 0], rtol=tol)
    with pytest.raises(ValueError, match="min"):
        ops.lu_unpack(lu, piv[:, :2])
    with pytest.raises(TypeError, match="integer"):
        ops.lu_unpack(lu, Tensor(np.ones((2, 4))))


def test_lu_solve_gradients_and_graph_mode():
    a = rand(3, 3) + 3 * np.eye(3)
    lu, piv = _lu(a)
    pt = Tensor(piv)
    check_grad(lambda bb, ll: ops.lu_solve(bb, ll, pt), rand(3, 2), lu)
    check_grad(lambda ll: ops.lu_unpack(ll, pt)[1] + ops.lu_unpack(ll, pt)[2], lu)
    assert_same_in_both_modes(lambda bb, ll: ops.lu_solve(bb, ll, pt), Tensor(rand(3, 2)),
                              Tensor(lu))
    assert_same_in_both_modes(lambda ll, pp: ops.lu_unpack(ll, pp), Tensor(lu), pt)
