"""Elementwise math ops added for API breadth (math_ext.py): values against NumPy/SciPy in
PyNative and compiled, dtypes, broadcasting, finite-difference gradients, bad input."""
import math

import numpy as np
import pytest
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes
from scipy import special

import kiln as ms
from kiln import Tensor, ops

F32 = np.float32
X = np.array([[-0.9, -0.3, 0.0], [0.2, 0.55, 0.8]], F32)  # inside (-1, 1)
P = np.array([[0.3, 1.2, 2.5], [3.0, 4.5, 7.0]], F32)  # positive
W = np.array([[-2.5, -1.0, -0.0], [0.0, 1.5, 3.25]], F32)  # wide, signed zeros



def both_modes(fn, *args):
    """fn(*args) eagerly and inside a compiled function (checked equal); the compiled result."""
    def run(*a):
        return fn(*a)

    return assert_same_in_both_modes(run, *args)


UNARY = [
    ("tan", ops.tan, np.tan, X), ("asin", ops.asin, np.arcsin, X),
    ("arcsin", ops.arcsin, np.arcsin, X), ("acos", ops.acos, np.arccos, X),
    ("arccos", ops.arccos, np.arccos, X), ("atan", ops.atan, np.arctan, W),
    ("arctan", ops.arctan, np.arctan, W), ("sinh", ops.sinh, np.sinh, W),
    ("cosh", ops.cosh, np.cosh, W), ("asinh", ops.asinh, np.arcsinh, W),
    ("arcsinh", ops.arcsinh, np.arcsinh, W), ("acosh", ops.acosh, np.arccosh, P + 1),
    ("arccosh", ops.arccosh, np.arccosh, P + 1), ("atanh", ops.atanh, np.arctanh, X),
    ("arctanh", ops.arctanh, np.arctanh, X), ("erf", ops.erf, special.erf, W),
    ("erfc", ops.erfc, special.erfc, W), ("erfinv", ops.erfinv, special.erfinv, X),
    ("lgamma", ops.lgamma, special.gammaln, P), ("digamma", ops.digamma, special.digamma, W + 0.1),
    ("expm1", ops.expm1, np.expm1, W), ("log1p", ops.log1p, np.log1p, P),
    ("ceil", ops.ceil, np.ceil, W), ("trunc", ops.trunc, np.trunc, W),
    ("log2", ops.log2, np.log2, P), ("log10", ops.log10, np.log10, P),
    ("exp2", ops.exp2, np.exp2, W), ("deg2rad", ops.deg2rad, np.deg2rad, W * 60),
    ("rad2deg", ops.rad2deg, np.rad2deg, W), ("reciprocal", ops.reciprocal, np.reciprocal, P),
    ("inv", ops.inv, np.reciprocal, P), ("sinc", ops.sinc, np.sinc, W),
    ("frac", ops.frac, lambda a: a - np.trunc(a), W),
    ("logit", ops.logit, special.logit, (X + 1) / 2.5 + 0.05),
    ("positive", ops.positive, np.positive, W), ("sgn", ops.sgn, np.sign, W),
    ("signbit", ops.signbit, np.signbit, W), ("isfinite", ops.isfinite, np.isfinite, W),
    ("isreal", ops.isreal, np.isreal, W),
    ("mvlgamma", lambda x: ops.mvlgamma(x, 3), lambda a: special.multigammaln(a, 3)
     if a.ndim == 0 else np.vectorize(lambda v: special.multigammaln(v, 3))(a), P + 1.5),
]

BINARY = [
    ("atan2", ops.atan2, np.arctan2, W, W[::-1] * 0.5),
    ("arctan2", ops.arctan2, np.arctan2, W, np.float32(-1.0) * np.ones((1, 3), F32)),
    ("hypot", ops.hypot, np.hypot, W, P[:1]),
    ("logaddexp", ops.logaddexp, np.logaddexp, W, P),
    ("logaddexp2", ops.logaddexp2, np.logaddexp2, W, P[:1]),
    ("copysign", ops.copysign, lambda a, b: np.copysign(a, np.where(b == 0, 1, b)), P, W),
    ("fmax", ops.fmax, np.fmax, W, X), ("fmin", ops.fmin, np.fmin, W, X),
    ("xlogy", ops.xlogy, special.xlogy, W, P), ("xdivy", ops.xdivy,
                                                lambda a, b: np.where(a == 0, 0, a / b), W, P),
    ("floor_div", ops.floor_div, np.floor_divide, W, P), ("floor_mod", ops.floor_mod,
                                                            np.mod, W, P),
    ("truncate_div", ops.truncate_div, lambda a, b: np.trunc(a / b), W, P),
    ("truncate_mod", ops.truncate_mod, np.fmod, W, P), ("eq", ops.eq, np.equal, W, X),
    ("tensor_gt", ops.tensor_gt, np.greater, W, X), ("tensor_lt", ops.tensor_lt, np.less, W, X),
    ("ldexp", ops.ldexp, lambda a, b: a * 2.0 ** b, W, np.array([1, -2, 3], np.int32)),
    ("heaviside", ops.heaviside, np.heaviside, W, np.array([0.5], F32)),
]


