"""The LAX syntax level: Python code a graph cannot hold runs in the interpreter when the graph
runs (run-time interpreter nodes), with PyNative's results; STRICT keeps refusing it."""

import warnings

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn
from kiln.jit import LaxRuntimeWarning
from kiln.jit.graph_tensor import CompileTimeValueError

STRICT = ms.JitConfig(jit_syntax_level="STRICT")


def _x():
    return Tensor(np.array([1.0, 2.0, 3.0], np.float32))


def _both(fn, *args):
    """fn in PyNative and jitted: both results."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LaxRuntimeWarning)
        return fn(*args), ms.jit(fn)(*args)


def numpy_round_trip(x):
    y = x.asnumpy()
    return Tensor(np.sum(y * 2)) + x


def test_numpy_on_a_graph_value_runs_when_the_graph_runs():
    eager, graph = _both(numpy_round_trip, _x())
    np.testing.assert_allclose(graph.asnumpy(), eager.asnumpy())
    # the graph reads the run-time value, not the one it was compiled with
    fn = ms.jit(numpy_round_trip)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LaxRuntimeWarning)
        fn(_x())
        out = fn(_x() * 10)
    np.testing.assert_allclose(out.asnumpy(), [130.0, 140.0, 150.0])


def ufunc_then_graph(x):
    return np.exp(x) * 1.0, x.asnumpy().max() * x, Tensor(np.float32(2) * x) + x


def test_numpy_of_tensors_means_what_it_means_in_pynative():
    eager, graph = _both(ufunc_then_graph, _x())
    for g, e in zip(graph, eager):
        assert type(g) is type(e)
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-6)


def returns_objects(x):
    return {"values": x.asnumpy(), "n": 3, "none": None}, x.item(0) if False else None


def test_returned_python_objects_come_back_as_objects():
    eager, graph = _both(returns_objects, _x())
    np.testing.assert_array_equal(graph[0]["values"], eager[0]["values"])
    assert graph[0]["n"] == 3 and graph[0]["none"] is None and graph[1] is None


def text_of(x):
    return f"x={x}, doubled={x * 2!r:>5}", f"{x + 1} and {x.shape}"


def test_fstrings_and_format_keep_pynative_text():
    eager, graph = _both(text_of, _x())
    assert graph == eager


def raises_with_values(x):
    if x.sum() > 10:
        raise ValueError(f"sum too large: {x.sum()}")
    return x


def test_raise_with_an_fstring_of_tensors():
    fn = ms.jit(raises_with_values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LaxRuntimeWarning)
        np.testing.assert_array_equal(fn(_x()).asnumpy(), _x().asnumpy())
        with pytest.raises(ValueError) as graph_error:
            fn(_x() * 10)
    with pytest.raises(ValueError) as eager_error:
        raises_with_values(_x() * 10)
    assert str(graph_error.value) == str(eager_error.value)


def prints_an_array(x):
    print("array", x.asnumpy() + 1)
    return x


def test_print_of_a_runtime_value(capfd):
    _both(prints_an_array, _x())
    out = capfd.readouterr().out.splitlines()
    assert out == ["array [2. 3. 4.]", "array [2. 3. 4.]"]


class Counter(nn.Cell):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.last = None
        self.scale = 2.0

    def construct(self, x):
        self.calls += 1
        self.last = x * self.scale
        return x + self.calls


def test_self_attributes_are_runtime_state_and_do_not_recompile():
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        net = Counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LaxRuntimeWarning)
            net(_x())
            before = ms.get_jit_stats()["compiles"]
            out = net(_x())
            out = net(_x())
        assert ms.get_jit_stats()["compiles"] == before  # `self.calls` is not a guard
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert net.calls == 3
    np.testing.assert_array_equal(out.asnumpy(), [4.0, 5.0, 6.0])
    np.testing.assert_array_equal(net.last.asnumpy(), [2.0, 4.0, 6.0])
    eager = Counter()
    for _ in range(3):
        eager_out = eager(_x())
    np.testing.assert_array_equal(eager_out.asnumpy(), out.asnumpy())


def in_a_branch(x):
    if x.sum() > 0:
        y = Tensor(np.sqrt(x.asnumpy()))
    else:
        y = x
    return y * 2


def test_runtime_value_inside_a_tensor_branch():
    eager, graph = _both(in_a_branch, _x())
    np.testing.assert_allclose(graph.asnumpy(), eager.asnumpy(), rtol=1e-6)


def test_each_interpreter_node_is_listed_and_warned_once_per_compile():
    def listed(x):
        return Tensor(np.cumsum(x.asnumpy()))

    with pytest.warns(LaxRuntimeWarning) as record:
        ms.jit(listed)(_x())
    assert len(record) == 1 and "numpy.cumsum" in str(record[0].message)
    nodes = [n for n in ms.get_jit_stats()["interpreter_nodes"]
             if n["function"].endswith("listed")]
    assert {n["why"] for n in nodes} >= {"Tensor.asnumpy()", "numpy.cumsum"}
    assert all(n["file"] == __file__ and n["line"] > 0 for n in nodes)


def test_strict_refuses_what_lax_runs_in_python():
    with pytest.raises(CompileTimeValueError, match="asnumpy"):
        ms.jit(numpy_round_trip, jit_config=STRICT)(_x())
    with pytest.raises(CompileTimeValueError, match="f-string"):
        ms.jit(text_of, jit_config=STRICT)(_x())
    ms.set_context(jit_syntax_level=ms.STRICT)
    try:
        with pytest.raises(CompileTimeValueError):
            ms.jit(numpy_round_trip)(_x())
    finally:
        ms.set_context(jit_syntax_level=ms.LAX)


def test_no_gradient_through_python_code():
    def loss(x):
        return (Tensor(np.square(x.asnumpy())) * x).sum()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LaxRuntimeWarning)
        with pytest.raises(TypeError, match="no gradient"):
            ms.jit(ms.grad(loss))(_x())


def test_a_result_used_as_a_tensor_needs_a_known_type():
    def unknown(x):  # text is only made when the graph runs: no example value to type it
        return Tensor(f"{x}") + x

    with pytest.raises(TypeError, match="cannot tell its dtype"):
        ms.jit(unknown)(_x())


class NumpyNet(nn.Cell):
    def construct(self, x):
        return Tensor(np.abs(x.asnumpy())) + x


def test_export_refuses_a_graph_with_interpreter_nodes(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LaxRuntimeWarning)
        with pytest.raises(RuntimeError, match=r"test_jit_lax.py:\d+"):
            ms.export(NumpyNet(), _x(), file_name=str(tmp_path / "net"), file_format="MINDIR")
    assert not list(tmp_path.iterdir())  # nothing half-written


def builtins_on_constant_tensors():
    x = Tensor(np.array([0, 1, 2, 3]))
    items = [Tensor([1]), Tensor([2]), Tensor([3])]
    return (all(x), any(x), all(Tensor([1, 1])), max(Tensor([1, 5, 3])), int(x.sum()),
            items.index(Tensor([3])), [20, Tensor(1), 4, Tensor(1)].count(Tensor(1)))


def test_builtins_over_tensors_made_from_constants_fold_while_compiling():
    eager, graph = _both(builtins_on_constant_tensors)
    assert [bool(v) if isinstance(v, Tensor) else v for v in graph] == [
        bool(v) if isinstance(v, Tensor) else v for v in eager
    ]
    assert int(graph[3]) == 5 and graph[4] == 6 and graph[5] == 2 and graph[6] == 2


class DictState(nn.Cell):
    def __init__(self):
        super().__init__()
        self.attrs = {"a": 1}

    def construct(self, x):
        self.attrs["b"] = 2  # item assignment: not an attribute the graph writes
        return x * len(self.attrs)


def test_item_assignment_into_a_self_container_is_not_runtime_state():
    with warnings.catch_warnings():
        warnings.simplefilter("error", LaxRuntimeWarning)  # no interpreter node
        out = ms.jit(DictState().construct)(_x())
    np.testing.assert_array_equal(out.asnumpy(), [2.0, 4.0, 6.0])


_history = []


def records(x):
    y = x * 2
    _history.append(y)
    _history.extend([y + 1])
    return y


def test_a_global_list_gets_graph_values_appended_when_the_graph_runs():
    _history.clear()
    fn = ms.jit(records)
    before = ms.get_jit_stats()["compiles"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LaxRuntimeWarning)
        for i in range(3):
            fn(Tensor(np.full(2, i, np.float32)))
    assert ms.get_jit_stats()["compiles"] - before == 1  # the list is run-time state
    assert [h.asnumpy().tolist() for h in _history] == [
        [0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0], [5.0, 5.0]]
    local = []  # a list the compiled code makes itself holds graph values as before
    assert ms.jit(lambda x: (local.clear(), [x, x])[1])(_x())[0].shape == (3,)


@ms.jit_class
class _Scaled:
    def __init__(self, k):
        self.k = k

    def __enter__(self):
        return self.k

    def __exit__(self, *exc):
        return False


def uses_with(x):
    with _Scaled(3) as k:
        y = x * k
    return y


def test_with_statement():
    eager, graph = _both(uses_with, _x())
    np.testing.assert_array_equal(graph.asnumpy(), eager.asnumpy())
    from kiln.jit import GraphSyntaxError

    with pytest.raises(GraphSyntaxError, match="with"):
        ms.jit(uses_with, jit_config=STRICT)(_x())


class AlwaysRaises(nn.Cell):
    def construct(self, x):
        raise ValueError(f"bad input of rank {x.ndim}")


class PrintsThenRaises(nn.Cell):
    def construct(self, x):
        print("before", x)
        raise ValueError("after a print")


def test_a_raise_reached_on_every_run_is_raised_while_compiling(capfd):
    from kiln.common.api import _cell_graph_executor

    with pytest.raises(ValueError, match="bad input of rank 1"):  # compiling alone raises
        _cell_graph_executor.compile(AlwaysRaises(), _x())
    # after an effect the raise stays a run-time one, so the print happens first as in PyNative
    _cell_graph_executor.compile(PrintsThenRaises(), _x())
    with pytest.raises(ValueError, match="after a print"):
        ms.jit(PrintsThenRaises().construct)(_x())
    assert "before" in capfd.readouterr().out


def branch_objects(x):
    if x.sum() > 0:
        y = x.asnumpy() * 2
    else:
        y = -x.asnumpy()
    return Tensor(y) + x, y


def test_python_values_merge_after_a_tensor_branch():
    for x in (_x(), -_x()):
        eager, graph = _both(branch_objects, x)
        np.testing.assert_array_equal(graph[0].asnumpy(), eager[0].asnumpy())
        np.testing.assert_array_equal(graph[1], eager[1])


class _Box:
    def __init__(self, v, n):
        self.v, self.n = v, n

    def double(self):
        return self.v * 2


def returns_an_object(x):
    box = _Box(x + 1, 3)
    return box.double(), box


def test_an_object_made_in_the_graph_comes_back_with_run_time_values():
    eager, graph = _both(returns_an_object, _x())
    assert isinstance(graph[1], _Box) and graph[1].n == 3
    np.testing.assert_array_equal(graph[1].v.asnumpy(), eager[1].v.asnumpy())
    np.testing.assert_array_equal(graph[0].asnumpy(), eager[0].asnumpy())
    with pytest.raises(TypeError, match="an object cannot carry them out"):
        ms.jit(returns_an_object, jit_config=STRICT)(_x())


def value_builtins(x, w):
    return int(x), float(x.sum()), str(x), len(w.asnumpy()), int("12", 16), float("1.5")


def test_int_float_str_len_of_graph_values_take_their_run_time_values():
    x, w = Tensor(np.array([-1.0], np.float32)), Tensor(np.arange(4))
    eager, graph = _both(value_builtins, x, w)
    assert graph == eager and type(graph[0]) is int and type(graph[1]) is float
    with pytest.raises(CompileTimeValueError):
        ms.jit(value_builtins, jit_config=STRICT)(x, w)


def generators(x):
    squares = (i * i for i in range(1, 6) if i % 2)
    return squares, sum(x * i for i in range(3)), ms.ops.partial(lambda a, b: a - b, b=1)(a=x)


def test_generator_expressions_and_partial_with_keywords():
    graph = ms.jit(generators)(_x())
    assert graph[0] == (1, 9, 25)  # a generator leaves the graph as a tuple, as in MindSpore
    np.testing.assert_array_equal(graph[1].asnumpy(), (_x() * 3).asnumpy())
    np.testing.assert_array_equal(graph[2].asnumpy(), (_x() - 1).asnumpy())
    from kiln.jit import GraphSyntaxError

    with pytest.raises(GraphSyntaxError, match="generator expressions"):
        ms.jit(generators, jit_config=STRICT)(_x())


class _ChangesItsList(nn.Cell):
    def __init__(self):
        super().__init__()
        self.items = [[1, 2], 3]
        self.table = {"x": 1}

    def construct(self, x):
        self.items[0].append(88)
        self.table["x"] = 3
        return x * self.table["x"]


def test_strict_refuses_changing_outside_containers_lax_allows_it(monkeypatch):
    with pytest.raises(TypeError, match=r"STRICT.*list.append"):
        ms.jit(_ChangesItsList().construct, jit_config=STRICT)(_x())
    monkeypatch.setenv("MS_DEV_JIT_SYNTAX_LEVEL", "0")  # MindSpore's variable chooses STRICT
    with pytest.raises(TypeError, match="STRICT"):
        ms.jit(_ChangesItsList().construct)(_x())
    monkeypatch.setenv("MS_DEV_JIT_SYNTAX_LEVEL", "2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = ms.jit(_ChangesItsList().construct)(_x())
    np.testing.assert_array_equal(out.asnumpy(), (_x() * 3).asnumpy())


class _NoSuchList(nn.Cell):
    def construct(self, x):
        self.missing[0] = 9
        return x


def test_index_assignment_into_a_missing_attribute_is_attribute_and_type_error():
    with pytest.raises(TypeError, match="should be initialized in the '__init__' function") as e:
        ms.jit(_NoSuchList().construct)(_x())
    assert isinstance(e.value, AttributeError)


def divides_by_a_zero_constant(x):
    return x * (2 / 0)


def test_division_by_zero_while_compiling_is_also_mindspores_value_error():
    with pytest.raises(ValueError, match="The divisor could not be zero") as e:
        ms.jit(divides_by_a_zero_constant)(_x())
    assert isinstance(e.value, ZeroDivisionError)


class _Config:
    def __init__(self):
        self.calls, self.scale, self.last = 0, 2.0, None


_cfg = _Config()


def uses_the_config(x):
    _cfg.calls = _cfg.calls + 1
    _cfg.last = x * _cfg.scale
    return x + _cfg.calls


def test_attributes_of_an_outside_object_the_graph_writes_are_run_time_state():
    fn = ms.jit(uses_the_config)
    before = ms.get_jit_stats()["compiles"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LaxRuntimeWarning)
        for _ in range(3):
            out = fn(_x())
        assert ms.get_jit_stats()["compiles"] - before == 1  # written attributes are not guards
        assert _cfg.calls == 3
        np.testing.assert_array_equal(out.asnumpy(), (_x() + 3).asnumpy())
        np.testing.assert_array_equal(_cfg.last.asnumpy(), (_x() * 2).asnumpy())
        _cfg.scale = 5.0  # an attribute only read is a guard: changing it recompiles
        fn(_x())
    assert ms.get_jit_stats()["compiles"] - before == 2
    np.testing.assert_array_equal(_cfg.last.asnumpy(), (_x() * 5).asnumpy())


_queue = []


def uses_a_queue(x):
    _queue.append(3)
    _queue.sort()
    first = _queue.pop(0)
    return x * 2, first


def test_list_methods_on_an_outside_list_run_on_every_call():
    _queue[:] = [5, 1]
    eager = [uses_a_queue(_x())[1] for _ in range(2)]
    after_eager = list(_queue)
    _queue[:] = [5, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LaxRuntimeWarning)
        graph = [ms.jit(uses_a_queue)(_x())[1] for _ in range(2)]
    assert graph == eager == [1, 3] and _queue == after_eager == [3, 5]
