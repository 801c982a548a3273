"""The module surface MindSpore code imports: common.api, common.mutable, jit_class, log,
_extends.parse.compile_config, set_context(jit_level/jit_config), set_device, the bool, tuple_
and list_ types, Tensor.from_numpy."""

import logging

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn


class Doubler(nn.Cell):
    def construct(self, x):
        return x * 2.0


def ones(*shape):
    return Tensor(np.ones(shape, np.float32))


# ---- kiln.common ----
def test_common_imports_as_mindspore_code_writes_them():
    from kiln.common import ParameterTuple, mutable
    from kiln.common.api import _cell_graph_executor, jit  # noqa: F401
    from kiln.common.mutable import mutable as mutable_from_module

    assert mutable is mutable_from_module is ms.mutable
    assert ParameterTuple is ms.ParameterTuple
    assert jit is ms.jit


def test_cell_graph_executor_compiles_without_running():
    from kiln.common.api import _cell_graph_executor

    class Net(nn.Cell):
        def construct(self, x):
            return x + 1.0

    ms.set_context(mode=ms.PYNATIVE_MODE)
    net = Net()
    before = ms.get_jit_stats()["compiles"]
    phase, fresh = _cell_graph_executor.compile(net, ones(2))
    assert fresh and ms.get_jit_stats()["compiles"] == before + 1
    assert isinstance(phase, str) and _cell_graph_executor.has_compiled(phase)
    _, fresh_again = _cell_graph_executor.compile(net, ones(2))
    assert not fresh_again and ms.get_jit_stats()["compiles"] == before + 1
    # running it uses the compiled graph: no new compile
    out = _cell_graph_executor(net, ones(2), phase=phase)
    np.testing.assert_allclose(out.asnumpy(), [2.0, 2.0])
    assert ms.get_jit_stats()["compiles"] == before + 1


def test_cell_graph_executor_compile_applies_a_jit_config():
    from kiln.common.api import _cell_graph_executor

    net = Doubler()
    _cell_graph_executor.compile(net, ones(2))
    assert net._kiln_graph_fn.config.level() == "O1"
    before = ms.get_jit_stats()["compiles"]
    _, fresh = _cell_graph_executor.compile(net, ones(2), jit_config_dict={"jit_level": "O0"})
    assert fresh and ms.get_jit_stats()["compiles"] == before + 1
    assert net._kiln_graph_fn.config.level() == "O0"  # not the graph compiled before the change


def test_cell_graph_executor_reports_compile_errors_and_bad_objects():
    from kiln.common.api import _cell_graph_executor

    class Bad(nn.Cell):
        def construct(self, x):
            return x + ones(3)

    with pytest.raises(ValueError, match="add"):
        _cell_graph_executor.compile(Bad(), ones(2))
    with pytest.raises(TypeError, match="nn.Cell"):
        _cell_graph_executor.compile(lambda x: x, ones(2))


# ---- jit_class ----
def test_jit_class_marks_a_class_and_its_instances_work_in_graphs():
    @ms.jit_class
    class Scale:
        def __init__(self, factor):
            self.factor = factor

        def apply(self, x):
            return x * self.factor

    assert Scale.__ms_class__ is True
    scale = Scale(3.0)

    @ms.jit
    def f(x):
        return scale.apply(x) + scale.factor

    np.testing.assert_allclose(f(ones(2)).asnumpy(), [6.0, 6.0])
    np.testing.assert_allclose(scale.apply(ones(2)).asnumpy(), [3.0, 3.0])


def test_jit_class_refuses_non_classes_and_cells():
    with pytest.raises(TypeError, match="class"):
        ms.jit_class(lambda: 0)
    with pytest.raises(TypeError, match="class"):
        ms.jit_class(Doubler())
    with pytest.raises(TypeError, match="nn.Cell"):
        ms.jit_class(Doubler)


# ---- kiln.log ----
@pytest.fixture
def kiln_records():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep()
    logger = logging.getLogger("kiln")
    ms.log.get_level()  # sets the logger up from the environment first
    logger.addHandler(handler)
    yield records, logger
    logger.removeHandler(handler)


def test_log_functions_levels_and_config(kiln_records):
    records, logger = kiln_records
    assert ms.log.get_level() == "2"  # WARNING, MindSpore's default (GLOG_v unset)
    ms.log.info("not shown")
    ms.log.warning("shown %d", 1)
    ms.log.error("also shown")
    assert [r.getMessage() for r in records] == ["shown 1", "also shown"]
    assert records[0].filename == "test_surface_modules.py"  # the caller's line, not log.py's
    config = ms.log.get_log_config()
    assert config["GLOG_v"] == "2" and config["GLOG_logtostderr"] == "1"
    saved = logger.level
    try:
        logger.setLevel(logging.DEBUG)
        assert ms.log.get_level() == "0"
        ms.log.debug("debug now")
        assert records[-1].getMessage() == "debug now"
    finally:
        logger.setLevel(saved)


