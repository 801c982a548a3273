"""nn.MicroBatchInterleaved: the network over slices of its inputs along axis 0, outputs
summed, in both modes and under a training step."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn

RNG = np.random.default_rng(4)


def loss_net():
    ms.set_seed(3)
    net = nn.SequentialCell(nn.Dense(5, 7), nn.ReLU(), nn.Dense(7, 3))
    return nn.WithLossCell(net, nn.CrossEntropyLoss()), net


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
@pytest.mark.parametrize("rows,parts", [(8, 2), (10, 3), (4, 4)])
def test_the_sum_of_the_slices_outputs(mode, rows, parts):
    with_loss, _ = loss_net()
    x = Tensor(RNG.standard_normal((rows, 5)).astype(np.float32))
    y = Tensor(RNG.integers(0, 3, size=rows))
    ms.set_context(mode=ms.PYNATIVE_MODE)
    bounds = [i * rows // parts for i in range(parts + 1)]
    want = sum(with_loss(x[lo:hi], y[lo:hi]).asnumpy() for lo, hi in zip(bounds, bounds[1:]))
    ms.set_context(mode=mode)
    got = nn.MicroBatchInterleaved(with_loss, parts)(x, y)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)


def test_trains_with_the_summed_loss_and_keeps_parameter_names():
    with_loss, net = loss_net()
    interleaved = nn.MicroBatchInterleaved(with_loss, 2)
    assert [p.name for p in interleaved.trainable_params()] == [
        p.name for p in net.trainable_params()]  # auto_prefix off: names as the network's
    step = nn.TrainOneStepCell(interleaved, nn.SGD(net.trainable_params(), 0.1))
    x = Tensor(RNG.standard_normal((6, 5)).astype(np.float32))
    y = Tensor(RNG.integers(0, 3, size=6))
    losses = [float(step(x, y).asnumpy()) for _ in range(5)]
    assert losses[-1] < losses[0]


def test_interleave_num_is_checked():
    with_loss, _ = loss_net()
    with pytest.raises(TypeError, match="interleave_num must be an int"):
        nn.MicroBatchInterleaved(with_loss, 2.0)
    with pytest.raises(ValueError, match="interleave_num must be > 0"):
        nn.MicroBatchInterleaved(with_loss, 0)
