"""Gradients of elementwise ops against finite differences, with broadcasting."""
import numpy as np
import pytest
from gradcheck import check_grad

import kiln as ms
from kiln import Tensor, ops

RNG = np.random.default_rng(1)


def rand(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape)


def away_from_zero(*shape):
    return RNG.uniform(0.5, 2.0, size=shape) * RNG.choice([-1, 1], size=shape)


BINARY = [
    ("add", ops.add, rand, rand), ("sub", ops.sub, rand, rand), ("mul", ops.mul, rand, rand),
    ("div", ops.div, rand, away_from_zero),
    ("pow", ops.pow, lambda *s: rand(*s, low=0.5, high=2.0), rand),
    ("maximum", ops.maximum, rand, rand), ("minimum", ops.minimum, rand, rand),
    ("remainder", ops.remainder, lambda *s: rand(*s, low=0.1, high=0.9),
     lambda *s: rand(*s, low=1.1, high=2.0)),
]
SHAPES = [((3, 4), (3, 4)), ((2, 3), (3,)), ((4, 1), (1, 5)), ((), (2, 2))]


@pytest.mark.parametrize("name,fn,make_a,make_b", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_binary_gradients(name, fn, make_a, make_b, shapes):
    check_grad(fn, make_a(*shapes[0]), make_b(*shapes[1]))


UNARY = [
    ("neg", ops.neg, rand), ("abs", ops.abs, away_from_zero), ("exp", ops.exp, rand),
    ("log", ops.log, lambda *s: rand(*s, low=0.2, high=3.0)),
    ("sqrt", ops.sqrt, lambda *s: rand(*s, low=0.2, high=3.0)),
    ("rsqrt", ops.rsqrt, lambda *s: rand(*s, low=0.2, high=3.0)),
    ("sin", ops.sin, rand), ("cos", ops.cos, rand), ("tanh", ops.tanh, rand),
    ("sigmoid", ops.sigmoid, rand), ("silu", ops.silu, rand), ("relu", ops.relu, away_from_zero),
    ("gelu", ops.gelu, rand), ("gelu_tanh", lambda x: ops.gelu(x, "tanh"), rand),
    ("square", ops.square, rand), ("clamp", lambda x: ops.clamp(x, -1.0, 1.0), away_from_zero),
    ("cast", lambda x: ops.cast(x, "float64") * 2.0, rand),
]


@pytest.mark.parametrize("name,fn,make", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("shape", [(5,), (2, 3), ()], ids=str)
def test_unary_gradients(name, fn, make, shape):
    check_grad(fn, make(*shape))


def test_cast_gradient_returns_to_the_input_dtype():
    x = Tensor(np.array([1.0, 2.0]))  # float64
    g = ms.grad(lambda t: ops.cast(t, ms.float32) * 3.0)(x)
    assert g.dtype == ms.float64
    np.testing.assert_array_equal(g.asnumpy(), [3.0, 3.0])


def test_where_gradient_routes_by_condition():
    c = Tensor(np.array([True, False, True]))
    check_grad(lambda x, y: ops.where(c, x, y), rand(3), rand(2, 3))


def test_promoted_operands_get_gradients_in_their_own_dtype():
    x16 = Tensor(np.array([1.0, 2.0], np.float16))
    y32 = Tensor(np.array([3.0, 4.0], np.float32))
    gx, gy = ms.grad(lambda a, b: a * b, (0, 1))(x16, y32)
    assert gx.dtype == ms.float16 and gy.dtype == ms.float32
    np.testing.assert_allclose(gx.asnumpy(), [3.0, 4.0])
    np.testing.assert_allclose(gy.asnumpy(), [1.0, 2.0])
