"""kiln.mint's math, reduction, sorting, indexing, random and creation functions: NumPy
references, PyTorch's result dtypes, and the same results through ms.jit."""
import math

import numpy as np
import pytest
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor, mint

RNG = np.random.default_rng(15)
X = RNG.standard_normal((3, 4)).astype(np.float32)
Y = RNG.standard_normal((3, 4)).astype(np.float32)
ROW = RNG.standard_normal((4,)).astype(np.float32)
UNIT = RNG.uniform(-0.9, 0.9, (3, 4)).astype(np.float32)
BIG = RNG.uniform(1.1, 3.0, (3, 4)).astype(np.float32)
POS = RNG.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
INT = RNG.integers(-5, 6, (3, 4)).astype(np.int32)
INT2 = RNG.integers(1, 9, (3, 4)).astype(np.int32)
SQ = (RNG.standard_normal((3, 3)) + 3 * np.eye(3)).astype(np.float32)
B1 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
B2 = RNG.standard_normal((2, 4, 5)).astype(np.float32)
M35 = RNG.standard_normal((3, 5)).astype(np.float32)
V4 = RNG.standard_normal((4,)).astype(np.float32)
V3 = RNG.standard_normal((3,)).astype(np.float32)
DUP = np.array([[3, 1, 3, 2], [2, 2, 7, 1], [3, 1, 3, 2]], np.int32)
SPECIAL = np.array([[np.nan, np.inf, -np.inf, 1.0]], np.float32)
f32, i64 = ms.float32, ms.int64


def _erfinv(y):
    """Newton steps on erf(x) = y from a rough start (NumPy has no erfinv)."""
    x = np.arctanh(y) * 0.9
    for _ in range(40):
        x = x - (np.vectorize(math.erf)(x) - y) / (2 / np.sqrt(np.pi) * np.exp(-x * x))
    return x


def _diff_of(a, b):
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


def _sort(a, desc=False):
    idx = np.argsort(-a if desc else a, -1, kind="stable")
    return np.take_along_axis(a, idx, -1), idx


def _topk(a, k):
    idx = np.argsort(-a, -1, kind="stable")[:, :k]
    return np.take_along_axis(a, idx, -1), idx


def _scatter_add(base, index, src):
    out = base.copy()
    for i, j in np.ndindex(*index.shape):
        out[i, index[i, j]] += src[i, j]
    return out


def _cum(a, op):
    values, indices = np.empty_like(a), np.empty(a.shape, np.int64)
    for r in range(a.shape[0]):
        for c in range(a.shape[1]):
            window = a[r, :c + 1]
            pick = op(window)
            values[r, c] = window[pick]
            indices[r, c] = pick
    return values, indices


def _last_argmax(w):
    return len(w) - 1 - np.argmax(w[::-1])


def _last_argmin(w):
    return len(w) - 1 - np.argmin(w[::-1])


IDX = np.array([[1, 0], [2, 2], [0, 3]], np.int64)
SRC = RNG.standard_normal((3, 2)).astype(np.float32)
SEL = np.array([2, 0, 2], np.int32)

