"""MultitypeFuncGraph, HyperMap and Map (ops.composite), AddN/addn, the Split primitive and the
sequence predicates F.is_sequence_value_unknown / F.is_sequence_shape_unknown, in PyNative and
in compiled code, against NumPy or plain Python."""

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn, ops
from kiln.ops import composite as C
from kiln.ops import functional as F
from kiln.ops import operations as P


def arr(*values):
    return np.array(values, np.float32)


# ---- MultitypeFuncGraph ----
scale = C.MultitypeFuncGraph("scale")


@scale.register("Tensor", "Number")
def _scale_tensor(x, factor):
    if factor > 1:  # compiled from source: Python control flow on a constant
        return x * factor
    return x - 1


@scale.register("Number", "Number")
def _scale_number(x, factor):
    return x * factor + 1000


@scale.register("Tensor", "Tensor")
def _scale_by_tensor(x, factor):
    if factor.sum() > 0:  # a tensor condition: only compiled code can branch on it in a graph
        return x * factor
    return x


@scale.register("Tuple", "Number")
def _scale_tuple(xs, factor):
    return len(xs) * factor


@scale.register("String", "None")
def _scale_string(text, _none):
    return text + "!"


def test_multitype_dispatches_by_type_in_pynative():
    x = Tensor(arr(1, 2))
    np.testing.assert_allclose(scale(x, 3).asnumpy(), [3, 6])
    np.testing.assert_allclose(scale(x, 0.5).asnumpy(), [0, 1])  # a float is a Number
    assert scale(2, 3) == 1006 and scale(True, 2) == 1002  # a bool is a Number too
    assert scale((1, 2, 3), 2) == 6
    assert scale("a", None) == "a!"
    assert ops.MultitypeFuncGraph is C.MultitypeFuncGraph


def test_multitype_dispatches_by_compile_time_type_under_jit():
    @ms.jit
    def f(x):
        return scale(x, 3), scale(x, 1), scale(2, 3), scale((x, x), 2), scale(x, x), scale(x, -x)

    x = Tensor(arr(1, 2))
    by_tensor, below, number, count, squared, kept = f(x)
    np.testing.assert_allclose(squared.asnumpy(), [1, 4])
    np.testing.assert_allclose(kept.asnumpy(), [1, 2])
    np.testing.assert_allclose(by_tensor.asnumpy(), [3, 6])
    np.testing.assert_allclose(below.asnumpy(), [0, 1])
    assert (number, count) == (1006, 4)


def test_multitype_in_a_graph_mode_cell():
    class Net(nn.Cell):
        def construct(self, x, y):
            return scale(x, 2) + scale(y, 2)

    ms.set_context(mode=ms.GRAPH_MODE)
    out = Net()(Tensor(arr(1, 2)), Tensor(arr(3, 4)))
    np.testing.assert_allclose(out.asnumpy(), [8, 12])


def test_multitype_without_a_match_is_a_value_error_in_both_modes():
    with pytest.raises(ValueError, match=r"'scale'.*\(Tensor, String\)"):
        scale(Tensor(arr(1)), "text")

    class Number:  # a user class named like a MindSpore type is not that type
        pass

    with pytest.raises(ValueError, match=r"\(Number object, Int\)"):
        scale(Number(), 2)
    with pytest.raises(ValueError, match="no function registered"):
        ms.jit(lambda x: scale(x, ("text",)))(Tensor(arr(1)))

    class Net(nn.Cell):
        def construct(self, x):
            add = ops.MultitypeFuncGraph("add")  # made inside the graph, nothing registered
            return add(x, 1)

    ms.set_context(mode=ms.GRAPH_MODE)
    with pytest.raises(ValueError, match="'add'"):
        Net()(Tensor(arr(1)))


def test_multitype_registration_is_checked():
    fg = C.MultitypeFuncGraph("fg")
    with pytest.raises(ValueError, match="unknown type name 'Tensr'"):
        fg.register("Tensr")
    with pytest.raises(TypeError, match="type names as str"):
        fg.register(int)
    fg.register("RowTensor")(lambda x: x)  # a MindSpore name kiln has no values of: never matches
    with pytest.raises(ValueError, match="no function registered"):
        fg(Tensor(arr(1)))


# ---- HyperMap and Map ----
add_one = C.MultitypeFuncGraph("add_one")


@add_one.register("Tensor", "Tensor")
def _add_tensors(x, y):
    return x + y


@add_one.register("Number", "Tensor")
def _add_number(x, y):
    return y * x


