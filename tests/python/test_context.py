"""set_context/get_context validation and the MindSpore module layout."""
import importlib

import pytest

import kiln as ms


@pytest.fixture(autouse=True)
def _restore_context():
    yield
    ms.reset_context()


def test_defaults_and_round_trip():
    assert ms.get_context("mode") == ms.PYNATIVE_MODE
    assert ms.get_context("jit_syntax_level") == ms.LAX
    ms.set_context(mode=ms.GRAPH_MODE, jit_syntax_level=ms.STRICT, save_graphs=True,
                   save_graphs_path="/tmp/graphs", device_target="CPU")
    assert ms.get_context("mode") == ms.GRAPH_MODE
    assert ms.get_context("jit_syntax_level") == ms.STRICT
    assert ms.get_context("save_graphs") is True
    assert ms.get_context("save_graphs_path") == "/tmp/graphs"
    assert ms.GRAPH_MODE == 0 and ms.PYNATIVE_MODE == 1 and ms.STRICT == 0 and ms.LAX == 2


@pytest.mark.parametrize("kwargs,exc,word", [
    (dict(mode=5), ValueError, "mode"), (dict(mode="graph"), TypeError, "mode"),
    (dict(jit_syntax_level=7), ValueError, "jit_syntax_level"),
    (dict(device_target="GPU"), ValueError, "device_target"),
    (dict(save_graphs_path=3), TypeError, "save_graphs_path"),
    (dict(not_an_option=1), ValueError, "not_an_option"),
])
def test_bad_keys_and_values_name_the_option(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        ms.set_context(**kwargs)


def test_get_context_unknown_key():
    with pytest.raises(ValueError, match="nope"):
        ms.get_context("nope")


def test_a_failed_call_changes_nothing():
    with pytest.raises(ValueError):
        ms.set_context(mode=ms.GRAPH_MODE, device_target="Ascend")
    assert ms.get_context("mode") == ms.PYNATIVE_MODE


@pytest.mark.parametrize("module,names", [
    ("kiln.context", ["set_context", "get_context", "GRAPH_MODE", "PYNATIVE_MODE"]),
    ("kiln.common.dtype", ["float32", "int64", "bool_", "bfloat16"]),
    ("kiln.common.tensor", ["Tensor"]),
    ("kiln.ops.operations", ["ReLU", "MatMul", "ReduceSum", "ReduceMean", "Softmax", "Add",
                             "Mul", "Reshape", "Transpose", "Cast"]),
    ("kiln.ops.functional", ["add", "matmul", "relu"]),
])
def test_mindspore_module_layout(module, names):
    mod = importlib.import_module(module)
    for name in names:
        assert hasattr(mod, name), f"{module}.{name} is missing"


def test_primitives_call_the_same_ops():
    x = ms.Tensor([[-1.0, 2.0]])
    assert ms.ops.ReLU()(x).asnumpy().tolist() == [[0.0, 2.0]]
    assert ms.ops.Cast()(x, ms.int32).dtype == ms.int32
    assert "transpose_b=True" in repr(ms.ops.MatMul(transpose_b=True))
    with pytest.raises(TypeError, match="keep_dims"):
        ms.ops.ReduceSum(keep_dims="yes")


def test_set_seed_validates():
    ms.set_seed(3)
    assert ms.get_seed() == 3
    with pytest.raises(TypeError):
        ms.set_seed(-1)
