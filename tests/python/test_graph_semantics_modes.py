"""Issue #12's "no silent differences", each in PyNative, in ms.jit and in a Cell's construct
under GRAPH_MODE: bitwise operators, mask assignment, isinstance and super, raise's
arguments, lazy builtins, has_aux, assert and `in` at run time, round, and the three corners
(setitem through a global list, tensor default arguments, a rebound closure tensor)."""

import numpy as np
import pytest
from graph_check import in_three_modes

import kiln as ms
from kiln import Parameter, Tensor, nn

I32 = np.array([5, 12, -3, 0], np.int32)
J32 = np.array([3, 10, 6, 7], np.int32)
B1 = np.array([True, False, True, False])
B2 = np.array([True, True, False, False])


def _leaves(value):
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value.asnumpy() if isinstance(value, Tensor) else value]


def _same_everywhere(fn, *args):
    """fn's results in the three modes, checked equal to PyNative's; PyNative's result."""
    results = {mode: run() for mode, run in in_three_modes(fn, *args)}
    expected = _leaves(results["pynative"])
    for mode in ("jit", "cell"):
        got = _leaves(results[mode])
        assert len(got) == len(expected), mode
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e, err_msg=mode)
    return results["pynative"]


# ---- &, |, ^, ~, <<, >> ----
def bitwise(a, b):
    return a & b, a | b, a ^ b, ~a, a << 2, a >> 1, a & 3, 6 | a, 1 << b % 8


def test_bitwise_operators_on_integers_in_three_modes():
    out = _same_everywhere(bitwise, Tensor(I32), Tensor(J32))
    expected = (I32 & J32, I32 | J32, I32 ^ J32, ~I32, I32 << 2, I32 >> 1, I32 & 3, 6 | I32,
                1 << J32 % 8)
    for o, e in zip(out, expected):
        assert o.dtype == ms.int32
        np.testing.assert_array_equal(o.asnumpy(), e)


def logical(a, b):
    return a & b, a | b, a ^ b, ~a


def test_bitwise_operators_on_bools_are_logical_in_three_modes():
    out = _same_everywhere(logical, Tensor(B1), Tensor(B2))
    for o, e in zip(out, (B1 & B2, B1 | B2, B1 ^ B2, ~B1)):
        assert o.dtype == ms.bool_
        np.testing.assert_array_equal(o.asnumpy(), e)


# ---- y[mask] = v ----
def mask_assign(y, m, v):
    z = y * 1
    z[m] = 0.0
    w = y * 1
    w[m] = v
    u = y * 1
    u[m] += v
    return z, w, u


@pytest.mark.parametrize("v", [np.float32(9.0), np.array([7.0, 8.0], np.float32)])
def test_mask_assignment_with_a_number_and_a_tensor_in_three_modes(v):
    y = np.array([1.0, -2.0, 3.0, -4.0], np.float32)
    z, w, u = _same_everywhere(mask_assign, Tensor(y), Tensor(y < 0), Tensor(v))
    expected = y.copy(), y.copy(), y.copy()
    expected[0][y < 0] = 0.0
    expected[1][y < 0] = v
    expected[2][y < 0] += v
    for o, e in zip((z, w, u), expected):
        np.testing.assert_array_equal(o.asnumpy(), e)


# ---- isinstance, super ----
class Base(nn.Cell):
    def shift(self, x):
        return x + 1.0


class Weighted(Base):
    def __init__(self):
        super().__init__()
        self.w = Parameter(Tensor(np.array([2.0, 3.0], np.float32)), name="w")
        self.act = nn.ReLU()

    def shift(self, x):
        return x * 10.0

    def construct(self, x, n):
        checks = (isinstance(self.w, Parameter), isinstance(self.w, Tensor),
                  isinstance(x, Parameter), isinstance(self, Weighted), isinstance(self, Base),
                  isinstance(self.act, (Weighted, nn.ReLU)), isinstance(self.act, Weighted),
                  isinstance(n, int), isinstance(ms.mutable(4), int))
        return (checks, super(Weighted, self).shift(x), super().shift(x),  # noqa: UP008
                self.shift(x) * self.w)


WEIGHTED = Weighted()


def run_weighted(x, n):
    return WEIGHTED(x, n)


def test_isinstance_and_super_in_three_modes():
    x = Tensor(np.array([1.0, 2.0], np.float32))
    checks, two_args, no_args, own = _same_everywhere(run_weighted, x, ms.mutable(2))
    assert checks == (True, True, False, True, True, True, False, True, True)
    np.testing.assert_allclose(two_args.asnumpy(), [2.0, 3.0])
    np.testing.assert_allclose(no_args.asnumpy(), [2.0, 3.0])
    np.testing.assert_allclose(own.asnumpy(), [20.0, 60.0])


# ---- raise E(a, b) ----
class LimitError(Exception):
    pass


def check_limit(x, limit):
    if x.sum() > limit:
        raise LimitError("too large", limit, (1, "a"))
    return x


def test_raise_carries_python_arguments_in_three_modes():
    for mode, run in in_three_modes(check_limit, Tensor(np.float32(5.0)), 3):
        with pytest.raises(LimitError) as info:
            run()
        assert info.value.args == ("too large", 3, (1, "a")), mode


# ---- lazy builtins returned from a graph ----
def lazy(x):
    return (map(lambda a: a * 2, (1, 2)), zip((1, 2), (3, 4)), range(3), enumerate((5, 6)),
            filter(lambda a: a > 1, (1, 2, 3)), x)


