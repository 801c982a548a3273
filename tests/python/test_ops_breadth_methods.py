"""Primitive classes (math_ops.py) and Tensor methods (_tensor_breadth.py) of the ops added for
API breadth: each gives its functional op's result, in PyNative and compiled."""
import numpy as np
import pytest
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor, ops
from kiln.common import _tensor_breadth

F32 = np.float32
A = np.array([[3.0, -1.5, 2.0], [0.5, 4.0, -3.0]], F32)
B = np.array([[2.0, 2.0, -1.0], [1.5, -0.5, 2.5]], F32)


def both_modes(fn, *args):
    def run(*a):
        return fn(*a)

    return assert_same_in_both_modes(run, *args)


PRIMITIVES = [
    (ops.Mod(), np.fmod), (ops.FloorDiv(), np.floor_divide), (ops.FloorMod(), np.mod),
    (ops.TruncateDiv(), lambda a, b: np.trunc(a / b)), (ops.TruncateMod(), np.fmod),
    (ops.Atan2(), np.arctan2), (ops.Hypot(), np.hypot), (ops.LessEqual(), np.less_equal),
    (ops.GreaterEqual(), np.greater_equal), (ops.NotEqual(), np.not_equal),
    (ops.DivNoNan(), lambda a, b: np.where(b == 0, 0, a / np.where(b == 0, 1, b))),
    (ops.SquaredDifference(), lambda a, b: (a - b) ** 2),
    (ops.LogicalXor(), lambda a, b: np.logical_xor(a > 0, b > 0)),
]


@pytest.mark.parametrize("k", range(len(PRIMITIVES)))
def test_binary_primitives(k):
    prim, ref = PRIMITIVES[k]
    a, b = Tensor(A), Tensor(B)
    if "Logical" in type(prim).__name__:
        a, b = a > 0, b > 0
    got = both_modes(prim, a, b)
    np.testing.assert_allclose(got.asnumpy(), ref(A, B), rtol=1e-6, atol=1e-6)


UNARY_PRIMS = ["Reciprocal", "Inv", "Tan", "Asin", "ACos", "Atan", "Sinh", "Cosh", "Asinh",
               "Atanh", "Erf", "Erfc", "Erfinv", "Ceil", "Floor", "Trunc", "Sinc", "IsNan",
               "IsInf", "IsFinite", "Identity", "Round"]


@pytest.mark.parametrize("name", UNARY_PRIMS)
def test_unary_primitives_match_functional(name):
    x = Tensor(np.clip(A / 5, -0.9, 0.9))
    prim = getattr(ops, name)()
    fn = {"Inv": ops.reciprocal, "ACos": ops.acos, "Identity": lambda t: t,
          "IsNan": ops.isnan, "IsInf": ops.isinf, "IsFinite": ops.isfinite,
          "Round": ops.round}.get(name) or getattr(ops, name.lower())
    np.testing.assert_array_equal(both_modes(prim, x).asnumpy(), fn(x).asnumpy())


def test_configured_primitives():
    x = Tensor(A)
    v = Tensor(np.array([1.0, 2.0, 3.0, 4.0], F32))
    np.testing.assert_array_equal(ops.CumSum(exclusive=True)(v, 0).asnumpy(), [0, 1, 3, 6])
    np.testing.assert_array_equal(ops.CumSum(reverse=True)(v, 0).asnumpy(), [10, 9, 7, 4])
    np.testing.assert_array_equal(ops.CumSum(True, True)(v, 0).asnumpy(), [9, 7, 4, 0])
    np.testing.assert_array_equal(ops.CumProd(True, True)(v, 0).asnumpy(), [24, 12, 4, 1])
    values, idx = ops.Sort(descending=True)(v)
    assert values.asnumpy().tolist() == [4, 3, 2, 1] and idx.dtype == ms.int32
    values, idx = ops.TopK()(x, 2)
    np.testing.assert_array_equal(values.asnumpy(), -np.sort(-A, 1)[:, :2])
    idx, value = ops.ArgMinWithValue(1)(x)
    assert idx.dtype == ms.int64 and idx.asnumpy().tolist() == [1, 2]
    np.testing.assert_array_equal(value.asnumpy(), A.min(1))
    idx, value = ops.ArgMaxWithValue(0, True)(x)
    assert idx.shape == (1, 3) and value.asnumpy().tolist() == [[3.0, 4.0, 2.0]]
    assert ops.Argmin(output_type=ms.int64)(x).dtype == ms.int64
    assert ops.ReduceAll(keep_dims=True)(x > -2, 1).asnumpy().tolist() == [[True], [False]]
    assert ops.ReduceAny()(x > 3).asnumpy().item() is True
    np.testing.assert_allclose(ops.ReduceProd()(x, 1).asnumpy(), A.prod(1), rtol=1e-6)
    np.testing.assert_array_equal(ops.ReverseV2((1,))(x).asnumpy(), A[:, ::-1])
    np.testing.assert_array_equal(
        ops.StridedSlice(end_mask=2)(x, (0, 1), (2, 0), (1, 1)).asnumpy(), A[0:2, 1:])
    assert len(ops.Unstack(1)(x)) == 3
    assert ops.Meshgrid(indexing="ij")((v, v[:2]))[0].shape == (4, 2)
    np.testing.assert_array_equal(ops.BroadcastTo((2, 2, 3))(x).asnumpy(),
                                  np.broadcast_to(A, (2, 2, 3)))
    e, e_next = Tensor(np.eye(3, dtype=F32)), Tensor(np.eye(3, dtype=F32)[[1, 2, 0]])
    assert ops.Cross(dim=1)(e, e_next).asnumpy().tolist() == [[0, 0, 1], [1, 0, 0], [0, 1, 0]]
    assert ops.Cross()(e, e_next).asnumpy().tolist() == [[0, 0, -1], [-1, 0, 0], [0, -1, 0]]
    assert ops.Range()(Tensor(0), Tensor(5), Tensor(2)).asnumpy().tolist() == [0, 2, 4]
    assert ops.Shape()(x) == (2, 3) and ops.Rank()(x) == 2 and ops.Size()(x) == 6
    assert ops.TensorShape()(x).asnumpy().tolist() == [2, 3]
    assert ops.DType()(x) == ms.float32
    assert ops.Fill()(ms.int32, (2,), 3).asnumpy().tolist() == [3, 3]
    assert ops.Eye()(2, 3, ms.float32).shape == (2, 3)
    assert ops.IsClose(equal_nan=True)(x, x).asnumpy().all()
    assert ops.NanToNum(nan=2.0)(Tensor(np.array([np.nan], F32))).asnumpy().tolist() == [2.0]
    assert ops.Cummin(0)(x)[1].dtype == ms.int32
    assert ops.ApproximateEqual(0.6)(x, x + 0.5).asnumpy().all()
    np.testing.assert_allclose(ops.Cdist()(x, x).asnumpy(),
                               np.linalg.norm(A[:, None] - A[None], axis=-1), rtol=1e-6)


