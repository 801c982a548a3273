"""Scatter/segment ops, integer and statistics helpers, einsum and random draws added for API
breadth (scatter_ops.py, misc_ext.py, random_ext.py): NumPy references in both modes,
gradients, distributions of the random draws, bad input."""
import itertools

import numpy as np
import pytest
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor, ops

F32 = np.float32
X = np.arange(1, 10, dtype=F32).reshape(3, 3) * np.array([1, -1, 0.5], F32)
IDS = np.array([0, 2, 0], np.int32)


def both_modes(fn, *args):
    def run(*a):
        return fn(*a)

    return assert_same_in_both_modes(run, *args)


def np_segment(a, ids, num, fn, empty):
    return np.stack([fn(a[ids == s], axis=0) if (ids == s).any() else np.full(a.shape[1:], empty)
                     for s in range(num)])


def np_scatter_elements(a, idx, upd, axis, add):
    out = a.copy()
    for pos in itertools.product(*map(range, idx.shape)):
        target = list(pos)
        target[axis] = idx[pos]
        out[tuple(target)] = out[tuple(target)] + upd[pos] if add else upd[pos]
    return out


def np_cov(a):
    return np.cov(a)


CASES = [
    ("segment_sum", lambda x: ops.unsorted_segment_sum(x, Tensor(IDS), 4),
     lambda a: np_segment(a, IDS, 4, np.sum, 0)),
    ("segment_max", lambda x: ops.unsorted_segment_max(x, Tensor(IDS), 4),
     lambda a: np_segment(a, IDS, 4, np.max, -np.finfo(F32).max)),
    ("segment_min", lambda x: ops.unsorted_segment_min(x, Tensor(IDS), 3),
     lambda a: np_segment(a, IDS, 3, np.min, np.finfo(F32).max)),
    ("segment_prod", lambda x: ops.unsorted_segment_prod(x, Tensor(IDS), 4),
     lambda a: np_segment(a, IDS, 4, np.prod, 1)),
    ("gather_nd", lambda x: ops.gather_nd(x, Tensor(np.array([[0, 1], [2, -1]], np.int32))),
     lambda a: a[[0, 2], [1, 2]]),
    ("gather_nd_rows", lambda x: ops.gather_nd(x, Tensor(np.array([[2], [0]]))),
     lambda a: a[[2, 0]]),
    ("tensor_scatter_add", lambda x: ops.tensor_scatter_add(
        x, Tensor(np.array([[0], [0], [2]])), x * 2), lambda a: a + np.stack(
            [2 * a[0] + 2 * a[1], 0 * a[0], 2 * a[2]])),
    ("tensor_scatter_sub", lambda x: ops.tensor_scatter_sub(
        x, Tensor(np.array([[1, 1]])), Tensor(np.array([5.0], F32))),
     lambda a: a - np.array([[0, 0, 0], [0, 5, 0], [0, 0, 0]])),
    ("tensor_scatter_update", lambda x: ops.tensor_scatter_update(
        x, Tensor(np.array([[2], [0]])), x[:2] * 10), lambda a: np.stack([a[1] * 10, a[1],
                                                                         a[0] * 10])),
    ("scatter_nd", lambda x: ops.scatter_nd(Tensor(np.array([[3], [1], [3]])), x, (4, 3)),
     lambda a: np.stack([0 * a[0], a[1], 0 * a[0], a[0] + a[2]])),
    ("tensor_scatter_elements", lambda x: ops.tensor_scatter_elements(
        x, Tensor(np.array([[2, 0], [1, 0]])), x[:2, :2] * 3, 1),  # unique targets
     lambda a: np_scatter_elements(a, np.array([[2, 0], [1, 0]]), a[:2, :2] * 3, 1, False)),
    ("tensor_scatter_elements_add", lambda x: ops.tensor_scatter_elements(
        x, Tensor(np.array([[2, 2], [1, 1]])), x[:2, :2], 0, "add"),
     lambda a: np_scatter_elements(a, np.array([[2, 2], [1, 1]]), a[:2, :2], 0, True)),
    ("scatter", lambda x: ops.scatter(x, 0, Tensor(np.array([[1, 2, 0]])), x[2:] + 1),
     lambda a: np_scatter_elements(a, np.array([[1, 2, 0]]), a[2:] + 1, 0, False)),
    ("index_fill", lambda x: ops.index_fill(x, 0, Tensor(np.array([2], np.int32)), -1.5),
     lambda a: np.where(np.arange(3)[:, None] == 2, -1.5, a)),
    ("select_scatter", lambda x: ops.select_scatter(x, x[0] * 0 + 4, 1, -1),
     lambda a: np.where(np.arange(3)[None] == 2, 4, a)),
    ("slice_scatter", lambda x: ops.slice_scatter(x, x[:, :2] * 2, 1, 0, None, 2),
     lambda a: np.stack([a[:, 0] * 2, a[:, 1], a[:, 1] * 2], 1)),
    ("embedding", lambda x: ops.embedding(Tensor(np.array([[2, 0], [1, 2]])), x),
     lambda a: a[[[2, 0], [1, 2]]]),
    ("matrix_band_part", lambda x: ops.matrix_band_part(x, 0, 1),
     lambda a: np.triu(np.tril(a, 1))),
    ("fast_gelu", ops.fast_gelu, lambda a: a / (1 + np.exp(-1.702 * np.abs(a)))
     * np.exp(0.851 * (a - np.abs(a)))),
    ("swiglu", lambda x: ops.swiglu(x[:, :2], 1),
     lambda a: a[:, :1] / (1 + np.exp(-a[:, :1])) * a[:, 1:2]),
    ("rms_norm", lambda x: ops.rms_norm(x, Tensor(np.array([1.0, 2.0, 0.5], F32))),
     lambda a: (a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-6) * [1.0, 2.0, 0.5],
                1 / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-6))),
    ("trapz", ops.trapz, lambda a: np.trapezoid(a)),
    ("trapz_x", lambda x: ops.trapz(x, Tensor(np.array([0.0, 1.0, 3.0], F32)), dim=0),
     lambda a: np.trapezoid(a, [0.0, 1.0, 3.0], axis=0)),
    ("cov", ops.cov, np_cov), ("renorm", lambda x: ops.renorm(x, 2, 0, 5.0),
                               lambda a: a * np.minimum(1, 5 / np.linalg.norm(a, axis=1,
                                                                              keepdims=True))),
    ("pdist", ops.pdist, lambda a: np.array([np.linalg.norm(a[i] - a[j]) for i in range(3)
                                             for j in range(i + 1, 3)])),
    ("matrix_power", lambda x: ops.matrix_power(x, 3), lambda a: np.linalg.matrix_power(a, 3)),
    ("matrix_power_0", lambda x: ops.matrix_power(x, 0), lambda a: np.eye(3)),
    ("einsum_mm", lambda x: ops.einsum("ij,jk->ik", x, x), lambda a: a @ a),
    ("einsum_implicit", lambda x: ops.einsum("ij,kj", x, x * 2), lambda a: np.einsum(
        "ij,kj", a, a * 2)),
    ("einsum_outer_sum", lambda x: ops.einsum("i,j->", x[0], x[1]), lambda a: np.einsum(
        "i,j->", a[0], a[1])),
    ("einsum_batch", lambda x: ops.einsum("bi,bj->bij", x, x), lambda a: np.einsum(
        "bi,bj->bij", a, a)),
    ("adjoint", ops.adjoint, np.transpose), ("conj", ops.conj, np.conj),
    ("clip_by_value", lambda x: ops.clip_by_value(x, -2, 3), lambda a: np.clip(a, -2, 3)),
    ("combinations", lambda x: ops.combinations(x[0], 2, True), lambda a: np.array(
        list(itertools.combinations_with_replacement(a[0], 2)))),
]


