"""kiln.mint's functions whose result depends on the data's values (unique, bincount and
allclose, the last two PyNative only), the random and empty-creation ones (shape, dtype, range,
both modes), their errors, and their signatures against MindSpore 2.10's mint."""
import inspect

import numpy as np
import pytest
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor, mint

RNG = np.random.default_rng(16)
DUP = np.array([[3, 1, 3, 2], [2, 2, 7, 1], [3, 1, 3, 2]], np.int32)

# inspect.signature of mindspore.mint's functions in MindSpore 2.10
MS_SIGNATURES = """
    acos (input)
    conv2d (input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)
    acosh (input)
    addbmm (input, batch1, batch2, *, beta=1, alpha=1)
    addcmul (input, tensor1, tensor2, *, value=1)
    addmm (input, mat1, mat2, *, beta=1, alpha=1)
    addmv (input, mat, vec, *, beta=1, alpha=1)
    allclose (input, other, rtol=1e-05, atol=1e-08, equal_nan=False)
    arccos (input)
    arccosh (input)
    arcsin (x)
    arcsinh (input)
    arctan (input)
    arctan2 (input, other)
    arctanh (input)
    argsort (input, dim=-1, descending=False, stable=False)
    asin (input)
    asinh (input)
    atan (input)
    atan2 (input, other)
    atanh (input)
    baddbmm (input, batch1, batch2, *, beta=1, alpha=1)
    bernoulli (input, *, generator=None)
    bincount (input, weights=None, minlength=0)
    cdist (x1, x2, p=2.0, compute_mode='use_mm_for_euclid_dist_if_necessary')
    ceil (input)
    cosh (input)
    count_nonzero (input, dim=None)
    cross (input, other, dim=None)
    cummax (input, dim)
    cummin (input, dim)
    cumprod (input, dim, dtype=None)
    cumsum (input, dim, dtype=None)
    diag (input, diagonal=0)
    diff (input, n=1, dim=-1, prepend=None, append=None)
    dot (input, other)
    dstack (tensors)
    einsum (equation, *operands)
    erf (input)
    erfc (input)
    erfinv (input)
    exp2 (input)
    eye (n, m=None, dtype=None)
    fix (input)
    float_power (input, exponent)
    frac (input)
    gcd (input, other)
    hstack (tensors)
    index_select (input, dim, index)
    inverse (input)
    isclose (input, other, rtol=1e-05, atol=1e-08, equal_nan=False)
    isfinite (input)
    isinf (input)
    isnan (tensor)
    isneginf (input)
    linspace (start, end, steps, *, dtype=None)
    log10 (input)
    log2 (input)
    logaddexp (input, other)
    logaddexp2 (input, other)
    median (input, dim=None, keepdim=False)
    meshgrid (*tensors, indexing=None)
    multinomial (input, num_samples, replacement=False, *, generator=None)
    mv (input, vec)
    nan_to_num (input, nan=None, posinf=None, neginf=None)
    norm (input, p='fro', dim=None, keepdim=False, *, dtype=None)
    normal (mean=0.0, std=1.0, size=None, generator=None)
    outer (input, vec2)
    rand_like (input, *, dtype=None, device=None)
    randint (*args, generator=None, dtype=None, device=None)
    randint_like (*args, dtype=None, device=None)
    randn_like (input, *, dtype=None, device=None)
    reciprocal (input)
    scatter (input, dim, index, src)
    scatter_add (input, dim, index, src)
    searchsorted (sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None)
    sinc (input)
    sinh (input)
    sort (input, *, dim=-1, descending=False, stable=False)
    std (input, dim=None, *, correction=1, keepdim=False)
    std_mean (input, dim=None, *, correction=1, keepdim=False)
    take (input, index)
    tan (input)
    topk (input, k, dim=-1, largest=True, sorted=True)
    trace (input)
    trunc (input)
    unbind (input, dim=0)
    unique (input, sorted=True, return_inverse=False, return_counts=False, dim=None)
    unique_consecutive (input, return_inverse=False, return_counts=False, dim=None)
    var (input, dim=None, *, correction=1, keepdim=False)
    var_mean (input, dim=None, *, correction=1, keepdim=False)
    vdot (input, other)
"""


@pytest.mark.parametrize("line", MS_SIGNATURES.strip().splitlines())
def test_signature_matches_mindspore(line):
    name, signature = line.strip().split(" ", 1)
    assert str(inspect.signature(getattr(mint, name))) == signature


@pytest.mark.parametrize("flags", [(False, False), (True, False), (False, True), (True, True)])
def test_unique_matches_numpy(flags):
    inverse, counts = flags
    got = mint.unique(Tensor(DUP), return_inverse=inverse, return_counts=counts)
    want = np.unique(DUP, return_inverse=inverse, return_counts=counts)
    got, want = (got, want) if inverse or counts else ((got,), (want,))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.asnumpy(), np.reshape(w, g.shape))
    assert got[0].dtype == ms.int32 and all(g.dtype == ms.int64 for g in got[1:])
    if inverse:
        assert got[1].shape == DUP.shape


