"""Two different Parameters in one compiled call may not share a name (MindSpore's rule): an
argument clashing with an argument or a weight is a ValueError, two weights read by name
(globals, other Cells' Parameters) a RuntimeError, two Parameters in a Cell's plain list/tuple
attributes a ValueError when assigned. Weights a Cell registers under different paths may share
a name, and unnamed Parameters never clash."""

import numpy as np
import pytest

import kiln as ms
from kiln import Parameter, ParameterTuple, Tensor, nn


def _param(value, name=None):
    return Parameter(Tensor(np.array([value], np.float32)), name=name)


def test_two_arguments_with_one_name_are_refused():
    @ms.jit
    def add(x, y):
        return x + y

    with pytest.raises(ValueError, match="argument 0 and argument 1.*its name 'x' already exists"):
        add(_param(1.0, "x"), _param(2.0, "x"))
    np.testing.assert_array_equal(add(_param(1.0), _param(2.0)).asnumpy(), [3.0])
    same = _param(4.0, "x")
    np.testing.assert_array_equal(add(same, same).asnumpy(), [8.0])  # one Parameter twice


class WithWeight(nn.Cell):
    def __init__(self, name):
        super().__init__()
        self.w = _param(1.0, name)

    def construct(self, x):
        return x + self.w


def test_an_argument_named_like_a_weight_is_refused_in_graph_mode():
    net = WithWeight("myname")
    with pytest.raises(ValueError, match="its name 'myname' already exists"):
        ms.jit(net.construct)(_param(1.0, "myname"))
    np.testing.assert_array_equal(ms.jit(net.construct)(_param(1.0)).asnumpy(), [2.0])


def test_two_globals_with_one_name_are_refused():
    a, b = _param(1.0, "name_a"), _param(2.0, "name_a")

    @ms.jit
    def add():
        return a + b

    with pytest.raises(RuntimeError, match="two different Parameters .* 'name_a'"):
        add()


class TwoTuples(nn.Cell):
    def __init__(self, first, second):
        super().__init__()
        self.one = ParameterTuple(first.get_parameters())
        self.two = ParameterTuple(second.get_parameters())

    def construct(self, x):
        return x + self.one[0] + self.two[0]


class TwoPaths(nn.Cell):
    def __init__(self):
        super().__init__()
        self.a = _param(1.0, "name_a")
        self.b = _param(2.0, "name_a")
        self.c = ParameterTuple((_param(3.0, "name_a"),))

    def construct(self, x):
        return x + self.a + self.b + self.c[0]


def test_weights_are_told_apart_by_path_where_they_have_one():
    x = Tensor(np.array([1.0], np.float32))
    previous = ms.get_context("mode")
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        np.testing.assert_array_equal(TwoPaths()(x).asnumpy(), [7.0])
        first, second = WithWeight("name_a"), WithWeight("name_a")
        with pytest.raises(RuntimeError, match="its name 'name_a' already exists"):
            TwoTuples(first, second)(x)
    finally:
        ms.set_context(mode=previous)
    np.testing.assert_array_equal(TwoTuples(first, second)(x).asnumpy(), [3.0])  # PyNative


class Lists(nn.Cell):
    def __init__(self, second_name):
        super().__init__()
        self.ptuple = (_param(1.0, "name_a"), _param(2.0))
        self.plist = [_param(3.0, second_name), _param(4.0)]

    def construct(self, x):
        return x + self.ptuple[0] + self.plist[0]


def test_parameters_in_list_and_tuple_attributes_need_unique_names():
    with pytest.raises(ValueError, match=r"Lists.plist: .*'name_a' clashes with a different one "
                                         r"in 'ptuple'"):
        Lists("name_a")
    net = Lists("name_b")
    net.ptuple = (net.ptuple[0],)  # reassigning an attribute replaces its own names
    np.testing.assert_array_equal(ms.jit(net.construct)(Tensor(np.array([1.0], np.float32)))
                                  .asnumpy(), [5.0])


def test_a_training_step_with_an_optimizer_compiles():
    net = nn.Dense(2, 1)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()),
                               nn.Adam(net.trainable_params(), 0.01))
    previous = ms.get_context("mode")
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        loss = step(Tensor(np.ones((4, 2), np.float32)), Tensor(np.zeros((4, 1), np.float32)))
    finally:
        ms.set_context(mode=previous)
    assert np.isfinite(loss.asnumpy()).all()