@pytest.mark.parametrize("name,fn,ref", CASES, ids=[c[0] for c in CASES])
def test_matches_numpy_in_both_modes(name, fn, ref):
    got, want = both_modes(fn, Tensor(X)), ref(X.astype(np.float64))
    got = list(got) if isinstance(got, tuple) else [got]
    want = list(want) if isinstance(want, tuple) else [want]
    for g, w in zip(got, want):
        assert g.shape == np.shape(w), f"{name}: {g.shape} != {np.shape(w)}"
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-5, atol=1e-5, err_msg=name)


def test_integer_ops_match_numpy():
    a = np.array([12, -18, 0, 7, 0, 2**30], np.int32)
    b = np.array([8, 12, 5, -21, 0, 3 * 2**20], np.int32)
    np.testing.assert_array_equal(both_modes(ops.gcd, Tensor(a), Tensor(b)).asnumpy(),
                                  np.gcd(a, b))
    np.testing.assert_array_equal(ops.lcm(Tensor(a[:5]), Tensor(b[:5])).asnumpy(),
                                  np.lcm(a[:5], b[:5]))
    v = np.array([7, -1, 0, 255, -128], np.int16)
    got = both_modes(ops.population_count, Tensor(v))
    assert got.dtype == ms.uint8
    assert got.asnumpy().tolist() == [bin(int(x) & 0xFFFF).count("1") for x in v]
    with pytest.raises(TypeError, match="gcd"):
        ops.gcd(Tensor(X), Tensor(X))


