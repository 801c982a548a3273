"""Adversarial Graph-mode programs: each gives PyNative's result, or a clear error first."""
import numpy as np
import pytest
from graph_check import assert_same_in_both_modes as both

import kiln as ms
from kiln import Parameter, Tensor, nn, ops


def T(v, dtype=np.float32):
    return Tensor(np.array(v, dtype=dtype))


def graph_cell(make, *args):
    """make()(*args) in PyNative and in GRAPH_MODE: (eager result, graph result, cells)."""
    eager_cell = make()
    eager = eager_cell(*args)
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        graph_cell_ = make()
        graph = graph_cell_(*args)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    return eager, graph, eager_cell, graph_cell_


def close(a, b):
    np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-6)


# ---- results that are None ----
def returns_none(x):
    x + 1


def returns_none_inside(x):
    return x * 2, None, "s", (1, x)


@pytest.mark.parametrize("fn", [returns_none, returns_none_inside])
def test_none_results(fn):
    both(fn, T([1.0, 2.0]))


def test_cell_construct_returning_none():
    class Nothing(nn.Cell):
        def construct(self, x):
            return None

    eager, graph, *_ = graph_cell(Nothing, T([1.0]))
    assert eager is None and graph is None


# ---- index assignment shares like Python ----
def alias_then_setitem(x):
    y = x + 0.0
    z = y
    y[0] = 5.0
    return y, z


def alias_in_list(x):
    y = x + 0.0
    items = [y, (y, 1)]
    y[1] = 7.0
    return items, y


def setitem_in_tensor_if(x):
    y = x + 0.0
    if x.sum() > 0:
        y[0] = 5.0
    return y


def setitem_in_tensor_loop(x):
    y = x + 0.0
    i = T(0, np.int32)
    while i < 3:
        y[0] = y[0] + 2.0
        i = i + 1
    return y


def _set_first(v):
    v[0] = -1.0


def setitem_in_callee(x):
    y = x * 1.0
    _set_first(y)
    return y


@pytest.mark.parametrize("fn", [alias_then_setitem, alias_in_list, setitem_in_tensor_if,
                                setitem_in_tensor_loop, setitem_in_callee])
def test_setitem_aliasing(fn):
    both(fn, T([1.0, 2.0, 3.0]))
    both(fn, T([-1.0, -2.0, -3.0]))


def test_setitem_on_argument_changes_the_callers_tensor():
    def f(x):
        x[0] = 9.0
        return x * 1.0

    a, b = T([1.0, 2.0]), T([1.0, 2.0])
    close(f(a), ms.jit(f)(b))
    close(a, b)  # PyNative changed the argument in place; so does the graph
    np.testing.assert_allclose(b.asnumpy(), [9.0, 2.0])


def test_setitem_into_a_view_of_an_argument_is_refused():
    def f(x):
        row = x[0]
        row[1] = 50.0
        return x

    with pytest.raises(TypeError, match=r"view of another(.|\n)*line \d+(.|\n)*row\[1\] = 50.0"):
        ms.jit(f)(T([[1.0, 2.0], [3.0, 4.0]]))


def test_setitem_on_a_temporary_view_is_fine():
    def f(x):
        row = (x * 2.0)[0]
        row[1] = 50.0
        return row

    both(f, T([[1.0, 2.0], [3.0, 4.0]]))


def test_setitem_on_a_parameter():
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = Parameter(T([1.0, 2.0]), name="w")

        def construct(self, x):
            before = self.w
            self.w[0] = 7.0
            return before + x, self.w + x

    eager, graph, eager_net, graph_net = graph_cell(Net, T([10.0, 10.0]))
    close(eager[0], graph[0])
    close(eager[1], graph[1])
    close(eager_net.w, graph_net.w)


# ---- the compile cache never goes silently stale ----
SCALE = T([1.0, 1.0])


def uses_global_tensor(x):
    return x + SCALE * 2.0


def test_global_tensor_changed_in_place_between_calls():
    f = ms.jit(uses_global_tensor)
    x = T([0.0, 0.0])
    close(f(x), uses_global_tensor(x))
    SCALE[0] = 100.0
    close(f(x), uses_global_tensor(x))


def test_global_tensor_rebound_between_calls():
    global SCALE
    f = ms.jit(uses_global_tensor)
    x = T([0.0, 0.0])
    close(f(x), uses_global_tensor(x))
    saved, SCALE = SCALE, T([5.0, 6.0])
    try:
        close(f(x), uses_global_tensor(x))
    finally:
        SCALE = saved