def test_unique_along_a_dimension():
    values, inverse, counts = mint.unique(Tensor(DUP), return_inverse=True, return_counts=True,
                                          dim=0)
    want, w_inv, w_counts = np.unique(DUP, return_inverse=True, return_counts=True, axis=0)
    np.testing.assert_array_equal(values.asnumpy(), want)
    np.testing.assert_array_equal(inverse.asnumpy(), w_inv.ravel())
    np.testing.assert_array_equal(counts.asnumpy(), w_counts)
    cols = mint.unique(Tensor(DUP), dim=1)
    np.testing.assert_array_equal(cols.asnumpy(), np.unique(DUP, axis=1))


def test_bincount_counts_and_weights():
    x = RNG.integers(0, 6, 20)
    w = RNG.standard_normal(20).astype(np.float32)
    got = mint.bincount(Tensor(x.astype(np.int32)))
    np.testing.assert_array_equal(got.asnumpy(), np.bincount(x))
    assert got.dtype == ms.int64
    got = mint.bincount(Tensor(x), Tensor(w), minlength=9)
    np.testing.assert_allclose(got.asnumpy(), np.bincount(x, w, 9), rtol=1e-5, atol=1e-5)
    assert got.dtype == ms.float32 and got.shape == (9,)
    with pytest.raises(ValueError, match="bincount"):
        mint.bincount(Tensor(np.array([1, -1])))
    with pytest.raises(ValueError, match="bincount"):
        mint.bincount(Tensor(np.ones((2, 2), np.int32)))


def test_allclose_is_one_bool():
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    assert mint.allclose(Tensor(a), Tensor(a + 1e-7)) is True
    assert mint.allclose(Tensor(a), Tensor(a + 1e-2)) is False
    nan = Tensor(np.array([np.nan, 1.0], np.float32))
    assert mint.allclose(nan, nan) is False and mint.allclose(nan, nan, equal_nan=True) is True


def test_kthvalue_range_and_scalar():
    with pytest.raises(RuntimeError, match="kthvalue"):
        mint.kthvalue(Tensor(np.ones((2, 3), np.float32)), 4)
    v, i = mint.kthvalue(Tensor(np.float32(2.5)), 1)
    assert v.shape == () and float(v) == 2.5 and int(i) == 0


@pytest.mark.parametrize("call,match", [
    (lambda: mint.dot(Tensor(np.ones((2, 2))), Tensor(np.ones((2, 2)))), "dot"),
    (lambda: mint.vdot(Tensor(np.ones(2)), Tensor(np.ones((1, 2)))), "vdot"),
    (lambda: mint.diag(Tensor(np.ones((2, 2, 2)))), "diag"),
    (lambda: mint.norm(Tensor(np.ones((2, 2))), "max"), "norm"),
    (lambda: mint.index_add(Tensor(np.ones((2, 3))), 1, Tensor(np.array([0, 1])),
                            Tensor(np.ones((2, 3)))), "index_add"),
])
def test_bad_arguments_raise_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_randint_and_randint_like():
    a = mint.randint(5, (200,))
    b = mint.randint(-3, 3, (4, 50), dtype=ms.int32)
    assert a.dtype == ms.int64 and a.shape == (200,)
    assert b.dtype == ms.int32 and b.shape == (4, 50)
    assert set(np.unique(a.asnumpy())) == set(range(5))
    assert b.asnumpy().min() >= -3 and b.asnumpy().max() < 3
    like = mint.randint_like(Tensor(np.zeros((3, 40), np.float32)), 2, 4)
    assert like.dtype == ms.float32 and like.shape == (3, 40)
    assert set(np.unique(like.asnumpy())) == {2.0, 3.0}
    with pytest.raises(TypeError, match="randint"):
        mint.randint(5)


def test_randperm_multinomial_bernoulli():
    p = mint.randperm(30)
    assert p.dtype == ms.int64 and sorted(p.asnumpy()) == list(range(30))
    assert mint.randperm(5, dtype=ms.int32).dtype == ms.int32
    m = mint.multinomial(Tensor(np.array([0.0, 1.0, 1.0, 0.0], np.float32)), 2)
    assert m.dtype == ms.int64 and sorted(m.asnumpy()) == [1, 2]  # no replacement by default
    probs = np.array([0.0, 1.0, 0.0, 1.0], np.float32)
    np.testing.assert_array_equal(mint.bernoulli(Tensor(probs)).asnumpy(), probs)
    half = mint.bernoulli(Tensor(np.full(4000, 0.5, np.float32))).asnumpy()
    assert set(np.unique(half)) == {0.0, 1.0} and 0.4 < half.mean() < 0.6


def test_normal_forms():
    a = mint.normal(2.0, 0.5, (20000,)).asnumpy()
    assert a.dtype == np.float32 and abs(a.mean() - 2.0) < 0.05 and abs(a.std() - 0.5) < 0.05
    mean = Tensor(np.array([[-100.0], [100.0]], np.float32))
    b = mint.normal(mean, Tensor(np.full((1, 3000), 0.1, np.float32)))
    assert b.shape == (2, 3000)
    np.testing.assert_allclose(b.asnumpy().mean(1), [-100, 100], atol=0.05)
    c = mint.normal(mean)
    assert c.shape == (2, 1)
    with pytest.raises(TypeError, match="normal"):
        mint.normal(0.0, 1.0)


