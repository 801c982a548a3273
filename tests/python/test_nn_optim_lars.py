"""nn.LARS around Momentum and SGD against a NumPy reference of MindSpore's LARSUpdate rule
(trust ratio, weight decay taken over from the wrapped optimizer, use_clip with a dynamic
learning rate, the loss scale, the filter), in PyNative and compiled, inside TrainOneStepCell,
and its argument errors."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn

STEPS = 4
RNG = np.random.default_rng(11)
NAMES = ("dense.weight", "dense.bias", "LayerNorm.gamma")
INIT = [RNG.standard_normal((3, 2)), RNG.standard_normal(2), RNG.standard_normal(2)]
GRADS = [[RNG.standard_normal(p.shape) for p in INIT] for _ in range(STEPS)]


def _params():
    return [ms.Parameter(Tensor(a.astype(np.float32)), name=n) for a, n in zip(INIT, NAMES)]


def _lars_grad(w, g, wd, lr, coefficient, epsilon, use_clip):
    w_norm, g_norm = np.linalg.norm(w), np.linalg.norm(g)
    trust = coefficient * w_norm / (g_norm + wd * w_norm + epsilon)
    if use_clip:
        trust = np.clip(trust / lr, 0.0, 1.0)
    return trust * (g + wd * w)


def _reference(lrs, momentum, decays, coefficient=0.001, epsilon=1e-5, use_clip=False,
               lars=(True, False, False)):
    """Momentum (accum = momentum * accum + g; w -= lr * accum) on LARS-scaled gradients."""
    values = [a.copy() for a in INIT]
    accums = [np.zeros_like(a) for a in INIT]
    for t in range(STEPS):
        for i, g in enumerate(GRADS[t]):
            if lars[i]:
                g = _lars_grad(values[i], g, decays[i], lrs[t], coefficient, epsilon, use_clip)
            accums[i] = momentum * accums[i] + g
            values[i] = values[i] - lrs[t] * accums[i]
    return values


@ms.jit
def _compiled_step(opt, *grads):
    return opt(grads)


def _run(opt, params, mode, scale=1.0):
    for grads in GRADS:
        g = [Tensor((a * scale).astype(np.float32)) for a in grads]
        (opt(tuple(g)) if mode == "pynative" else _compiled_step(opt, *g))
    return [p.asnumpy() for p in params]


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_lars_around_momentum_matches_the_rule(mode):
    params = _params()
    opt = nn.LARS(nn.Momentum(params, 0.1, 0.9, weight_decay=0.05), epsilon=1e-8,
                  coefficient=0.02)
    got = _run(opt, params, mode)
    # Only the weight is scaled; the bias and the LayerNorm gamma are outside the default filter
    # and, LARS having taken the decay over, undecayed.
    want = _reference([0.1] * STEPS, 0.9, (0.05, 0.0, 0.0), coefficient=0.02, epsilon=1e-8)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert int(opt.global_step.asnumpy()[0]) == STEPS


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_use_clip_reads_the_wrapped_optimizers_dynamic_rate(mode):
    params = _params()
    lrs = [0.2, 0.1, 0.05, 0.02]
    # a large coefficient, so that some steps clip at 1 and others do not
    opt = nn.LARS(nn.Momentum(params, lrs, 0.5), coefficient=0.1, use_clip=True,
                  lars_filter=lambda p: "gamma" not in p.name)
    got = _run(opt, params, mode)
    want = _reference(lrs, 0.5, (0.0, 0.0, 0.0), coefficient=0.1, use_clip=True,
                      lars=(True, True, False))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_the_loss_scale_is_undone_before_the_trust_ratio():
    scaled, plain = _params(), _params()
    opt = nn.LARS(nn.Momentum(scaled, 0.1, 0.9, weight_decay=0.05, loss_scale=8.0))
    ref = nn.LARS(nn.Momentum(plain, 0.1, 0.9, weight_decay=0.05))
    for got, want in zip(_run(opt, scaled, "pynative", scale=8.0), _run(ref, plain, "pynative")):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_lars_takes_the_decay_over_and_delegates_the_rate():
    params = _params()
    inner = nn.SGD(params, 0.3, weight_decay=0.1)
    opt = nn.LARS(inner)
    assert inner.get_weight_decay() == 0.0 and opt.get_weight_decay() == 0.1
    np.testing.assert_allclose(opt.get_lr().asnumpy(), 0.3)
    assert opt.learning_rate is inner.learning_rate and opt.global_step is inner.global_step
    assert opt.parameters is inner.parameters


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_train_one_step_cell_with_lars(mode):
    def train(run_mode):
        ms.set_seed(4)
        net = nn.Dense(4, 3)
        loss = nn.WithLossCell(net, nn.MSELoss())
        opt = nn.LARS(nn.Momentum(net.trainable_params(), 0.5, 0.9, weight_decay=1e-3),
                      coefficient=0.05)
        step = nn.TrainOneStepCell(loss, opt)
        x = Tensor(RNG.standard_normal((8, 4)).astype(np.float32))
        y = Tensor(RNG.standard_normal((8, 3)).astype(np.float32))
        ms.set_context(mode=run_mode)
        try:
            losses = [float(step(x, y).asnumpy()) for _ in range(3)]
        finally:
            ms.set_context(mode=ms.PYNATIVE_MODE)
        return losses, [p.asnumpy() for p in net.trainable_params()]

    state = RNG.bit_generator.state
    want_losses, want_params = train(ms.PYNATIVE_MODE)
    RNG.bit_generator.state = state
    losses, params = train(mode)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    assert losses[2] < losses[0]
    for g, w in zip(params, want_params):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


def test_argument_errors():
    params = _params()
    inner = nn.Momentum(params, 0.1, 0.9)
    with pytest.raises(TypeError, match="LARS: optimizer must be a kiln.nn Optimizer"):
        nn.LARS([inner])
    with pytest.raises(TypeError, match="LARS: epsilon must be a float"):
        nn.LARS(inner, epsilon=1)
    with pytest.raises(TypeError, match="LARS: coefficient must be a float"):
        nn.LARS(inner, coefficient="0.1")
    with pytest.raises(TypeError, match="LARS: use_clip must be a bool"):
        nn.LARS(inner, use_clip=1)
    with pytest.raises(ValueError, match="LARS: got 2 gradients for 3 parameters"):
        nn.LARS(nn.Momentum(_params(), 0.1, 0.9))((Tensor(np.ones((3, 2), np.float32)),) * 2)
    groups = [{"params": params[:1], "lr": [0.1, 0.2]}, {"params": params[1:], "lr": 0.1}]
    with pytest.raises(ValueError, match="LARS: grouped dynamic learning rates"):
        nn.LARS(nn.Momentum(groups, 0.1, 0.9), use_clip=True)
