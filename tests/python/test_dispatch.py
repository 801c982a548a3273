"""The one eager-versus-graph decision (bindings/dispatch.cc): ops._core.call and the Tensor
operators consult the same per-thread graph target, and nothing else."""
import threading

import numpy as np
import pytest

import kiln as ms
from kiln import _C, _graph_state, ops
from kiln.ops._core import KIND


class RecordingTarget:
    """Stands in for a GraphEmitter: records what reaches the graph."""

    def __init__(self):
        self.calls = []

    def emit(self, kind, inputs, attrs):
        self.calls.append((_C.op_names()[kind], tuple(inputs), tuple(attrs)))
        return "node"


@pytest.fixture
def target():
    recorder = RecordingTarget()
    previous = _graph_state.begin_compile(recorder)
    try:
        yield recorder
    finally:
        _graph_state.end_compile(previous)


def test_ops_and_tensor_operators_both_go_to_this_threads_graph(target):
    x = ms.Tensor(np.ones(3, np.float32))
    assert ops.add(x, 1.0) == "node"
    assert x * 2 == "node"
    assert 3 - x == "node"
    assert -x == "node"
    names = [name for name, _, _ in target.calls]
    assert names == ["add", "mul", "sub", "neg"]
    assert target.calls[2][1] == (3, x)  # the reflected operator keeps the operands' order


def test_compiling_state_is_the_c_plus_plus_target(target):
    assert _graph_state.emitter() is target
    assert _graph_state.compiling()
    assert _C.graph_target() is target


def test_eager_block_runs_both_paths_now(target):
    x = ms.Tensor(np.array([1.0, 2.0], np.float32))
    with _graph_state.eager():
        assert not _graph_state.compiling()
        np.testing.assert_allclose((x * 2).asnumpy(), [2.0, 4.0])
        np.testing.assert_allclose(ops.add(x, 1.0).asnumpy(), [2.0, 3.0])
    assert _graph_state.emitter() is target  # restored
    assert target.calls == []


def test_an_operand_that_is_not_tensor_like_is_not_implemented_while_compiling(target):
    x = ms.Tensor(np.ones(2, np.float32))
    with pytest.raises(TypeError):
        x + object()
    with pytest.raises(TypeError):
        x * None
    assert target.calls == []


def test_other_threads_stay_eager(target):
    results = []

    def run():
        results.append((_graph_state.emitter(), (ms.Tensor([1.0]) + 1).asnumpy()))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert results[0][0] is None
    np.testing.assert_allclose(results[0][1], [2.0])


def test_compiles_nest_and_restore_the_enclosing_target():
    outer, inner = RecordingTarget(), RecordingTarget()
    first = _graph_state.begin_compile(outer)
    try:
        second = _graph_state.begin_compile(inner)
        assert second is outer
        _C.call(KIND["neg"], (ms.Tensor([1.0]),), ())
        _graph_state.end_compile(second)
        _C.call(KIND["abs"], (ms.Tensor([1.0]),), ())
    finally:
        _graph_state.end_compile(first)
    assert [c[0] for c in inner.calls] == ["neg"]
    assert [c[0] for c in outer.calls] == ["abs"]
    assert _graph_state.emitter() is None
    np.testing.assert_allclose((ms.Tensor([1.0]) + 1).asnumpy(), [2.0])
