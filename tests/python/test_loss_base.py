"""nn.LossBase subclassed the way MindSpore's loss tutorial does: get_loss (weights,
reductions), get_axis, both modes (ms.jit and a Cell in GRAPH_MODE), gradients against finite
differences, and training a Dense through a custom loss."""
import numpy as np
import pytest
from gradcheck import check_grad
from graph_check import in_three_modes

import kiln as ms
from kiln import Tensor, nn, ops

RNG = np.random.default_rng(7)
REDUCE = {"mean": np.mean, "sum": np.sum, "none": lambda v: v}


class MAELossOps(nn.LossBase):
    """The tutorial's custom loss: |base - target| through a primitive, then get_loss."""

    def __init__(self, reduction="mean"):
        super().__init__(reduction)
        self.abs = ops.Abs()

    def construct(self, base, target):
        return self.get_loss(self.abs(base - target))


class WeightedSquare(nn.LossBase):
    def construct(self, base, target, weights):
        return self.get_loss(ops.square(base - target), weights)


class WithAxis(nn.LossBase):
    def construct(self, base, target):
        x = ops.abs(base - target)
        return self.get_loss(x), self.get_axis(x)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_get_loss_reductions_in_three_modes(reduction):
    a, b = RNG.normal(0, 1, (3, 4)).astype(np.float32), RNG.normal(0, 1, (3, 4)).astype(
        np.float32)
    w = RNG.uniform(0.5, 2.0, (3, 1)).astype(np.float32)
    mae, weighted = MAELossOps(reduction), WeightedSquare(reduction)
    want_mae = REDUCE[reduction](np.abs(a - b))
    want_w = REDUCE[reduction]((a - b) ** 2 * w)

    def both(x, y, z):
        return mae(x, y), weighted(x, y, z)

    for mode, run in in_three_modes(both, Tensor(a), Tensor(b), Tensor(w)):
        got_mae, got_w = run()
        np.testing.assert_allclose(got_mae.asnumpy(), want_mae, rtol=1e-5, err_msg=mode)
        np.testing.assert_allclose(got_w.asnumpy(), want_w, rtol=1e-5, err_msg=mode)
        assert got_mae.dtype == ms.float32


def test_get_axis_and_python_weight_in_both_modes():
    a, b = Tensor(np.array([1.0, 2.0, 3.0], np.float32)), Tensor(np.array([1.0, 2.0, 2.0],
                                                                          np.float32))
    with_axis = WithAxis()

    def loss_and_axis(x, y):
        return with_axis(x, y)

    for mode, run in in_three_modes(loss_and_axis, a, b):
        loss, axis = run()
        assert float(loss.asnumpy()) == pytest.approx(1 / 3), mode
        assert tuple(axis) == (0,), mode

    class Scaled(nn.LossBase):
        def construct(self, x):
            return self.get_loss(x, 2.5)

    scaled = Scaled("sum")

    def scaled_sum(v):
        return scaled(v)

    x = Tensor(np.ones((2, 2), np.float32))
    for mode, run in in_three_modes(scaled_sum, x):
        assert float(run().asnumpy()) == pytest.approx(10.0), mode


def test_attributes_and_bad_reduction():
    loss = MAELossOps("none")
    assert (loss.reduction, loss.reduce, loss.average) == ("none", False, True)
    assert (MAELossOps("sum").reduce, MAELossOps("sum").average) == (True, False)
    with pytest.raises(ValueError, match="MAELossOps.*reduction"):
        MAELossOps("max")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_gradient_of_a_custom_loss(reduction):
    w = RNG.uniform(0.5, 2.0, (3, 1))
    check_grad(lambda a, b: WeightedSquare(reduction)(a, b, Tensor(w)),
               RNG.normal(0, 1, (3, 2)), RNG.normal(0, 1, (3, 2)))


def test_training_through_a_custom_loss_in_graph_mode_matches_pynative():
    x = RNG.normal(0, 1, (16, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]]) + 0.3).astype(np.float32)

    def train(mode):
        ms.set_context(mode=mode)
        try:
            ms.set_seed(3)
            net = nn.Dense(3, 1)
            step = nn.TrainOneStepCell(nn.WithLossCell(net, MAELossOps()),
                                       nn.SGD(net.trainable_params(), 0.05))
            return [float(step(Tensor(x), Tensor(y)).asnumpy()) for _ in range(30)]
        finally:
            ms.set_context(mode=ms.PYNATIVE_MODE)

    eager, graph = train(ms.PYNATIVE_MODE), train(ms.GRAPH_MODE)
    np.testing.assert_allclose(graph, eager, rtol=1e-4, atol=1e-5)
    assert eager[-1] < 0.5 * eager[0]