def test_self_attributes_dict_and_tensor_changed():
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.table = {"a": 2.0}
            self.offset = T([1.0])

        def construct(self, x):
            return x * self.table["a"] + self.offset

    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        net = Net()
        x = T([1.0])
        np.testing.assert_allclose(net(x).asnumpy(), [3.0])
        net.table["a"] = 5.0
        np.testing.assert_allclose(net(x).asnumpy(), [6.0])
        net.offset = T([10.0])
        np.testing.assert_allclose(net(x).asnumpy(), [15.0])
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


# ---- control flow ----
def nested_early_return(x):
    if x.sum() > 0:
        if x.sum() > 10:
            return x * 100.0
        x = x + 1.0
    return x


def early_return_in_loop_in_if(x):
    if x.sum() > 0:
        for i in range(3):
            if x.sum() > 4:
                return x - i
            x = x * 2.0
    return x


def deep_nesting(x):
    i = 0
    while i < 3:
        if x.sum() > 0:
            if x.sum() > 5:
                x = x - 1.0
            else:
                x = x + 2.0
        else:
            x = x * -1.0
        i += 1
    return x


@pytest.mark.parametrize("fn", [nested_early_return, early_return_in_loop_in_if, deep_nesting])
@pytest.mark.parametrize("v", [1.0, 11.0, -1.0])
def test_nested_control_flow(fn, v):
    both(fn, T([v]))


def test_variable_set_in_one_branch():
    def f(x):
        if x.sum() > 0:
            y = x * 2.0
        return y

    with pytest.raises(NameError, match=r"'y' is assigned in only one branch(.|\n)*line \d+"):
        ms.jit(f)(T([1.0]))


def test_loop_changing_dtype_or_shape_is_a_type_error():
    def dtype_change(x):
        i = 0
        while x.sum() < 10:
            x = x * 2.0
            i = i + 0.5
        return x, i

    def shape_change(x):
        while x.sum() < 10:
            x = ops.concat((x, x))
        return x

    with pytest.raises(TypeError, match=r"loop-carried i is Int64\[\] before(.|\n)*line \d+"):
        ms.jit(dtype_change)(T([1.0]))
    with pytest.raises(TypeError, match=r"carried x is Float32\[1\] before(.|\n)*Float32\[2\]"):
        ms.jit(shape_change)(T([1.0]))


def test_tensor_value_needed_at_compile_time_names_the_line():
    def many_elements(x):
        if x > 0:
            return x
        return -x

    def python_max(x, y):
        return max(x.sum(), y.sum())

    with pytest.raises(ValueError, match=r"ambiguous(.|\n)*line \d+(.|\n)*if x > 0"):
        ms.jit(many_elements)(T([1.0, 2.0]))
    with pytest.raises(TypeError, match=r"Python bool(.|\n)*line \d+(.|\n)*max\(x.sum"):
        ms.jit(python_max)(T([1.0]), T([2.0]))


# ---- functions, closures and builtins ----
def _fact(x, n):
    if n == 0:
        return x
    return _fact(x * n, n - 1)


@ms.jit
def _jitted_double(x):
    return x * 2.0


_DEFAULT = T([10.0, 20.0])


def calls_and_builtins(x):
    fs = [lambda v, i=i: v * i for i in range(3)]
    late = [lambda v: v * i for i in range(3)]  # noqa: B023 - late binding: all see i == 2

    def kw(v, *, scale=2.0, shift):
        return v * scale + shift

    def with_default(v, b=_DEFAULT):
        return v + b

    return ([f(x) for f in fs], [f(x) for f in late], _fact(x, 4), _jitted_double(x) + 1.0,
            kw(x, shift=1.0), with_default(x), sum([x, x * 2.0, x * 3.0]), {"a": x, "b": [x, 3]})


def test_calls_and_builtins():
    both(calls_and_builtins, T([1.0, 2.0]))


def test_mutable_tuple_is_a_runtime_input():
    f = ms.jit(lambda x, t: x * t[0] + t[1])
    np.testing.assert_allclose(f(T([1.0]), ms.mutable((2, 3))).asnumpy(), [5.0])
    np.testing.assert_allclose(f(T([1.0]), ms.mutable((4, 5))).asnumpy(), [9.0])


def test_print_of_containers_shows_tensor_values(capfd):
    def f(x):
        print("vals", [x, 1], (x,), {"a": x}, {})
        return x

    ms.jit(f)(T([1.5]))
    out = capfd.readouterr().out
    assert "GraphTensor" not in out and "{{" not in out, out
    assert "vals [Tensor(shape=[1], dtype=Float32, value=\n[1.5]), 1] (Tensor(" in out, out
    assert "{'a': Tensor(shape=[1], dtype=Float32, value=\n[1.5])} {}" in out, out