@pytest.mark.parametrize("name,fn,ref,x", UNARY, ids=[c[0] for c in UNARY])
def test_unary_matches_numpy_in_both_modes(name, fn, ref, x):
    got = both_modes(fn, Tensor(x))
    want = ref(x.astype(np.float64))
    np.testing.assert_allclose(got.asnumpy(), want, rtol=2e-5, atol=2e-6, err_msg=name)
    if want.dtype == np.bool_:
        assert got.dtype == ms.bool_
    else:
        assert got.dtype == ms.float32, f"{name}: {got.dtype}"


@pytest.mark.parametrize("name,fn,ref,a,b", BINARY, ids=[c[0] for c in BINARY])
def test_binary_matches_numpy_and_broadcasts(name, fn, ref, a, b):
    got = both_modes(fn, Tensor(a), Tensor(b))
    want = ref(a.astype(np.float64), b.astype(np.float64) if b.dtype != np.int32 else b)
    assert got.shape == np.broadcast_shapes(a.shape, b.shape)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=2e-5, atol=2e-6, err_msg=name)


GRAD = [
    ("tan", ops.tan, X), ("asin", ops.asin, X), ("acos", ops.acos, X), ("atan", ops.atan, W),
    ("sinh", ops.sinh, W), ("cosh", ops.cosh, W), ("asinh", ops.asinh, W),
    ("acosh", ops.acosh, P + 1), ("atanh", ops.atanh, X), ("erf", ops.erf, W),
    ("erfc", ops.erfc, W), ("erfinv", ops.erfinv, X), ("lgamma", ops.lgamma, P),
    ("expm1", ops.expm1, W), ("log1p", ops.log1p, P), ("log2", ops.log2, P),
    ("log10", ops.log10, P), ("exp2", ops.exp2, W), ("sinc", ops.sinc, W + 0.3),
    ("logit", ops.logit, (X + 1) / 2.5 + 0.05), ("reciprocal", ops.reciprocal, P),
    ("mvlgamma", lambda x: ops.mvlgamma(x, 2), P + 1),
    ("atan2", lambda a: ops.atan2(a, Tensor(np.float64(0.7)) - a), W),
    ("hypot", lambda a: ops.hypot(a, a * 2 + 1), W), ("logaddexp", lambda a:
                                                      ops.logaddexp(a, a * a), W),
    ("xlogy", lambda a: ops.xlogy(a, a * a + 1), W), ("lerp", lambda a: ops.lerp(a, a * 3, a), W),
    ("addcmul", lambda a: ops.addcmul(a, a, a, 0.5), W),
    ("addcdiv", lambda a: ops.addcdiv(a, a, a * a + 1, 2), W),
]


@pytest.mark.parametrize("name,fn,x", GRAD, ids=[g[0] for g in GRAD])
def test_gradient_matches_finite_differences(name, fn, x):
    check_grad(fn, x.astype(np.float64), rtol=1e-4, atol=1e-6)


def test_dtype_rules():
    ints = Tensor(np.array([1, 2, 3], np.int32))
    halves = Tensor(np.array([0.5, 1.5], np.float16))
    assert ops.tan(ints).dtype == ms.float32  # integers compute in float32
    assert ops.erf(halves).dtype == ms.float16
    assert ops.trunc(ints).dtype == ms.int32
    assert ops.frac(ints).dtype == ms.int32
    assert ops.float_power(ints, 2).dtype == ms.float64
    assert ops.exp2(ints).dtype == ms.float32
    assert ops.signbit(ints).dtype == ms.bool_
    assert ops.isinf(ints).asnumpy().tolist() == [False] * 3
    assert ops.isnan(ints).asnumpy().tolist() == [False] * 3
    assert ops.fmax(ints, ints).dtype == ms.int32
    for fn in (ops.ceil, ops.log2, ops.deg2rad, ops.isposinf):
        with pytest.raises(TypeError, match="float"):
            fn(ints)
    with pytest.raises(TypeError, match="logaddexp"):
        ops.logaddexp(ints, ints)
    with pytest.raises(TypeError, match="heaviside"):
        ops.heaviside(Tensor(np.array([1.0], F32)), ints)