def test_log_configuration_errors_are_clear(monkeypatch):
    monkeypatch.setenv("GLOG_v", "7")
    with pytest.raises(ValueError, match="GLOG_v"):
        ms.log._config()
    monkeypatch.setenv("GLOG_v", "1")
    monkeypatch.setenv("GLOG_logtostderr", "0")
    monkeypatch.delenv("GLOG_log_dir", raising=False)
    with pytest.raises(ValueError, match="GLOG_log_dir"):
        ms.log._config()


# ---- compile_config ----
def test_compile_config_switches_exist_and_are_documented():
    from kiln._extends.parse import compile_config

    assert compile_config.FALLBACK_SUPPORT_LIST_DICT_INPLACE == ""
    for name in compile_config.__all__:
        assert getattr(compile_config, name) == ""
        assert compile_config.NO_EFFECT[name]
    saved = compile_config.FALLBACK_SUPPORT_LIST_DICT_INPLACE
    compile_config.FALLBACK_SUPPORT_LIST_DICT_INPLACE = 0  # MindSpore code sets them so
    try:
        @ms.jit
        def f(x):
            items = [1]
            items.append(2)
            return x + len(items)

        np.testing.assert_allclose(f(ones(1)).asnumpy(), [3.0])
    finally:
        compile_config.FALLBACK_SUPPORT_LIST_DICT_INPLACE = saved


# ---- set_context(jit_level / jit_config), set_device ----
def test_context_jit_level_sets_the_default_level():
    @ms.jit
    def f(x):
        return ops_chain(x)

    assert ms.get_context("jit_level") == "O1"
    f(ones(4))
    assert ms.JitConfig().level() == "O1"
    ms.set_context(jit_level="O0")
    assert ms.JitConfig().level() == "O0"
    before = ms.get_jit_stats()["compiles"]
    f(ones(4))  # the level changed: a new variant
    assert ms.get_jit_stats()["compiles"] == before + 1
    assert ms.JitConfig(jit_level="O2").level() == "O2"  # an explicit level wins
    ms.set_context(jit_config={"jit_level": "O2"})
    assert ms.get_context("jit_level") == "O2"
    assert ms.get_context("jit_config") == {"jit_level": "O2"}


def ops_chain(x):
    return ((x + 1.0) * 2.0).exp()


def test_context_jit_level_errors():
    with pytest.raises(ValueError, match="jit_level"):
        ms.set_context(jit_level="O3")
    with pytest.raises(TypeError, match="jit_level"):
        ms.set_context(jit_level=1)
    with pytest.raises(TypeError, match="jit_config"):
        ms.set_context(jit_config="O0")
    with pytest.raises(ValueError, match="jit_config"):
        ms.set_context(jit_config={"level": "O0"})
    with pytest.raises(ValueError, match="jit_level"):
        ms.set_context(jit_config={"jit_level": "fast"})
    with pytest.raises(ValueError, match="jit_config"):  # a syntax level is not set this way
        ms.set_context(jit_config={"jit_syntax_level": "STRICT"})
    with pytest.raises(ValueError, match="infer_boost"):
        ms.set_context(jit_config={"infer_boost": 1})
    ms.set_context(jit_config={"infer_boost": "on"})


def test_set_device():
    ms.set_device("CPU")
    assert ms.get_context("device_target") == "CPU"
    ms.set_device("CPU", 0)
    with pytest.raises(ValueError, match="Ascend"):
        ms.set_device("Ascend")
    with pytest.raises(TypeError, match="device_target"):
        ms.set_device(3)


# ---- types ----
def test_bool_tuple_and_list_types():
    assert ms.bool is ms.bool_ and ms.dtype.bool is ms.bool_
    assert Tensor([True], ms.bool).dtype == ms.bool_
    assert isinstance(True, bool)  # Python's bool is untouched
    assert ms.tuple_ == ms.tuple_ and ms.tuple_ != ms.list_ and ms.tuple_ != ms.float16
    assert repr(ms.tuple_) == "Tuple" and repr(ms.list_) == "List"
    assert ms.dtype.pytype_to_dtype(tuple) is ms.tuple_
    assert ms.dtype.dtype_to_pytype(ms.list_) is list
    assert ms.dtype.dtype_to_pytype(ms.float32) is float
    with pytest.raises(TypeError, match="sequence type"):
        Tensor([1], ms.tuple_)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.t = ms.tuple_

        def construct(self, x):
            if self.t == ms.tuple_:
                return x + 1.0
            return x

    ms.set_context(mode=ms.GRAPH_MODE)
    np.testing.assert_allclose(Net()(ones(1)).asnumpy(), [2.0])


def test_tensor_from_numpy_shares_memory():
    array = np.arange(4, dtype=np.int32)
    t = Tensor.from_numpy(array)
    assert t.dtype == ms.int32
    array[0] = 7
    assert t.asnumpy()[0] == 7
    with pytest.raises(TypeError, match="numpy.ndarray"):
        Tensor.from_numpy([1, 2])

    @ms.jit
    def f():
        return Tensor.from_numpy(np.array([1, 2]))

    np.testing.assert_array_equal(f().asnumpy(), [1, 2])