def test_assign_primitive_writes_the_parameter():
    p = ms.Parameter(Tensor(np.zeros(3, F32)), name="p")
    ops.Assign()(p, Tensor(np.ones(3, F32)))
    assert p.asnumpy().tolist() == [1.0, 1.0, 1.0]


def test_configured_primitive_refuses_unknown_arguments():
    with pytest.raises(TypeError, match="Sort"):
        ops.Sort(axis=0, stable=True)


# One method lambda per line: compiled code finds a lambda's source by its line.
METHODS = [
    ("flip", lambda x: x.flip((0,)),
     lambda x: ops.flip(x, (0,))),
    ("cumsum_none", lambda x: x.cumsum(),
     lambda x: ops.cumsum(ops.reshape(x, (-1,)), 0)),
    ("cumsum", lambda x: x.cumsum(1),
     lambda x: ops.cumsum(x, 1)),
    ("expand", lambda x: x.expand(2, 2, 3),
     lambda x: ops.broadcast_to(x, (2, 2, 3))),
    ("expand_tuple", lambda x: x.expand((2, 2, 3)),
     lambda x: ops.broadcast_to(x, (2, 2, 3))),
    ("trace", lambda x: x.trace(1),
     lambda x: ops.sum(ops.diagonal(x, 1))),
    ("searchsorted", lambda x: x[0].sort()[0].searchsorted(x),
     lambda x: ops.searchsorted(ops.sort(x[0])[0], x)),
    ("var", lambda x: x.var(1, 1),
     lambda x: ops.var(x, 1, 1)),
    ("tan", lambda x: x.tan(), ops.tan),
    ("atan2", lambda x: x.atan2(x * 2 - 1),
     lambda x: ops.atan2(x, x * 2 - 1)),
    ("sort", lambda x: x.sort(0, True),
     lambda x: ops.sort(x, 0, True)),
    ("topk", lambda x: x.topk(2),
     lambda x: ops.topk(x, 2)),
    ("movedim", lambda x: x.movedim(0, 1),
     lambda x: ops.movedim(x, 0, 1)),
    ("masked_fill", lambda x: x.masked_fill(x > 1, 0.0),
     lambda x: ops.masked_fill(x, x > 1, 0.0)),
    ("diagonal", lambda x: x.diagonal(), ops.diagonal),
    ("numel", lambda x: x.numel(), ops.numel),
    ("isclose", lambda x: x.isclose(x),
     lambda x: ops.isclose(x, x)),
]


@pytest.mark.parametrize("name,method,fn", METHODS, ids=[m[0] for m in METHODS])
def test_tensor_methods_match_functional_in_both_modes(name, method, fn):
    x = Tensor(A)
    got, want = both_modes(method, x), fn(x)
    for g, w in zip(got if isinstance(got, tuple) else [got],
                    want if isinstance(want, tuple) else [want]):
        np.testing.assert_allclose(np.asarray(g.asnumpy() if hasattr(g, "asnumpy") else g),
                                   np.asarray(w.asnumpy() if hasattr(w, "asnumpy") else w),
                                   rtol=1e-6)


def test_every_forwarded_method_exists_on_tensor_and_ops():
    for name in _tensor_breadth._FORWARDED:
        assert callable(getattr(ops, name)), name
        assert callable(getattr(Tensor, name)), name
