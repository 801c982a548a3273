"""Bessel functions, polygamma, zeta and the incomplete gamma functions against SciPy: values
(with MindSpore 2.10's parity and domain rules), dtypes, broadcasting, errors, gradients by
finite differences, and Graph mode."""
import numpy as np
import pytest
import scipy.special as sp
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor, ops

BESSEL = "i0 i0e i1 i1e j0 j1 k0 k0e k1 k1e y0 y1".split()
POSITIVE = np.array([0.01, 0.3, 1.0, 2.5, 7.0, 20.0, 80.0, 499.0, 501.0, 700.0, 1e4])
EVEN, ODD = {"i0", "i0e", "j0"}, {"i1", "i1e", "j1"}


@pytest.mark.parametrize("name", BESSEL)
def test_bessel_matches_scipy(name):
    fn, ref = getattr(ops, "bessel_" + name), getattr(sp, name)
    got = fn(Tensor(POSITIVE)).asnumpy()
    np.testing.assert_allclose(got, ref(POSITIVE), rtol=1e-9, atol=1e-300)
    neg = np.array([-3.0, -0.5, 0.0])
    got_neg = fn(Tensor(neg)).asnumpy()
    if name in EVEN | ODD:  # defined on the whole line: even / odd
        np.testing.assert_allclose(got_neg, ref(neg), rtol=1e-12, atol=1e-15)
    elif name.startswith("k"):  # MindSpore 2.10: +inf at x <= 0
        assert np.all(got_neg == np.inf)
    else:  # y: -inf at x <= 0
        assert np.all(got_neg == -np.inf)
    assert np.isnan(fn(Tensor(np.array([np.nan]))).asnumpy()).all()


@pytest.mark.parametrize("name", BESSEL)
@pytest.mark.parametrize("dtype,np_dtype,rtol", [(ms.float16, np.float16, 2e-3),
                                                  (ms.float32, np.float32, 1e-5)])
def test_bessel_dtypes_and_errors(name, dtype, np_dtype, rtol):
    fn = getattr(ops, "bessel_" + name)
    x = np.array([[0.4, 1.3], [2.2, 3.1]], np_dtype)
    out = fn(Tensor(x, dtype))
    assert out.dtype == dtype and out.shape == (2, 2)
    np.testing.assert_allclose(out.asnumpy().astype(np.float64),
                               getattr(sp, name)(x.astype(np.float64)), rtol=rtol)
    with pytest.raises(TypeError, match="bessel_" + name):
        fn(Tensor(np.array([1, 2], np.int32)))


def test_i0_alias_and_tensor_method():
    x = np.array([-1.5, 0.0, 2.0])
    np.testing.assert_allclose(ops.i0(Tensor(x)).asnumpy(), sp.i0(x), rtol=1e-12)
    np.testing.assert_allclose(Tensor(x).i0().asnumpy(), sp.i0(x), rtol=1e-12)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_polygamma_matches_scipy(n):
    x = np.array([-2.5, -0.5, 0.1, 1.0, 3.3, 50.0])
    got = ops.polygamma(Tensor(np.array(n)), Tensor(x)).asnumpy()
    np.testing.assert_allclose(got, sp.polygamma(n, x), rtol=1e-9)
    out32 = ops.polygamma(Tensor(np.array(n, np.int32)), Tensor(x.astype(np.float32)))
    assert out32.dtype == ms.float32


def test_polygamma_poles_and_errors():
    # MindSpore 2.10: digamma's pole at 0 is -inf; polygamma(n >= 1) at a pole: (-1)^(n+1) inf
    x = Tensor(np.array([0.0, -2.0]))
    assert ops.polygamma(Tensor(np.array(0)), x).asnumpy()[0] == -np.inf
    np.testing.assert_array_equal(ops.polygamma(Tensor(np.array(1)), x).asnumpy(), [np.inf] * 2)
    np.testing.assert_array_equal(ops.polygamma(Tensor(np.array(2)), x).asnumpy(), [-np.inf] * 2)
    with pytest.raises(ValueError, match="0-dim"):
        ops.polygamma(Tensor(np.array([1, 2])), x)
    with pytest.raises(TypeError, match="must be a Tensor"):
        ops.polygamma(2, x)
    with pytest.raises(TypeError, match="integer"):
        ops.polygamma(Tensor(np.array(1.0)), x)