# name, fn (one lambda a line, compiled by ms.jit), NumPy reference, inputs, result dtype(s)
CASES = [
    ("acos", lambda x: mint.acos(x), np.arccos, (UNIT,), f32),
    ("arccos", lambda x: mint.arccos(x), np.arccos, (UNIT,), f32),
    ("acosh", lambda x: mint.acosh(x), np.arccosh, (BIG,), f32),
    ("arccosh", lambda x: mint.arccosh(x), np.arccosh, (BIG,), f32),
    ("asin", lambda x: mint.asin(x), np.arcsin, (UNIT,), f32),
    ("arcsin", lambda x: mint.arcsin(x), np.arcsin, (UNIT,), f32),
    ("asinh", lambda x: mint.asinh(x), np.arcsinh, (X,), f32),
    ("arcsinh", lambda x: mint.arcsinh(x), np.arcsinh, (X,), f32),
    ("atan", lambda x: mint.atan(x), np.arctan, (X,), f32),
    ("arctan", lambda x: mint.arctan(x), np.arctan, (X,), f32),
    ("atanh", lambda x: mint.atanh(x), np.arctanh, (UNIT,), f32),
    ("arctanh", lambda x: mint.arctanh(x), np.arctanh, (UNIT,), f32),
    ("atan2_broadcast", lambda x, y: mint.atan2(x, y), np.arctan2, (X, ROW), f32),
    ("arctan2", lambda x, y: mint.arctan2(x, y), np.arctan2, (X, Y), f32),
    ("acos_int_promotes", lambda x: mint.acos(x), lambda a: np.arccos(a.astype(np.float32)),
     (np.clip(INT, -1, 1),), f32),
    ("cosh", lambda x: mint.cosh(x), np.cosh, (X,), f32),
    ("sinh", lambda x: mint.sinh(x), np.sinh, (X,), f32),
    ("tan", lambda x: mint.tan(x), np.tan, (UNIT,), f32),
    ("sinc", lambda x: mint.sinc(x), np.sinc, (X,), f32),
    ("ceil", lambda x: mint.ceil(x), np.ceil, (X,), f32),
    ("ceil_int", lambda x: mint.ceil(x), lambda a: a, (INT,), ms.int32),
    ("trunc", lambda x: mint.trunc(x), np.trunc, (X * 3,), f32),
    ("fix", lambda x: mint.fix(x), np.fix, (X * 3,), f32),
    ("frac", lambda x: mint.frac(x), lambda a: a - np.trunc(a), (X * 3,), f32),
    ("erf", lambda x: mint.erf(x), np.vectorize(math.erf), (X,), f32),
    ("erfc", lambda x: mint.erfc(x), np.vectorize(math.erfc), (X,), f32),
    ("erfinv", lambda x: mint.erfinv(x), _erfinv, (UNIT,), f32),
    ("exp2", lambda x: mint.exp2(x), np.exp2, (X,), f32),
    ("exp2_int", lambda x: mint.exp2(x), lambda a: np.exp2(a).astype(np.float32), (INT,), f32),
    ("log2", lambda x: mint.log2(x), np.log2, (POS,), f32),
    ("log2_int", lambda x: mint.log2(x), lambda a: np.log2(a.astype(np.float32)), (INT2,), f32),
    ("log10", lambda x: mint.log10(x), np.log10, (POS,), f32),
    ("log10_int", lambda x: mint.log10(x), lambda a: np.log10(a.astype(np.float32)), (INT2,),
     f32),
    ("reciprocal", lambda x: mint.reciprocal(x), np.reciprocal, (POS,), f32),
    ("logaddexp", lambda x, y: mint.logaddexp(x, y), np.logaddexp, (X, ROW), f32),
    ("logaddexp2", lambda x, y: mint.logaddexp2(x, y), np.logaddexp2, (X, Y), f32),
    ("float_power", lambda x: mint.float_power(x, 2), lambda a: a.astype(np.float64) ** 2,
     (INT,), ms.float64),
    ("gcd", lambda x, y: mint.gcd(x, y), np.gcd, (INT, INT2), ms.int32),
    ("xlogy", lambda x, y: mint.xlogy(x, y), lambda a, b: a * np.log(b), (X, POS), f32),
    ("lerp", lambda x, y: mint.lerp(x, y, 0.3), lambda a, b: a + 0.3 * (b - a), (X, Y), f32),
    ("nan_to_num", lambda x: mint.nan_to_num(x), lambda a: np.nan_to_num(a), (SPECIAL,), f32),
    ("isfinite", lambda x: mint.isfinite(x), np.isfinite, (SPECIAL,), ms.bool_),
    ("isinf", lambda x: mint.isinf(x), np.isinf, (SPECIAL,), ms.bool_),
    ("isnan", lambda x: mint.isnan(x), np.isnan, (SPECIAL,), ms.bool_),
    ("isneginf", lambda x: mint.isneginf(x), np.isneginf, (SPECIAL,), ms.bool_),
    ("isclose", lambda x, y: mint.isclose(x, y, rtol=0.5), lambda a, b: np.isclose(a, b, 0.5),
     (X, Y), ms.bool_),
    ("addcdiv", lambda x, y, z: mint.addcdiv(x, y, z, value=2), lambda a, b, c: a + 2 * b / c,
     (X, Y, POS), f32),
    ("addcmul", lambda x, y, z: mint.addcmul(x, y, z, value=-1), lambda a, b, c: a - b * c,
     (X, Y, ROW), f32),
    ("addmm", lambda x, a, b: mint.addmm(x, a, b, beta=0.5, alpha=2),
     lambda x, a, b: 0.5 * x + 2 * a @ b, (M35, X, B2[1]), f32),
    ("addmv", lambda x, a, v: mint.addmv(x, a, v, alpha=3), lambda x, a, v: x + 3 * a @ v,
     (V3, X, V4), f32),
    ("addbmm", lambda x, a, b: mint.addbmm(x, a, b), lambda x, a, b: x + (a @ b).sum(0),
     (M35, B1, B2), f32),
    ("baddbmm", lambda x, a, b: mint.baddbmm(x, a, b, beta=2), lambda x, a, b: 2 * x + a @ b,
     (M35, B1, B2), f32),
    ("mv", lambda a, v: mint.mv(a, v), lambda a, v: a @ v, (X, V4), f32),
    ("dot", lambda a, b: mint.dot(a, b), np.dot, (V4, ROW), f32),
    ("vdot", lambda a, b: mint.vdot(a, b), np.vdot, (V4, ROW), f32),
    ("outer", lambda a, b: mint.outer(a, b), np.outer, (V3, V4), f32),
    ("inverse", lambda a: mint.inverse(a), np.linalg.inv, (SQ,), f32),
    ("trace", lambda a: mint.trace(a), np.trace, (X,), f32),
    ("cross", lambda a, b: mint.cross(a, b, dim=0), lambda a, b: np.cross(a, b, axis=0),
     (X, Y), f32),
    ("cdist", lambda a, b: mint.cdist(a, b), _diff_of, (X, Y[:2]), f32),
    ("einsum", lambda a, b: mint.einsum("ij,jk->ik", a, b), lambda a, b: a @ b, (X, B2[0]),
     f32),
    ("diag_vector", lambda v: mint.diag(v, 1), lambda v: np.diag(v, 1), (V3,), f32),
    ("diag_matrix", lambda a: mint.diag(a, -1), lambda a: np.diag(a, -1), (X,), f32),
    ("diff", lambda a: mint.diff(a, 2, dim=0), lambda a: np.diff(a, 2, 0), (INT,), ms.int32),
    ("hstack", lambda a, b: mint.hstack((a, b)), lambda a, b: np.hstack((a, b)), (X, Y), f32),
    ("dstack", lambda a, b: mint.dstack([a, b]), lambda a, b: np.dstack((a, b)), (X, Y), f32),
    ("meshgrid_ij", lambda a, b: mint.meshgrid(a, b),
     lambda a, b: tuple(np.meshgrid(a, b, indexing="ij")), (V3, V4), (f32, f32)),
    ("meshgrid_xy", lambda a, b: mint.meshgrid(a, b, indexing="xy"),
     lambda a, b: tuple(np.meshgrid(a, b)), (V3, V4), (f32, f32)),
    ("unbind", lambda a: mint.unbind(a, 1), lambda a: tuple(a[:, i] for i in range(4)), (X,),
     (f32,) * 4),
    ("cumsum_int_is_int64", lambda a: mint.cumsum(a, 1), lambda a: np.cumsum(a, 1), (INT,), i64),
    ("cumsum_dtype", lambda a: mint.cumsum(a, 0, ms.float32), lambda a: np.cumsum(a, 0), (INT,),
     f32),
    ("cumprod_int_is_int64", lambda a: mint.cumprod(a, 1), lambda a: np.cumprod(a, 1), (INT,), i64),
    ("cummax", lambda a: mint.cummax(a, 1), lambda a: _cum(a, _last_argmax), (INT,),
     (ms.int32, i64)),
    ("cummin", lambda a: mint.cummin(a, 1), lambda a: _cum(a, _last_argmin), (X,), (f32, i64)),
    ("count_nonzero", lambda a: mint.count_nonzero(a), np.count_nonzero, (INT,), i64),
    ("count_nonzero_dim", lambda a: mint.count_nonzero(a, dim=1),
     lambda a: np.count_nonzero(a, 1), (INT,), i64),
    ("nansum", lambda a: mint.nansum(a, 1, True), lambda a: np.nansum(a, 1, keepdims=True),
     (np.where(X > 1, np.nan, X),), f32),
    ("std", lambda a: mint.std(a), lambda a: np.std(a, ddof=1), (X,), f32),
    ("std_dim_correction", lambda a: mint.std(a, 1, correction=0, keepdim=True),
     lambda a: np.std(a, 1, keepdims=True), (X,), f32),
    ("var", lambda a: mint.var(a, (0, 1)), lambda a: np.var(a, ddof=1), (X,), f32),
    ("std_mean", lambda a: mint.std_mean(a, 0), lambda a: (np.std(a, 0, ddof=1), a.mean(0)),
     (X,), (f32, f32)),
    ("var_mean", lambda a: mint.var_mean(a, 1, correction=2),
     lambda a: (np.var(a, 1, ddof=2), a.mean(1)), (X,), (f32, f32)),
    ("norm_default_fro", lambda a: mint.norm(a), np.linalg.norm, (X,), f32),
    ("norm_p1_dim", lambda a: mint.norm(a, 1, 1), lambda a: np.abs(a).sum(1), (X,), f32),
    ("norm_inf", lambda a: mint.norm(a, float("inf")), lambda a: np.abs(a).max(), (X,), f32),
    ("norm_nuc", lambda a: mint.norm(a, "nuc"), lambda a: np.linalg.norm(a, "nuc"), (X,), f32),
    ("sort", lambda a: mint.sort(a), _sort, (X,), (f32, i64)),
    ("sort_descending", lambda a: mint.sort(a, dim=-1, descending=True),
     lambda a: _sort(a, True), (X,), (f32, i64)),
    ("argsort", lambda a: mint.argsort(a, descending=True), lambda a: _sort(a, True)[1], (X,),
     i64),
    ("topk", lambda a: mint.topk(a, 2), lambda a: _topk(a, 2), (X,), (f32, i64)),
    ("topk_smallest", lambda a: mint.topk(a, 1, largest=False)[0],
     lambda a: a.min(-1, keepdims=True), (X,), f32),
    ("kthvalue", lambda a: mint.kthvalue(a, 2, 1, True),
     lambda a: tuple(np.take_along_axis(v, np.argsort(a, 1)[:, 1:2], 1)
                     for v in (a, np.arange(4)[None].repeat(3, 0))), (X,), (f32, i64)),
    ("median_all", lambda a: mint.median(a), lambda a: np.sort(a.ravel())[(a.size - 1) // 2],
     (X,), f32),
    ("median_dim", lambda a: mint.median(a, 1)[0], lambda a: np.sort(a, 1)[:, 1], (X,), f32),
    ("median_dim_index", lambda a: mint.median(a, 1)[1],
     lambda a: np.argsort(a, 1)[:, 1], (X,), i64),
    ("histc", lambda a: mint.histc(a, 4, -2, 2), lambda a: np.histogram(a, 4, (-2, 2))[0],
     (np.clip(X, -2, 2),), f32),
    ("searchsorted", lambda s, v: mint.searchsorted(s, v, right=True),
     lambda s, v: np.searchsorted(s, v, "right"), (np.sort(V4), X), i64),
    ("take", lambda a, i: mint.take(a, i), lambda a, i: a.ravel()[i], (X, IDX), f32),
    ("index_select", lambda a, i: mint.index_select(a, 0, i), lambda a, i: a[i], (X, SEL), f32),
    ("scatter", lambda a, i, s: mint.scatter(a, 1, i, s),
     lambda a, i, s: _put(a, i, s), (X, np.array([[1, 0], [2, 3], [0, 3]]), SRC), f32),
    ("scatter_add", lambda a, i, s: mint.scatter_add(a, 1, i, s), _scatter_add, (X, IDX, SRC),
     f32),
    ("scatter_add_larger_src", lambda a, i, s: mint.scatter_add(a, 1, i, s),
     lambda a, i, s: _scatter_add(a, i, s[:, :2]), (X, IDX, Y), f32),
    ("index_add", lambda a, i, s: mint.index_add(a, 1, i, s, alpha=2),
     lambda a, i, s: _index_add(a, i, 2 * s), (X, SEL, Y[:, :3]), f32),
    ("repeat_interleave", lambda a: mint.repeat_interleave(a, 2, 1),
     lambda a: np.repeat(a, 2, 1), (X,), f32),
    ("repeat_interleave_flat", lambda a: mint.repeat_interleave(a, 3),
     lambda a: np.repeat(a, 3), (INT,), ms.int32),
    ("linspace", lambda: mint.linspace(-1, 2, 7), lambda: np.linspace(-1, 2, 7), (), f32),
    ("linspace_int", lambda: mint.linspace(0, 10, 4, dtype=ms.int32),
     lambda: np.trunc(np.linspace(0, 10, 4)), (), ms.int32),
    ("eye", lambda: mint.eye(3, 4), lambda: np.eye(3, 4), (), f32),
    ("eye_int", lambda: mint.eye(2, dtype=ms.int32), lambda: np.eye(2), (), ms.int32),
]


def _put(a, i, s):
    out = a.copy()
    np.put_along_axis(out, i, s, 1)
    return out


def _index_add(a, index, s):
    out = a.copy()
    for k, j in enumerate(index):
        out[:, j] += s[:, k]
    return out


def _leaves(v):
    return list(v) if isinstance(v, (tuple, list)) else [v]


@pytest.mark.parametrize("name,fn,ref,inputs,dtypes", CASES, ids=[c[0] for c in CASES])
def test_against_numpy_in_both_modes(name, fn, ref, inputs, dtypes):
    got = _leaves(assert_same_in_both_modes(fn, *(Tensor(a) for a in inputs), rtol=1e-5,
                                            atol=1e-5))
    want = _leaves(ref(*inputs))
    dtypes = _leaves(dtypes)
    assert len(got) == len(want) == len(dtypes)
    for g, w, d in zip(got, want, dtypes):
        w = np.asarray(w)
        assert g.shape == w.shape, f"{name}: shape {g.shape}, NumPy {w.shape}"
        assert g.dtype == d, f"{name}: dtype {g.dtype}, expected {d}"
        np.testing.assert_allclose(g.asnumpy().astype(np.float64), w.astype(np.float64),
                                   rtol=1e-4, atol=1e-4, equal_nan=True)