def test_lazy_builtins_come_back_as_tuples_from_graphs():
    expected = ((2, 4), ((1, 3), (2, 4)), (0, 1, 2), ((0, 5), (1, 6)), (2, 3))
    for mode, run in in_three_modes(lazy, Tensor(np.float32(1.0))):
        out = run()[:-1]
        if mode == "pynative":  # Python's lazy objects, as MindSpore's PyNative keeps them
            out = tuple(tuple(v) for v in out)
        assert out == expected, mode


# ---- ms.jit(net.construct) ----
def test_jit_of_a_bound_construct_matches_the_cell():
    x = Tensor(np.array([1.0, 2.0], np.float32))
    eager = WEIGHTED(x, 2)
    jitted = ms.jit(WEIGHTED.construct)(x, 2)
    assert jitted[0] == eager[0]
    for a, b in zip(jitted[1:], eager[1:]):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy())


# ---- grad/value_and_grad with has_aux ----
def with_aux(x):
    return (x * x).sum(), x + 1, x * 0


def gradients(x):
    g, aux = ms.grad(with_aux, has_aux=True)(x)
    (value, *more), vg = ms.value_and_grad(with_aux, has_aux=True)(x)
    return g, aux, value, tuple(more), vg


def test_has_aux_returns_the_aux_outputs_in_three_modes():
    x = np.array([1.0, 2.0], np.float32)
    g, aux, value, more, vg = _same_everywhere(gradients, Tensor(x))
    np.testing.assert_allclose(g.asnumpy(), 2 * x)
    np.testing.assert_allclose(vg.asnumpy(), 2 * x)
    assert isinstance(aux, tuple) and len(aux) == 2
    np.testing.assert_allclose(aux[0].asnumpy(), x + 1)
    np.testing.assert_allclose(value.asnumpy(), 5.0)
    np.testing.assert_allclose(more[0].asnumpy(), x + 1)


# ---- assert and `in` at run time ----
def positive_only(x):
    assert x.sum() > 0, "the sum must be positive"
    return x * 2


def membership(x, a, b):
    return x in (a, b), 2.0 not in (a, b)


def test_assert_and_in_are_decided_each_run_in_three_modes():
    one = Tensor(np.float32(1.0))
    for mode, run in in_three_modes(positive_only, one):
        np.testing.assert_allclose(run().asnumpy(), 2.0, err_msg=mode)
    for mode, run in in_three_modes(positive_only, Tensor(np.float32(-1.0))):
        with pytest.raises(AssertionError, match="positive"):
            run()
            pytest.fail(f"no AssertionError in {mode}")
    for a, expected in ((1.0, (True, True)), (2.0, (False, False))):
        out = _same_everywhere(membership, one, Tensor(np.float32(a)), Tensor(np.float32(3.0)))
        assert tuple(bool(v) for v in out) == expected


# ---- round(tensor) ----
def rounded(x):
    return round(x), round(x, 1)


def test_round_of_a_tensor_in_three_modes():
    x = np.array([0.5, 1.5, 2.45, -0.5, -1.26], np.float32)
    whole, tenths = _same_everywhere(rounded, Tensor(x))
    np.testing.assert_array_equal(whole.asnumpy(), np.round(x))
    np.testing.assert_allclose(tenths.asnumpy(), np.round(x, 1), rtol=1e-6)


# ---- the three corners ----
BUFFERS = [Tensor(np.zeros(3, np.float32))]
DEFAULT = Tensor(np.ones(2, np.float32))


def write_through_a_global_list(x):
    BUFFERS[0][1] = x
    return BUFFERS[0] * 1


def test_setitem_through_a_global_list_writes_the_tensor_in_three_modes():
    for i, (mode, run) in enumerate(in_three_modes(write_through_a_global_list,
                                                   Tensor(np.float32(5.0)))):
        BUFFERS[0] = Tensor(np.full(3, float(i), np.float32))
        out = run()
        np.testing.assert_array_equal(out.asnumpy(), [i, 5.0, i], err_msg=mode)
        np.testing.assert_array_equal(BUFFERS[0].asnumpy(), [i, 5.0, i], err_msg=mode)


def add_default(x, b=DEFAULT):
    return x + b


def test_tensor_default_arguments_are_read_each_run_in_three_modes():
    x = Tensor(np.zeros(2, np.float32))
    for value in (1.0, 4.0):  # changed in place between runs: every mode sees it
        DEFAULT[0] = value
        out = _same_everywhere(add_default, x)
        np.testing.assert_array_equal(out.asnumpy(), [value, 1.0])


def make_scaler():
    scale = Tensor(np.ones(2, np.float32))

    def scaled(x):
        return x * scale

    def rebind(value):
        nonlocal scale
        scale = value

    return scaled, rebind


def test_rebinding_a_captured_tensor_is_seen_in_three_modes():
    scaled, rebind = make_scaler()
    x = Tensor(np.array([1.0, 2.0], np.float32))
    jitted = ms.jit(scaled)
    np.testing.assert_array_equal(jitted(x).asnumpy(), [1.0, 2.0])
    rebind(Tensor(np.full(2, 3.0, np.float32)))
    np.testing.assert_array_equal(jitted(x).asnumpy(), [3.0, 6.0])  # the same jitted function
    np.testing.assert_array_equal(_same_everywhere(scaled, x).asnumpy(), [3.0, 6.0])
