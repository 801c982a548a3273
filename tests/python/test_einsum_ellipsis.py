"""einsum with '...' (broadcast leading dims) in explicit and implicit mode against np.einsum,
its gradients by finite differences, and Graph mode."""
import numpy as np
import pytest
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes

from kiln import Tensor, ops

RNG = np.random.default_rng(3)

# (equation, operand shapes)
CASES = [
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk", [(2, 3, 4), (4, 5)]),  # implicit: '...' first, then the single labels
    ("...ij,jk->...ik", [(6, 1, 3, 4), (4, 2)]),
    ("b...i,b...i->b...", [(2, 3, 1, 4), (2, 1, 5, 4)]),  # broadcasting inside '...'
    ("i...->...", [(3, 2, 4)]),
    ("...->...", [(2, 3)]),
    ("ij...,jk...->ik...", [(2, 3), (3, 4)]),  # a '...' of no dims
    ("...i,...i", [(5, 3), (3,)]),
    ("a...b,...b->...a", [(2, 3, 4), (3, 4)]),
]


def arrays(shapes, dtype=np.float64):
    return [RNG.standard_normal(s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("eq,shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum_ellipsis_matches_numpy(eq, shapes):
    xs = arrays(shapes)
    got = ops.einsum(eq, *[Tensor(x) for x in xs])
    want = np.einsum(eq, *xs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("eq,shapes", CASES[:5], ids=[c[0] for c in CASES[:5]])
def test_einsum_ellipsis_gradients(eq, shapes):
    check_grad(lambda *ts: ops.einsum(eq, *ts), *arrays(shapes))


def test_einsum_sums_ellipsis_dims_the_output_omits():
    # MindSpore documents "...->" as the sum of all elements (NumPy refuses such an output)
    x = RNG.standard_normal((2, 3, 4))
    np.testing.assert_allclose(ops.einsum("...->", Tensor(x)).asnumpy(), x.sum())
    np.testing.assert_allclose(ops.einsum("...i->i", Tensor(x)).asnumpy(), x.sum((0, 1)))
    np.testing.assert_allclose(ops.einsum("i...,i...->i", Tensor(x), Tensor(x)).asnumpy(),
                               (x * x).sum((1, 2)))
    check_grad(lambda t: ops.einsum("...i->i", t), x)


def test_einsum_sublist_form():
    x, y = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 5))
    got = ops.einsum(Tensor(x), [Ellipsis, 0, 1], Tensor(y), [1, 2], [Ellipsis, 0, 2])
    np.testing.assert_allclose(got.asnumpy(), np.einsum(x, [Ellipsis, 0, 1], y, [1, 2],
                                                        [Ellipsis, 0, 2]), rtol=1e-12)
    implicit = ops.einsum(Tensor(x), [Ellipsis, 0, 1], Tensor(y), [1, 2])
    np.testing.assert_allclose(implicit.asnumpy(), np.einsum(x, [Ellipsis, 0, 1], y, [1, 2]),
                               rtol=1e-12)
    with pytest.raises(ValueError, match="sublist labels"):
        ops.einsum(Tensor(y), [0, 60])
    assert_same_in_both_modes(lambda a, b: ops.einsum(a, [Ellipsis, 0, 1], b, [1, 2]),
                              Tensor(x), Tensor(y))


def test_einsum_ellipsis_float32_and_graph_mode():
    xs = [Tensor(x) for x in arrays([(2, 3, 4), (2, 4, 5)], np.float32)]
    out = ops.einsum("...ij,...jk->...ik", *xs)
    assert out.dtype == xs[0].dtype
    assert_same_in_both_modes(lambda a, b: ops.einsum("...ij,...jk->...ik", a, b), *xs)
    assert_same_in_both_modes(lambda a, b: ops.einsum("...ij,...jk", a, b), *xs)


def test_einsum_ellipsis_errors():
    a = Tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match="invalid term"):
        ops.einsum("....i->i", a)
    with pytest.raises(ValueError, match="does not fit"):
        ops.einsum("...ijk->k", a)
    with pytest.raises(ValueError, match="invalid output"):
        ops.einsum("...i->......", a)
