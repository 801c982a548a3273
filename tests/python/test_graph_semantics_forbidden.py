"""APIs that act on Python-side state are refused in compiled code with a RuntimeError, as
MindSpore refuses them (a graph would run them once, while compiling), however they are
reached; they keep working in PyNative. Reading settings stays allowed (a documented
difference)."""

import numpy as np
import pytest

import kiln as ms
from kiln import Parameter, Tensor, log, nn
from kiln.common import initializer as init
from kiln.common.initializer import One, initializer

X = Tensor(np.array([1.0, 2.0, 3.0], np.float32))


def warn_directly(x):
    log.warning("from compiled code")
    return x


def warn_through_the_package(x):
    ms.log.warning("from compiled code")
    return x


def set_context_inside(x):
    ms.set_context(jit_level="O1")
    return x


def make_ones_class(x):
    return x * One()


def make_ones_function(x):
    return x + initializer("ones", [3], ms.float32)


def make_normal_through_the_module(x):
    return x + init.initializer(init.Normal(), [3], ms.float32)


@pytest.mark.parametrize("fn, name", [
    # named as MindSpore code names them, with kiln's module after
    (warn_directly, "the method or function 'mindspore.log.warning' (kiln.log.warning in kiln)"),
    (warn_through_the_package, "the method or function 'mindspore.log.warning'"),
    (set_context_inside, "the method or function 'mindspore.context.set_context'"),
    (make_ones_class, "the class 'mindspore.common.initializer.One' "
                      "(kiln.common.initializer.One in kiln)"),
    (make_ones_function, "the method or function 'mindspore.common.initializer.initializer'"),
    (make_normal_through_the_module, "kiln.common.initializer.Normal"),
])
def test_refused_apis_raise_a_runtime_error_in_graph_mode(fn, name):
    with pytest.raises(RuntimeError, match=r"Failed to compile in GRAPH_MODE") as info:
        ms.jit(fn)(X)
    assert name in str(info.value)
    assert "line" in str(info.value)  # located at the user's source line


def test_refused_apis_keep_working_in_pynative():
    np.testing.assert_array_equal(warn_directly(X).asnumpy(), X.asnumpy())
    np.testing.assert_array_equal(make_ones_function(X).asnumpy(), X.asnumpy() + 1)


def read_settings(x):
    mode = ms.get_context("mode")
    level = log.get_level()
    return x * 2 if mode == ms.GRAPH_MODE and level in ("0", "1", "2", "3") else x


def test_reading_settings_is_allowed_and_a_changed_setting_recompiles():
    fn = ms.jit(read_settings)
    ms.set_context(mode=ms.GRAPH_MODE)
    np.testing.assert_array_equal(fn(X).asnumpy(), 2 * X.asnumpy())
    np.testing.assert_array_equal(fn(X).asnumpy(), 2 * X.asnumpy())
    ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_array_equal(fn(X).asnumpy(), X.asnumpy())
    assert any("get_context('mode') changed" in r
               for r in ms.get_jit_stats()["recompile_reasons"])


class SetsData(nn.Cell):
    def __init__(self):
        super().__init__()
        self.weight = Parameter(Tensor(np.zeros(3, np.float32)), name="weight")

    def construct(self, x):
        self.weight.set_data(x)
        return x


class AssignsValue(nn.Cell):
    def construct(self, x, y):
        return x.assign_value(y)


class ConstArg(nn.Cell):
    def construct(self, x):
        x.set_const_arg(True)
        return x


class DataOfATensor(nn.Cell):
    def construct(self, x):
        x.set_data(x)
        return x


@pytest.mark.parametrize("cell, args, what", [
    (SetsData, (X,), "the 'Parameter' object's method 'set_data'"),
    (AssignsValue, (X, X), "the 'Tensor' object's method 'assign_value'"),
    (ConstArg, (X,), "the 'Tensor' object's method 'set_const_arg'"),
])
def test_in_place_methods_of_graph_values_are_refused_in_a_cell(cell, args, what):
    ms.set_context(mode=ms.GRAPH_MODE)
    with pytest.raises(RuntimeError, match="Failed to compile in GRAPH_MODE") as info:
        cell()(*args)
    assert what in str(info.value)


def test_set_data_of_a_plain_tensor_is_an_attribute_error_as_in_pynative():
    with pytest.raises(AttributeError, match="set_data"):
        DataOfATensor()(X)
    ms.set_context(mode=ms.GRAPH_MODE)
    with pytest.raises(AttributeError, match="'Tensor' object has no attribute 'set_data'"):
        DataOfATensor()(X)


def test_set_data_works_in_pynative():
    net = SetsData()
    net(X)
    np.testing.assert_array_equal(net.weight.asnumpy(), X.asnumpy())


class UsesLibraryLayers(nn.Cell):
    """kiln's own layers build with initializers while compiling: not refused."""

    def construct(self, x):
        return nn.Dense(3, 2, weight_init="ones", bias_init="zeros")(x.reshape((1, 3)))


def test_layers_built_while_compiling_still_initialize():
    ms.set_context(mode=ms.GRAPH_MODE)
    np.testing.assert_allclose(UsesLibraryLayers()(X).asnumpy(), [[6.0, 6.0]])


class MakesAParameter(nn.Cell):
    def construct(self, x):
        return Parameter(x, name="weight")


class ChecksParameterClass(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(Tensor(np.ones(3, np.float32)), name="w")

    def construct(self, x):
        return isinstance(self.w, Parameter), isinstance(x, Parameter), isinstance(One(1), One)


def test_creating_a_parameter_in_compiled_code_is_a_value_error():
    ms.set_context(mode=ms.GRAPH_MODE)
    named = r"'mindspore.common.parameter.Parameter' .kiln.common.parameter.Parameter in kiln."
    with pytest.raises(ValueError, match=named + r"(.|\n)*__init__"):
        MakesAParameter()(X)


def test_isinstance_sees_through_refused_classes():
    ms.set_context(mode=ms.GRAPH_MODE)
    with pytest.raises(RuntimeError, match="kiln.common.initializer.One"):
        ChecksParameterClass()(X)  # One(1) itself is refused...

    def checks(w, x):
        return isinstance(w, Parameter), isinstance(x, Parameter)

    w = Parameter(Tensor(np.ones(3, np.float32)), name="w2")
    assert ms.jit(checks)(w, X) == (True, False)  # ...but the class still names itself


def bare_raise(x):
    if x.shape[0] == 3:
        raise
    return x


def test_a_bare_raise_is_python_s_runtime_error():
    with pytest.raises(RuntimeError, match="No active exception to reraise"):
        bare_raise(X)
    with pytest.raises(RuntimeError, match="No active exception to reraise"):
        ms.jit(bare_raise)(X)
