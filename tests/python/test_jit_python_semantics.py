"""Python semantics compiled code keeps, as PyNative has them: isinstance, super(Cls, self),
raise's arguments, builtins' results, bound methods, grad's aux outputs, assert, in, round."""

import numpy as np
import pytest
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Parameter, Tensor, nn


def t(*values):
    return Tensor(np.array(values, np.float32))


# ---- isinstance and super ----
class Scaled(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(t(2.0, 3.0), name="w")
        self.act = nn.ReLU()

    def construct(self, x):
        checks = (
            isinstance(self.w, Parameter),
            isinstance(self.w, Tensor),
            isinstance(x, Parameter),
            isinstance(self, Scaled),
            isinstance(self, nn.Cell),
            isinstance(self.act, (Scaled, nn.ReLU)),
            isinstance(self.act, Scaled),
        )
        return checks, self.w * x


class Base(nn.Cell):
    def shift(self, x):
        return x + 1.0


class Derived(Base):
    def shift(self, x):
        return x * 10.0

    def construct(self, x):
        return super(Derived, self).shift(x), super().shift(x), self.shift(x)  # noqa: UP008


SCALED, DERIVED = Scaled(), Derived()


def run_scaled(x):
    return SCALED(x)


def run_derived(x):
    return DERIVED(x)


def test_isinstance_sees_parameters_and_cell_classes_in_both_modes():
    checks, _ = assert_same_in_both_modes(run_scaled, t(1.0, 1.0))
    assert checks == (True, True, False, True, True, True, False)


def test_two_argument_super_in_both_modes():
    graph = assert_same_in_both_modes(run_derived, t(1.0, 2.0))
    np.testing.assert_allclose(graph[0].asnumpy(), [2.0, 3.0])


def test_super_with_a_class_the_object_is_not_an_instance_of_is_a_type_error():
    class Other(nn.Cell):
        def construct(self, x):
            return super(Derived, self).shift(x)

    other = Other()
    with pytest.raises(TypeError, match="super"):
        ms.jit(lambda x: other(x))(t(1.0))


def is_int(n):
    return isinstance(n, int), isinstance(ms.mutable(3), int), isinstance(n, Tensor)


def test_isinstance_of_mutable_numbers_in_both_modes():
    assert assert_same_in_both_modes(is_int, ms.mutable(2)) == (True, True, False)


# ---- raise E(a, b) ----
class StepError(Exception):
    pass


def raises_always(x):
    raise ValueError("bad value", 2)


def raises_when_large(x, limit):
    if x.sum() > limit:
        raise StepError("too large", x.sum(), limit)
    if x.sum() < 0:
        raise KeyError
    return x


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_raise_carries_python_arguments(mode):
    run = (lambda f: f) if mode == "eager" else ms.jit
    with pytest.raises(ValueError) as info:
        run(raises_always)(t(1.0))
    assert info.value.args == ("bad value", 2)
    with pytest.raises(StepError) as info:
        run(raises_when_large)(t(4.0), 3)
    assert info.value.args[0] == "too large" and info.value.args[2] == 3
    # A tensor argument: the tensor in PyNative, the text of its value from a compiled graph.
    assert "4" in str(info.value.args[1])
    with pytest.raises(KeyError) as info:
        run(raises_when_large)(t(-1.0), 3)
    assert info.value.args == ()


# ---- lazy builtins returned from a graph ----
def lazy_results(x):
    return (map(lambda a: a * 2, (1, 2)), zip((1, 2), (x, x)), range(3),
            [enumerate((5, 6))], {"f": filter(lambda a: a > 1, (1, 2, 3))}, reversed((1, 2)))


def test_lazy_builtins_returned_from_a_graph_are_tuples():
    out = ms.jit(lazy_results)(t(1.0))
    doubled, zipped, numbers, [pairs], named, backwards = out
    assert doubled == (2, 4) and numbers == (0, 1, 2) and backwards == (2, 1)
    assert pairs == ((0, 5), (1, 6)) and named == {"f": (2, 3)}
    assert type(zipped) is tuple and zipped[1][0] == 2
    assert all(isinstance(v, Tensor) for v in (zipped[0][1], zipped[1][1]))
    np.testing.assert_allclose(zipped[0][1].asnumpy(), [1.0])


# ---- jit of a bound method ----
def test_jit_of_a_cell_s_bound_construct_matches_the_cell():
    net = Scaled()
    jitted = ms.jit(net.construct)
    checks, out = jitted(t(1.0, 2.0))
    assert checks == (True, True, False, True, True, True, False)
    np.testing.assert_allclose(out.asnumpy(), [2.0, 6.0])
    net.w.set_data(t(5.0, 5.0))  # a Parameter stays a graph input: no stale value
    np.testing.assert_allclose(jitted(t(1.0, 2.0))[1].asnumpy(), [5.0, 10.0])
    np.testing.assert_allclose(ms.jit(DERIVED.construct)(t(1.0))[0].asnumpy(), [2.0])


def test_jit_of_a_bound_method_inside_a_graph():
    inner = ms.jit(DERIVED.construct)
    graph = assert_same_in_both_modes(lambda x: inner(x)[2], t(1.0, 2.0))
    np.testing.assert_allclose(graph.asnumpy(), [10.0, 20.0])


# ---- grad(..., has_aux=True) ----
def loss_and_aux(x, y):
    return (x * y).sum(), x + y


def loss_and_two_aux(x, y):
    return (x * y).sum(), x + y, x * 2.0


def grads_with_aux(x, y):
    return ms.grad(loss_and_aux, grad_position=(0, 1), has_aux=True)(x, y)


def grads_with_two_aux(x, y):
    return ms.grad(loss_and_two_aux, has_aux=True)(x, y)


def test_grad_has_aux_returns_the_aux_outputs_as_a_tuple_in_both_modes():
    x, y = t(1.0, 2.0), t(3.0, 4.0)
    (gx, gy), aux = assert_same_in_both_modes(grads_with_aux, x, y)
    np.testing.assert_allclose(gx.asnumpy(), [3.0, 4.0])
    np.testing.assert_allclose(gy.asnumpy(), [1.0, 2.0])
    assert isinstance(aux, tuple) and len(aux) == 1  # one aux output: still a tuple
    np.testing.assert_allclose(aux[0].asnumpy(), [4.0, 6.0])
    gx, aux = assert_same_in_both_modes(grads_with_two_aux, x, y)
    assert len(aux) == 2
    np.testing.assert_allclose(aux[1].asnumpy(), [2.0, 4.0])


def test_aux_outputs_do_not_contribute_to_an_outer_gradient():
    def outer(x):
        _, (aux,) = ms.grad(loss_and_aux, has_aux=True)(x, t(3.0, 4.0))
        return aux.sum()

    np.testing.assert_allclose(ms.grad(outer)(t(1.0, 2.0)).asnumpy(), [0.0, 0.0])


# ---- assert and `in` act when the graph runs ----
def checked_double(x):
    assert x.sum() > 0, "the sum must be positive"
    return x * 2.0


def test_assert_on_a_tensor_is_checked_each_time_the_graph_runs():
    fn = ms.jit(checked_double)
    np.testing.assert_allclose(fn(t(1.0, 2.0)).asnumpy(), [2.0, 4.0])
    for _ in range(2):  # the same compiled graph: the condition is a run-time value
        with pytest.raises(AssertionError, match="the sum must be positive"):
            fn(t(-1.0, -2.0))
    assert len(fn.variants()) == 1


def membership(x, a, b):
    return (x in (a, b), x not in [a, b], 3.0 in x, 7.0 not in x, x in (x, a),
            2 in (1, 2), a.sum() in (b.sum(), 3.0))


@pytest.mark.parametrize("x", [t(3.0), t(5.0), t(6.0)])
def test_in_on_graph_values_in_both_modes(x):
    assert_same_in_both_modes(membership, x, t(5.0), t(6.0))


def test_in_is_decided_when_the_graph_runs():
    fn = ms.jit(lambda x, a: ms.ops.where(x in (a,), x, -x))
    np.testing.assert_allclose(fn(t(2.0), t(2.0)).asnumpy(), [2.0])
    np.testing.assert_allclose(fn(t(3.0), t(2.0)).asnumpy(), [-3.0])
    assert 2.0 in t(1.0, 2.0) and 5.0 not in t(1.0, 2.0)  # NumPy's rule in PyNative


def test_in_on_tensors_of_several_elements_is_an_error_in_both_modes():
    with pytest.raises(ValueError, match="ambiguous"):
        membership(t(1.0, 2.0), t(1.0, 3.0), t(4.0, 5.0))
    with pytest.raises(ValueError, match="ambiguous"):  # MindSpore's type, as in PyNative
        ms.jit(membership)(t(1.0, 2.0), t(1.0, 3.0), t(4.0, 5.0))


# ---- round(tensor) ----
def rounded(x):
    return round(x), round(x, 1), ms.ops.round(x)


def test_round_of_a_tensor_is_a_tensor_rounded_half_to_even_in_both_modes():
    values = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4, 2.6, -2.6, 1e8 + 0.5, 0.25],
                      np.float32)
    whole, tenths, via_ops = assert_same_in_both_modes(rounded, Tensor(values))
    np.testing.assert_array_equal(whole.asnumpy(), np.round(values))
    np.testing.assert_array_equal(via_ops.asnumpy(), np.round(values))
    np.testing.assert_allclose(tenths.asnumpy(), np.round(values, 1), rtol=1e-6)
    ints = Tensor(np.array([1, -2], np.int32))
    assert round(ints).dtype == ms.int32
    graph = assert_same_in_both_modes(lambda x: round(x), ints)
    np.testing.assert_array_equal(graph.asnumpy(), [1, -2])