def _hyper_map_sum(x, y):
    hyper = C.HyperMap()
    return hyper(add_one, (x, (y, 2.0)), (y, (x, x)))


@pytest.mark.parametrize("compiled", [False, True])
def test_hyper_map_recurses_into_nested_tuples(compiled):
    x, y = Tensor(arr(1, 2)), Tensor(arr(10, 20))
    fn = ms.jit(_hyper_map_sum) if compiled else _hyper_map_sum
    first, (second, third) = fn(x, y)
    np.testing.assert_allclose(first.asnumpy(), [11, 22])
    np.testing.assert_allclose(second.asnumpy(), [11, 22])
    np.testing.assert_allclose(third.asnumpy(), [2, 4])


@pytest.mark.parametrize("compiled", [False, True])
def test_hyper_map_with_a_fixed_op_keeps_lists_as_lists(compiled):
    def fn(a, b):
        return C.HyperMap(F.partial(add_one, 3.0))([a, [b]])

    a, b = Tensor(arr(1)), Tensor(arr(2))
    out = (ms.jit(fn) if compiled else fn)(a, b)
    assert isinstance(out, list) and isinstance(out[1], list)
    np.testing.assert_allclose(out[0].asnumpy(), [3])
    np.testing.assert_allclose(out[1][0].asnumpy(), [6])


def _scale(k, x):
    return x * k


@pytest.mark.parametrize("compiled", [False, True])
def test_partial_primitive_fixes_leading_arguments_for_map(compiled):
    def fn(a, b):
        return C.Map()(P.Partial()(_scale, 3.0), (a, b))

    a, b = Tensor(arr(1, 2)), Tensor(arr(5))
    out = (ms.jit(fn) if compiled else fn)(a, b)
    np.testing.assert_allclose(out[0].asnumpy(), [3, 6])
    np.testing.assert_allclose(out[1].asnumpy(), [15])
    assert ops.Partial is P.Partial
    with pytest.raises(TypeError, match="Partial: func must be callable"):
        P.Partial()(3, a)


class Clip(nn.Cell):
    """MindSpore's optimizer idiom: a HyperMap attribute over the gradients in construct."""

    def __init__(self):
        super().__init__()
        self.hyper_map = C.HyperMap()

    def construct(self, grads):
        return self.hyper_map(F.partial(_clip_one, 1.5), grads)


def _clip_one(limit, g):
    return ops.clamp(g, -limit, limit)


def test_hyper_map_in_a_graph_mode_cell_runs_user_functions_compiled():
    grads = (Tensor(arr(-3, 1)), Tensor(arr(2, 0.5)))
    eager = Clip()(grads)
    ms.set_context(mode=ms.GRAPH_MODE)
    net = Clip()
    compiled = net(grads)
    compiles = ms.get_jit_stats()["compiles"]
    net(grads)
    assert ms.get_jit_stats()["compiles"] == compiles  # the HyperMap attribute is no recompile
    for e, c, ref in zip(eager, compiled, ([-1.5, 1], [1.5, 0.5])):
        np.testing.assert_allclose(e.asnumpy(), ref)
        np.testing.assert_allclose(c.asnumpy(), ref)


def test_hyper_map_reverse_evaluates_backwards_and_keeps_order():
    seen = []

    def record(v):
        seen.append(v)
        return v * 10

    assert C.HyperMap(record, reverse=True)((1, 2, 3)) == (10, 20, 30)
    assert seen == [3, 2, 1]


def test_hyper_map_and_map_reject_mismatched_sequences():
    hyper = C.HyperMap()
    with pytest.raises(ValueError, match="same length.*2 items.*1"):
        hyper(lambda a, b: a, (1, 2), (3,))
    with pytest.raises(TypeError, match="all be tuples or all be lists"):
        hyper(lambda a, b: a, (1, 2), [3, 4])
    with pytest.raises(TypeError, match="must be callable"):
        hyper(3, (1,))
    with pytest.raises(TypeError, match="Map: the arguments to map over"):
        C.Map()(lambda a: a, 1)


@pytest.mark.parametrize("compiled", [False, True])
def test_map_goes_one_level_deep(compiled):
    def fn(x):
        return C.Map()(lambda pair, k: (pair[0] * k, len(pair)), ((x, x), (x,)), (2.0, 3.0))

    x = Tensor(arr(1, 2))
    (first, n1), (second, n2) = (ms.jit(fn) if compiled else fn)(x)
    np.testing.assert_allclose(first.asnumpy(), [2, 4])
    np.testing.assert_allclose(second.asnumpy(), [3, 6])
    assert (n1, n2) == (2, 1)