def test_segment_and_scatter_dtypes():
    ints = Tensor(np.array([[1, 2], [3, 4], [5, 6]], np.int32))
    out = ops.unsorted_segment_sum(ints, Tensor(IDS), 3)
    assert out.dtype == ms.int32 and out.asnumpy().tolist() == [[6, 8], [0, 0], [3, 4]]
    low = ops.unsorted_segment_max(ints, Tensor(IDS), 2).asnumpy()
    assert low[1].tolist() == [np.iinfo(np.int32).min] * 2
    assert ops.sequence_mask(Tensor(np.array([1, 3, 0])), 4).asnumpy().tolist() == [
        [True, False, False, False], [True, True, True, False], [False] * 4]
    assert ops.sequence_mask(Tensor(np.array([2, 1]))).shape == (2, 2)
    assert ops.kaiser_window(5).dtype == ms.float64
    np.testing.assert_allclose(ops.kaiser_window(6, False, 5.0).asnumpy(), np.kaiser(6, 5.0))
    assert ops.eps(Tensor(X)).asnumpy()[0, 0] == np.finfo(F32).eps
    assert ops.is_nonzero(Tensor(np.array([0.5], F32))) is True


def test_assign_add_and_sub_write_the_parameter():
    p = ms.Parameter(Tensor(np.ones(2, F32)), name="acc")
    ops.assign_add(p, Tensor(np.array([2.0, 3.0], F32)))
    ops.assign_sub(p, Tensor(np.array([1.0, 1.0], F32)))
    assert p.asnumpy().tolist() == [2.0, 3.0]


GRAD = [
    ("segment_sum", lambda x: ops.unsorted_segment_sum(x, Tensor(IDS), 4)),
    ("segment_max", lambda x: ops.unsorted_segment_max(x, Tensor(np.array([0, 1, 0])), 2)),
    ("gather_nd", lambda x: ops.gather_nd(x, Tensor(np.array([[0, 1], [2, 2], [0, 1]])))),
    ("tensor_scatter_add", lambda x: ops.tensor_scatter_add(x, Tensor(np.array([[0], [0]])),
                                                            x[1:] * x[1:])),
    ("tensor_scatter_elements", lambda x: ops.tensor_scatter_elements(
        x, Tensor(np.array([[2, 0]])), x[1:2, :2] * 3, 1)),
    ("slice_scatter", lambda x: ops.slice_scatter(x, x[:, :2] * x[:, 1:], 1, 0, None, 2)),
    ("embedding", lambda x: ops.embedding(Tensor(np.array([2, 0, 2])), x)),
    ("rms_norm", lambda x: ops.rms_norm(x, x[0])[0]), ("swiglu", lambda x: ops.swiglu(x[:, :2])),
    ("fast_gelu", ops.fast_gelu), ("cov", ops.cov), ("renorm", lambda x: ops.renorm(x, 2, 1, 2.0)),
    ("pdist", ops.pdist), ("einsum", lambda x: ops.einsum("ij,jk->ik", x, x)),
    ("matrix_power", lambda x: ops.matrix_power(x, 3)), ("trapz", ops.trapz),
]