def test_special_values():
    special_x = Tensor(np.array([np.inf, -np.inf, np.nan, 1.0, -0.0], F32))
    got = ops.nan_to_num(special_x).asnumpy()
    fmax = np.finfo(F32).max
    np.testing.assert_array_equal(got, [fmax, -fmax, 0.0, 1.0, 0.0])
    got = ops.nan_to_num(special_x, nan=1.5, posinf=2.0, neginf=-2.0).asnumpy()
    np.testing.assert_array_equal(got, [2.0, -2.0, 1.5, 1.0, 0.0])
    assert ops.isneginf(special_x).asnumpy().tolist() == [False, True, False, False, False]
    assert ops.isposinf(special_x).asnumpy().tolist() == [True, False, False, False, False]
    assert ops.isinf(special_x).asnumpy().tolist() == [True, True, False, False, False]
    assert ops.isfinite(special_x).asnumpy().tolist() == [False, False, False, True, True]
    assert ops.signbit(special_x).asnumpy().tolist()[-1] is True
    a = Tensor(np.array([np.inf, np.nan, 1.0, 1.0], F32))
    b = Tensor(np.array([np.inf, np.nan, 1.000001, 1.1], F32))
    assert ops.isclose(a, b).asnumpy().tolist() == [True, False, True, False]
    assert ops.isclose(a, b, equal_nan=True).asnumpy().tolist() == [True, True, True, False]
    assert ops.approximate_equal(a, b, 1e-3).asnumpy().tolist() == [False, False, True, False]
    inf = Tensor(np.array([-np.inf, np.inf], F32))
    np.testing.assert_array_equal(ops.logaddexp(inf, inf).asnumpy(), [-np.inf, np.inf])
    np.testing.assert_array_equal(ops.hypot(inf, inf).asnumpy(), [np.inf, np.inf])
    np.testing.assert_allclose(ops.atan2(Tensor(np.array([0.0, -0.0, 1.0], F32)),
                                         Tensor(np.array([-1.0, -1.0, 0.0], F32))).asnumpy(),
                               [math.pi, -math.pi, math.pi / 2], rtol=1e-6)
    np.testing.assert_allclose(ops.erfinv(Tensor(np.array([-1.0, 1.0, 0.999999], np.float64)))
                               .asnumpy(), [-np.inf, np.inf, special.erfinv(0.999999)],
                               rtol=1e-12)
    big = Tensor(np.array([1e-10, 30.0], np.float64))
    np.testing.assert_allclose(ops.expm1(big).asnumpy(), np.expm1([1e-10, 30.0]), rtol=1e-15)
    np.testing.assert_allclose(ops.log1p(big).asnumpy(), np.log1p([1e-10, 30.0]), rtol=1e-15)


def test_logit_eps_and_scalars():
    x = Tensor(np.array([0.0, 0.3, 1.0], F32))
    np.testing.assert_allclose(ops.logit(x, eps=1e-6).asnumpy(),
                               special.logit(np.clip(np.array([0.0, 0.3, 1.0], F32), F32(1e-6),
                                                     F32(1 - 1e-6)).astype(np.float64)),
                               rtol=1e-4)  # the bounds are float32, as in MindSpore
    np.testing.assert_allclose(ops.copysign(Tensor(P), -1.0).asnumpy(), -P)
    np.testing.assert_allclose(ops.ldexp(Tensor(P), 3).asnumpy(), P * 8)
    np.testing.assert_allclose(ops.addcdiv(Tensor(P), Tensor(P), Tensor(W + 5), value=0.5)
                               .asnumpy(), P + 0.5 * P / (W + 5), rtol=1e-6)


def test_bad_input_is_a_clear_error():
    with pytest.raises(TypeError, match="tan: input must be a Tensor"):
        ops.tan([1.0])
    with pytest.raises(ValueError, match="mvlgamma: p"):
        ops.mvlgamma(Tensor(P), 0)
    with pytest.raises(TypeError, match="positive"):
        ops.positive(Tensor(np.array([True])))
