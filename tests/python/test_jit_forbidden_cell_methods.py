"""Cell.get_parameters and Cell.untrainable_params called by compiled code are refused with
MindSpore's RuntimeError (in a graph they would run once, while compiling); PyNative calls
them as usual, kiln's own code may call them while compiling, and trainable_params stays
allowed (a deliberate difference, docs/compatibility.md)."""

import numpy as np
import pytest

import kiln as ms
from kiln import Parameter, Tensor, nn


class Inner(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(Tensor(np.ones(2, np.float32)), name="w")
        self.frozen = Parameter(Tensor(np.ones(2, np.float32)), name="frozen",
                                requires_grad=False)

    def construct(self, x):
        return x * self.w


class CallsGetParameters(nn.Cell):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def construct(self, x):
        return self.inner.get_parameters(), x


class CallsUntrainable(CallsGetParameters):
    def construct(self, x):
        return len(self.inner.untrainable_params()) + x


class CallsTrainable(CallsGetParameters):
    def construct(self, x):
        return len(self.inner.trainable_params()) + x


def _graph(run):
    previous = ms.get_context("mode")
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        return run()
    finally:
        ms.set_context(mode=previous)


X = Tensor(np.ones(2, np.float32))


def test_get_parameters_and_untrainable_params_are_refused_in_construct():
    for net, name in ((CallsGetParameters(), "get_parameters"),
                      (CallsUntrainable(), "untrainable_params")):
        with pytest.raises(RuntimeError, match=f"Failed to compile in GRAPH_MODE because the "
                                               f"method or function "
                                               f"'mindspore.nn.cell.Cell.{name}'"):
            _graph(lambda n=net: n(X))


def test_refused_in_a_jit_function_on_a_cell_made_there():
    @ms.jit
    def build():
        return Inner().get_parameters()

    with pytest.raises(RuntimeError, match="'mindspore.nn.cell.Cell.get_parameters' "
                                           ".kiln.nn.cell.Cell.get_parameters in kiln. "
                                           "is not supported"):
        build()


def test_pynative_and_trainable_params_still_work():
    got = CallsUntrainable()(X)
    np.testing.assert_array_equal(got.asnumpy(), [2.0, 2.0])
    np.testing.assert_array_equal(_graph(lambda: CallsTrainable()(X)).asnumpy(), [2.0, 2.0])
    assert [p.name for p in CallsGetParameters()(X)[0]] == ["inner.w", "inner.frozen"]


def test_library_code_may_call_them_while_compiling():
    net = nn.Dense(2, 1)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()),
                               nn.Momentum(net.trainable_params(), 0.1, 0.9))
    loss = _graph(lambda: step(Tensor(np.ones((3, 2), np.float32)),
                               Tensor(np.ones((3, 1), np.float32))))
    assert np.isfinite(loss.asnumpy()).all()
