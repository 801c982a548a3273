"""TrainOneStepWithLossScaleCell with Dynamic/FixedLossScaleUpdateCell and a Tensor scale:
MindSpore's update rule for the loss scale, updates skipped on overflow, same results in
PyNative and GRAPH_MODE."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn

RNG = np.random.default_rng(31)
X = RNG.standard_normal((8, 4)).astype(np.float32)
Y = RNG.standard_normal((8, 2)).astype(np.float32)
W0 = (RNG.standard_normal((2, 4)) * 0.1).astype(np.float32)


def _run(scale_sense, mode, steps=6, target=Y):
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    try:
        net = nn.Dense(4, 2, weight_init=Tensor(W0), bias_init="zeros")
        opt = nn.SGD(net.trainable_params(), 0.1)
        step = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()), opt,
                                                scale_sense)
        trace, weights = [], []
        for _ in range(steps):
            loss, overflow, scale = step(Tensor(X), Tensor(target))
            trace.append((float(loss.asnumpy()), bool(np.asarray(overflow.asnumpy())),
                          float(np.asarray(scale.asnumpy()).reshape(-1)[0])))
            weights.append(net.weight.asnumpy().copy())
        return trace, weights
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


def np_reference(scale, factor, window, steps=6, target=Y):
    """MindSpore's DynamicLossScaleUpdateCell and SGD on the MSE of a bias-free start; a step
    overflows when a scaled gradient is not finite in float32."""
    w, b = W0.astype(np.float64), np.zeros(2)
    cur, last = 1, 0
    out = []
    for _ in range(steps):
        pred = X @ w.T + b
        loss = ((pred - target) ** 2).mean()
        d = 2 * (pred - target) / pred.size
        gw, gb = d.T @ X, d.sum(0)
        with np.errstate(over="ignore"):
            biggest = max(np.abs(gw).max(), np.abs(gb).max())
            overflow = not np.isfinite(np.float32(biggest * scale))
        used = scale
        new_scale = max(scale / factor, 1.0) if overflow else scale
        should_inc = cur - last >= window
        if overflow or should_inc:
            last = cur
        if should_inc and not overflow:
            new_scale *= factor
        cur += 1
        if not overflow:
            w, b = w - 0.1 * gw, b - 0.1 * gb
        out.append((loss, overflow, used, w.copy()))
        scale = new_scale
    return out


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("start,window", [(2.0 ** 10, 2), (2.0 ** 127, 100)],
                         ids=["grows", "overflows-then-shrinks"])
def test_dynamic_loss_scale(mode, start, window):
    # Targets far from the start make the gradients large: 2^127 times them overflows.
    target = Y + 10.0
    trace, weights = _run(nn.DynamicLossScaleUpdateCell(start, 2, window), mode, target=target)
    ref = np_reference(start, 2.0, window, target=target)
    for (loss, overflow, scale), w, (r_loss, r_over, r_scale, r_w) in zip(trace, weights, ref):
        assert overflow == r_over
        assert scale == pytest.approx(r_scale)
        assert loss == pytest.approx(r_loss, rel=1e-5)
        np.testing.assert_allclose(w, r_w, rtol=1e-4, atol=1e-6)
    if start > 2.0 ** 100:
        assert trace[0][1] and not trace[-1][1]     # overflowed, then recovered
        np.testing.assert_allclose(weights[0], W0)  # the overflowing step changed nothing


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_fixed_and_tensor_scales_train_as_plain_sgd(mode):
    plain = np_reference(1.0, 2.0, 10 ** 9)
    for sense in (nn.FixedLossScaleUpdateCell(128.0), Tensor(np.array([64.0], np.float32))):
        trace, weights = _run(sense, mode, steps=3)
        assert [t[1] for t in trace] == [False] * 3
        for w, ref in zip(weights, plain):
            np.testing.assert_allclose(w, ref[3], rtol=1e-4, atol=1e-6)


def test_arguments():
    net = nn.WithLossCell(nn.Dense(4, 2), nn.MSELoss())
    opt = nn.SGD(net.trainable_params(), 0.1)
    with pytest.raises(TypeError, match="'scale_sense' must be Cell or Tensor"):
        nn.TrainOneStepWithLossScaleCell(net, opt, 2.0)
    with pytest.raises(ValueError, match="must be \\(1,\\) or \\(\\)"):
        nn.TrainOneStepWithLossScaleCell(net, opt, Tensor(np.ones(2, np.float32)))
    step = nn.TrainOneStepWithLossScaleCell(net, opt, Tensor(np.array(8.0, np.float32)))
    step.set_sense_scale(Tensor(np.array(4.0, np.float32)))
    assert float(step.scale_sense.asnumpy()) == 4.0
    assert nn.DynamicLossScaleUpdateCell(1024, 2, 10).get_loss_scale() == 1024