def test_zeta_matches_scipy_and_broadcasts():
    x = np.array([[1.5], [2.0], [3.3], [10.0]])
    q = np.array([0.5, 1.0, 2.2, 7.0])
    np.testing.assert_allclose(ops.zeta(Tensor(x), Tensor(q)).asnumpy(), sp.zeta(x, q),
                               rtol=1e-12)
    special = ops.zeta(Tensor(np.array([1.0, 0.5, 2.0, 2.0])),
                       Tensor(np.array([1.0, 1.0, 0.0, -1.5]))).asnumpy()
    assert special[0] == np.inf and np.isnan(special[1]) and special[2] == np.inf
    np.testing.assert_allclose(special[3], 9.379246, rtol=1e-6)  # MindSpore 2.10's value
    # a very negative q would need ~|q| terms: NaN at once instead of a long loop
    far = ops.zeta(Tensor(np.array([2.0])), Tensor(np.array([-1e9 + 0.5]))).asnumpy()
    assert np.isnan(far).all()
    with pytest.raises(TypeError, match="same dtype"):
        ops.zeta(Tensor(np.array([2.0], np.float32)), Tensor(np.array([1.0])))


def test_igamma_igammac_match_scipy():
    a = np.array([0.1, 0.5, 1.0, 3.0, 10.0, 100.0, 1000.0, 50.0])
    x = np.array([[0.2, 3.0, 0.5, 3.0, 12.0, 90.0, 1010.0, 500.0], [0.0] * 8])
    np.testing.assert_allclose(ops.igamma(Tensor(a), Tensor(x)).asnumpy(), sp.gammainc(a, x),
                               rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(ops.igammac(Tensor(a), Tensor(x)).asnumpy(), sp.gammaincc(a, x),
                               rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(Tensor(a).igamma(Tensor(x)).asnumpy(), sp.gammainc(a, x),
                               rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(Tensor(a).igammac(Tensor(x)).asnumpy(), sp.gammaincc(a, x),
                               rtol=1e-10, atol=1e-14)
    bad = ops.igamma(Tensor(np.array([-1.0, 1.0])), Tensor(np.array([1.0, -1.0]))).asnumpy()
    assert np.isnan(bad).all()
    with pytest.raises(TypeError, match="float"):
        ops.igamma(Tensor(np.array([1])), Tensor(np.array([1])))


# ---- gradients (float64, central differences)
@pytest.mark.parametrize("name", BESSEL)
def test_bessel_gradients(name):
    x = np.array([0.4, 1.3, 2.7, 6.0]) if name[0] in "ky" else np.array([-2.1, -0.4, 0.7, 3.2])
    check_grad(getattr(ops, "bessel_" + name), x, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["i1", "i1e", "j1"])
def test_odd_bessel_gradient_at_zero_is_one_half(name):
    g = ms.grad(getattr(ops, "bessel_" + name))(Tensor(np.array([0.0])))
    np.testing.assert_allclose(g.asnumpy(), [0.5])


@pytest.mark.parametrize("n", [0, 1, 3])
def test_polygamma_and_digamma_gradients(n):
    x = np.array([0.3, 1.7, 4.5])
    check_grad(lambda t: ops.polygamma(Tensor(np.array(n)), t), x, rtol=1e-6)
    check_grad(ops.digamma, x, rtol=1e-6)


def test_zeta_gradient():
    x, q = Tensor(np.array([2.0, 3.5])), np.array([1.5, 0.7])
    check_grad(lambda t: ops.zeta(x, t), q, rtol=1e-6)
    gx = ms.grad(lambda u, v: ops.zeta(u, v).sum())(x, Tensor(q))  # none in x (MindSpore: 0)
    np.testing.assert_array_equal(gx.asnumpy(), [0.0, 0.0])


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_incomplete_gamma_gradients(name):
    a = np.array([0.7, 2.0, 5.0, 30.0])
    x = np.array([0.4, 2.5, 3.0, 35.0])
    check_grad(getattr(ops, name), a, x, rtol=1e-5, atol=1e-9)


# ---- Graph mode
def test_special_functions_in_graph_mode():
    x = Tensor(np.array([0.4, 1.3, 2.7], np.float32))
    n = Tensor(np.array(2))
    assert_same_in_both_modes(lambda t: ops.bessel_k1e(t) + ops.bessel_j0(t), x)
    assert_same_in_both_modes(lambda t: ops.polygamma(n, t) + ops.zeta(t + 1.5, t), x)
    assert_same_in_both_modes(lambda t: ops.igamma(t, t * 2) - ops.igammac(t, t), x)

    def loss(t):
        return (ops.bessel_i1(t) * ops.bessel_y0(t) + ops.polygamma(n, t) + ops.igamma(t, t)
                + ops.zeta(t + 1.5, t)).sum()

    eager = ms.grad(loss)(x)
    graph = ms.jit(lambda t: ms.grad(loss)(t))(x)
    np.testing.assert_allclose(graph.asnumpy(), eager.asnumpy(), rtol=1e-5)