@pytest.mark.parametrize("name,fn", GRAD, ids=[g[0] for g in GRAD])
def test_gradient_matches_finite_differences(name, fn):
    x = np.array([[0.3, -1.2, 2.0], [1.1, 0.7, -0.4], [0.5, 1.6, -0.9]])
    check_grad(fn, x, rtol=1e-4, atol=1e-6)


def test_random_draws_have_the_right_distribution():
    ms.set_seed(7)
    perm = ops.randperm(50)
    assert perm.dtype == ms.int64 and sorted(perm.asnumpy().tolist()) == list(range(50))
    r = ops.randint(-3, 4, (4000,)).asnumpy()
    assert r.min() == -3 and r.max() == 3 and abs(r.mean()) < 0.15
    x = Tensor(np.zeros((200, 50), F32))
    u, z = ops.rand_like(x).asnumpy(), ops.randn_like(x).asnumpy()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    n = ops.normal((10000,), Tensor(np.float32(2.0)), Tensor(np.float32(0.5))).asnumpy()
    assert abs(n.mean() - 2) < 0.03 and abs(n.std() - 0.5) < 0.02
    b = ops.bernoulli(x, 0.3).asnumpy()
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.02
    lap = ops.laplace((20000,), Tensor(np.float32(1.0)), Tensor(np.float32(2.0))).asnumpy()
    assert abs(np.median(lap) - 1) < 0.1 and abs(np.abs(lap - 1).mean() - 2) < 0.1
    m = ops.multinomial(Tensor(np.array([0.1, 0.0, 0.9], F32)), 4000).asnumpy()
    assert m.dtype == np.int32 and 1 not in m and abs((m == 2).mean() - 0.9) < 0.03
    nr = ops.multinomial(Tensor(np.array([[1.0, 1.0, 1.0, 0.0]], F32)), 3, False).asnumpy()
    assert sorted(nr[0].tolist()) == [0, 1, 2]
    s = ops.shuffle(Tensor(np.arange(20))).asnumpy()
    assert sorted(s.tolist()) == list(range(20))
    assert ops.randint_like(Tensor(np.zeros(3, np.int32)), 0, 2).dtype == ms.int32
    with pytest.raises(ValueError, match="randint: high"):
        ops.randint(3, 3, (2,))
    with pytest.raises(ValueError, match="randint_like: the dtype must be an int"):
        ops.randint_like(x, 0, 3)


def test_random_draws_run_compiled():
    def draw(x):
        return ops.rand_like(x) + ops.bernoulli(x, 0.5) * 0 + ops.shuffle(x) * 0

    out = ms.jit(draw)(Tensor(np.zeros((4, 3), F32)))
    assert out.shape == (4, 3) and (0 <= out.asnumpy()).all()


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="segment_ids shape"):
        ops.unsorted_segment_sum(Tensor(X), Tensor(np.array([0, 1])), 2)
    with pytest.raises(ValueError, match="indices' last dimension"):
        ops.gather_nd(Tensor(X), Tensor(np.zeros((2, 3), np.int64)))
    with pytest.raises(ValueError, match="slice_scatter: src"):
        ops.slice_scatter(Tensor(X), Tensor(X), 1, 0, None, 2)
    with pytest.raises(ValueError, match="einsum"):
        ops.einsum("ii->i", Tensor(X))
    with pytest.raises(ValueError, match="matrix_power: negative"):
        ops.matrix_power(Tensor(X), -1)
    with pytest.raises(ValueError, match="swiglu"):
        ops.swiglu(Tensor(X))