def test_like_and_empty_creation():
    x = Tensor(np.ones((2, 3), np.int32))
    r = mint.rand_like(Tensor(np.ones((2, 3), np.float32)))
    assert r.shape == (2, 3) and r.dtype == ms.float32
    assert 0 <= r.asnumpy().min() and r.asnumpy().max() < 1
    assert mint.randn_like(x, dtype=ms.float32).dtype == ms.float32
    e = mint.empty(2, 3)
    assert e.shape == (2, 3) and e.dtype == ms.float32
    assert mint.empty((4,), dtype=ms.int32).dtype == ms.int32
    assert mint.empty([1, 2]).shape == (1, 2)
    el = mint.empty_like(x)
    assert el.shape == (2, 3) and el.dtype == ms.int32
    assert mint.empty_like(x, dtype=ms.float16).dtype == ms.float16


def _random_shapes(x):
    return (mint.rand_like(x), mint.randn_like(x), mint.randint_like(x, 7),
            mint.bernoulli(mint.mul(x, 0.0)), mint.empty_like(x), mint.empty(2, 5))


def test_random_and_empty_compile():
    x = Tensor(np.ones((2, 5), np.float32))
    eager = _random_shapes(x)
    graph = ms.jit(_random_shapes)(x)
    for e, g in zip(eager, graph):
        assert e.shape == g.shape == (2, 5) and e.dtype == g.dtype == ms.float32
    np.testing.assert_array_equal(graph[3].asnumpy(), 0.0)
    np.testing.assert_array_equal(graph[5].asnumpy(), 0.0)
    assert graph[2].asnumpy().min() >= 0 and graph[2].asnumpy().max() < 7


def test_kthvalue_and_median_compile_like_eager():
    x = Tensor(RNG.standard_normal((4, 5)).astype(np.float32))
    assert_same_in_both_modes(lambda t: mint.kthvalue(t, 3, 0), x)
    assert_same_in_both_modes(lambda t: mint.median(t), x)


def test_conv2d_is_the_functional_one():
    from kiln.mint.nn import functional  # noqa: PLC0415
    assert mint.conv2d is functional.conv2d


def _unique_all(x):
    return mint.unique(x, return_inverse=True, return_counts=True)


def test_unique_compiles_like_eager():
    assert_same_in_both_modes(_unique_all, Tensor(DUP))


def test_unique_of_many_values_with_nans_in_both_modes():
    # Sorting, not comparing every pair: 200,000 values with 1,000 distinct. NaNs are distinct
    # from each other (PyTorch's rule): each is a value of its own, counted once.
    x = RNG.integers(0, 1000, 200_000).astype(np.float32)
    x[[5, 70_000, 199_999]] = np.nan
    finite = np.unique(x[~np.isnan(x)], return_inverse=True, return_counts=True)
    want_values = np.concatenate([finite[0], [np.nan] * 3])
    want_inverse = np.empty(x.shape, np.int64)
    want_inverse[~np.isnan(x)] = finite[1].ravel()
    want_inverse[[5, 70_000, 199_999]] = len(finite[0]) + np.arange(3)
    want_counts = np.concatenate([finite[2], [1, 1, 1]])
    for got in (_unique_all(Tensor(x)), ms.jit(_unique_all)(Tensor(x))):
        np.testing.assert_array_equal(got[0].asnumpy(), want_values)
        np.testing.assert_array_equal(got[1].asnumpy(), want_inverse)
        np.testing.assert_array_equal(got[2].asnumpy(), want_counts)


def test_ops_unique_of_many_values_keeps_first_appearance_order():
    x = RNG.integers(-500, 500, 100_000).astype(np.int32)
    values, idx = ms.ops.unique(Tensor(x))
    first = np.sort(np.unique(x, return_index=True)[1])
    np.testing.assert_array_equal(values.asnumpy(), x[first])
    np.testing.assert_array_equal(values.asnumpy()[idx.asnumpy()], x)


def _consecutive_all(x):
    return ms.ops.unique_consecutive(x, return_inverse=True, return_counts=True)


def test_unique_consecutive_counts_runs_in_both_modes():
    x = np.array([1, 1, 2, 2, 2, 3, 1, 1, 7], np.int32)
    for values, inverse, counts in (_consecutive_all(Tensor(x)),
                                    ms.jit(_consecutive_all)(Tensor(x))):
        np.testing.assert_array_equal(values.asnumpy(), [1, 2, 3, 1, 7])
        np.testing.assert_array_equal(inverse.asnumpy(), [0, 0, 1, 1, 1, 2, 3, 3, 4])
        np.testing.assert_array_equal(counts.asnumpy(), [2, 3, 1, 2, 1])
    empty = _consecutive_all(Tensor(np.zeros(0, np.float32)))
    assert [t.shape for t in empty] == [(0,), (0,), (0,)]