# ---- AddN / addn ----
@pytest.mark.parametrize("compiled", [False, True])
def test_addn_sums_a_sequence_like_numpy(compiled):
    rng = np.random.default_rng(0)
    values = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(4)]

    def fn(a, b, c, d):
        return ops.addn([a, b, c, d]), P.AddN()((a, b)), ops.AddN()((c,))

    out = (ms.jit(fn) if compiled else fn)(*map(Tensor, values))
    np.testing.assert_allclose(out[0].asnumpy(), sum(values), rtol=1e-6)
    np.testing.assert_allclose(out[1].asnumpy(), values[0] + values[1], rtol=1e-6)
    np.testing.assert_allclose(out[2].asnumpy(), values[2])


def test_addn_checks_its_input():
    with pytest.raises(ValueError, match=r"addn: .*x\[1\] is Float32\(3,\)"):
        ops.addn([Tensor(arr(1, 2)), Tensor(arr(1, 2, 3))])
    with pytest.raises(ValueError, match="addn: all tensors must have one shape and dtype"):
        ops.addn((Tensor(arr(1)), Tensor(np.array([1], np.int32))))
    with pytest.raises(ValueError, match="at least one"):
        ops.addn([])
    with pytest.raises(TypeError, match=r"addn: x\[0\] must be a Tensor"):
        ops.addn([1, 2])
    with pytest.raises(TypeError, match="tuple or list"):
        ops.addn(Tensor(arr(1)))


# ---- Split ----
@pytest.mark.parametrize("compiled", [False, True])
def test_split_primitive_makes_equal_parts(compiled):
    x_np = np.arange(24, dtype=np.float32).reshape(4, 2, 3)

    def fn(x):
        return P.Split(axis=0, output_num=4)(x), ops.Split(axis=-1, output_num=3)(x)

    rows, cols = (ms.jit(fn) if compiled else fn)(Tensor(x_np))
    assert isinstance(rows, tuple) and len(rows) == 4 and len(cols) == 3
    for got, ref in zip(rows + cols, np.split(x_np, 4, 0) + np.split(x_np, 3, -1)):
        np.testing.assert_array_equal(got.asnumpy(), ref)


def test_split_primitive_checks_its_arguments():
    with pytest.raises(ValueError, match="size 3, not a multiple of output_num 2"):
        P.Split(1, 2)(Tensor(np.ones((2, 3), np.float32)))
    with pytest.raises(ValueError, match="axis 2 is out of range for shape"):
        P.Split(2, 1)(Tensor(np.ones((2, 3), np.float32)))
    with pytest.raises(ValueError, match="output_num must be positive"):
        P.Split(0, 0)
    with pytest.raises(TypeError, match="Split"):
        P.Split(0.5, 1)


# ---- sequence predicates ----
def test_sequence_predicates_at_compile_time():
    @ms.jit
    def f(x, n):
        dynamic = ms.mutable([1, 2], True)
        fixed = ms.mutable((1, 2))
        return (F.is_sequence_value_unknown((x, 1)), F.is_sequence_value_unknown((1, 2)),
                F.is_sequence_value_unknown([[n]]), F.is_sequence_value_unknown(fixed),
                F.is_sequence_shape_unknown(dynamic), F.is_sequence_shape_unknown(fixed),
                F.is_sequence_shape_unknown((x,)))

    out = f(Tensor(arr(1)), ms.mutable(2))
    assert out == (True, False, True, True, True, False, False)


def test_sequence_shape_unknown_of_an_argument_is_part_of_the_cache_key():
    f = ms.jit(lambda seq: (F.is_sequence_shape_unknown(seq), seq[0] + seq[1]))
    x = Tensor(arr(1, 2))
    unknown, total = f(ms.mutable([x, x], True))
    assert unknown is True
    np.testing.assert_allclose(total.asnumpy(), [2, 4])
    assert f(ms.mutable([x, x]))[0] is False  # same types, not declared dynamic: recompiled
    assert f(ms.mutable([x, x], True))[0] is True


def test_sequence_predicates_outside_compiled_code_and_bad_input():
    assert not F.is_sequence_value_unknown((Tensor(arr(1)), ms.mutable(2)))
    assert not F.is_sequence_shape_unknown(ms.mutable([1, 2], True))
    with pytest.raises(TypeError, match="is_sequence_shape_unknown: x must be a tuple or list"):
        F.is_sequence_shape_unknown(3)
    with pytest.raises(TypeError, match="is_sequence_value_unknown"):
        ms.jit(lambda x: F.is_sequence_value_unknown(x))(Tensor(arr(1)))
