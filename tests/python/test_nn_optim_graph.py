"""Optimizers inside compiled training steps: same parameters as PyNative, one compile.

The optimizers compute the step, learning rates and per-step choices (SGD's first step, Adam's
bias correction) with tensor ops, so a jitted step reads them at run time instead of baking
them in as constants that change (and recompile) every step.
"""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn

STEPS = 4

OPTIMIZERS = {
    "sgd": lambda p: nn.SGD(p, 0.1),
    "sgd_momentum": lambda p: nn.SGD(p, 0.1, momentum=0.9, dampening=0.2),
    "sgd_nesterov": lambda p: nn.SGD(p, 0.1, momentum=0.9, nesterov=True),
    "sgd_weight_decay": lambda p: nn.SGD(p, 0.1, momentum=0.8, weight_decay=0.05),
    "momentum": lambda p: nn.Momentum(p, 0.1, 0.9),
    "momentum_nesterov_wd": lambda p: nn.Momentum(p, 0.1, 0.9, weight_decay=0.01,
                                                  use_nesterov=True),
    "adam": lambda p: nn.Adam(p, 0.05),
    "adam_amsgrad_wd": lambda p: nn.Adam(p, 0.05, use_amsgrad=True, weight_decay=0.01),
    "adamw": lambda p: nn.AdamW(p, 0.05, weight_decay=0.1),
    "adam_weight_decay": lambda p: nn.AdamWeightDecay(p, 0.05, weight_decay=0.01),
    "schedule_cosine": lambda p: nn.Adam(p, nn.CosineDecayLR(0.01, 0.1, 3)),
    "schedule_exp_stair": lambda p: nn.SGD(p, nn.ExponentialDecayLR(0.1, 0.5, 2, is_stair=True),
                                           momentum=0.9),
    "schedule_poly_update": lambda p: nn.Momentum(
        p, nn.PolynomialDecayLR(0.1, 0.01, 2, 2.0, update_decay_steps=True), 0.9),
    "schedule_warmup": lambda p: nn.SGD(p, nn.WarmUpLR(0.1, 3)),
    "lr_list": lambda p: nn.SGD(p, [0.1, 0.05, 0.02], momentum=0.9),
    "lr_groups": lambda p: nn.Momentum([{"params": [p[0]], "lr": 0.05}, {"params": [p[1]]}],
                                       nn.InverseDecayLR(0.1, 0.5, 1), 0.9),
}


def _data():
    rng = np.random.default_rng(7)
    x = Tensor(rng.standard_normal((8, 4)).astype(np.float32))
    y = Tensor((np.arange(8) % 3).astype(np.int32))
    return x, y


class _Setup:
    """A Dense net, loss, optimizer and value_and_grad, each step run by `step` below."""

    def __init__(self, make_opt):
        ms.set_seed(0)
        self.net = nn.Dense(4, 3)
        self.loss_fn = nn.CrossEntropyLoss()
        self.opt = make_opt(self.net.trainable_params())
        self.grad_fn = ms.value_and_grad(lambda x, y: self.loss_fn(self.net(x), y), None,
                                         self.opt.parameters)


def eager_step(grad_fn, opt, x, y):
    loss, grads = grad_fn(x, y)
    opt(grads)
    return loss


@ms.jit
def jitted_step(grad_fn, opt, x, y):
    # grad_fn and opt are constants of the graph (the cache is keyed by their identity).
    loss, grads = grad_fn(x, y)
    opt(grads)
    return loss


def _train(make_opt, step_fn, steps=STEPS):
    setup = _Setup(make_opt)
    x, y = _data()
    losses = [float(step_fn(setup.grad_fn, setup.opt, x, y).asnumpy()) for _ in range(steps)]
    params = [p.asnumpy().copy() for p in setup.opt.parameters]
    return setup, losses, params


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_jitted_step_matches_pynative_and_compiles_once(name):
    make_opt = OPTIMIZERS[name]
    _, eager_losses, eager_params = _train(make_opt, eager_step)
    before = ms.get_jit_stats()
    setup, graph_losses, graph_params = _train(make_opt, jitted_step)
    after = ms.get_jit_stats()
    assert after["compiles"] - before["compiles"] == 1, \
        after["recompile_reasons"][len(before["recompile_reasons"]):]
    assert after["cache_hits"] - before["cache_hits"] == STEPS - 1
    np.testing.assert_allclose(graph_losses, eager_losses, rtol=1e-5, atol=1e-6)
    for g, e in zip(graph_params, eager_params):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    assert setup.opt.global_step.asnumpy().tolist() == [STEPS]
    assert not np.allclose(graph_params[0], _Setup(make_opt).net.weight.asnumpy())  # trained


def test_jitted_step_sees_learning_rate_set_data():
    make_opt = OPTIMIZERS["momentum"]
    runs = []
    for step_fn in (eager_step, jitted_step):
        setup = _Setup(make_opt)
        x, y = _data()
        before = ms.get_jit_stats()["compiles"]
        step_fn(setup.grad_fn, setup.opt, x, y)
        setup.opt.learning_rate.set_data(Tensor(np.float32(0.01)))
        step_fn(setup.grad_fn, setup.opt, x, y)
        step_fn(setup.grad_fn, setup.opt, x, y)
        if step_fn is jitted_step:
            assert ms.get_jit_stats()["compiles"] - before == 1
        runs.append([p.asnumpy().copy() for p in setup.opt.parameters])
    for g, e in zip(*runs):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_sgd_first_step_follows_a_restored_global_step():
    # SGD starts its momentum buffer at g on global_step 0, decided when the graph runs.
    make_opt = OPTIMIZERS["sgd_momentum"]
    runs = []
    for step_fn in (eager_step, jitted_step):
        setup = _Setup(make_opt)
        x, y = _data()
        step_fn(setup.grad_fn, setup.opt, x, y)
        step_fn(setup.grad_fn, setup.opt, x, y)
        setup.opt.global_step.set_data(Tensor(np.array([0], np.int32)))
        step_fn(setup.grad_fn, setup.opt, x, y)
        runs.append([p.asnumpy().copy() for p in setup.opt.parameters]
                    + [a.asnumpy().copy() for a in setup.opt.accum])
    for g, e in zip(*runs):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_schedules_in_a_graph_match_pynative():
    schedules = [nn.ExponentialDecayLR(0.1, 0.9, 2, is_stair=True),
                 nn.NaturalExpDecayLR(0.1, 0.9, 2), nn.InverseDecayLR(0.1, 0.5, 1),
                 nn.CosineDecayLR(0.01, 0.1, 6), nn.PolynomialDecayLR(0.1, 0.01, 6, 2.0),
                 nn.PolynomialDecayLR(0.1, 0.01, 2, 2.0, update_decay_steps=True),
                 nn.WarmUpLR(0.1, 6)]

    @ms.jit
    def all_rates(step):
        return tuple([s(step) for s in schedules])

    before = ms.get_jit_stats()["compiles"]
    for step in range(8):
        t = Tensor(np.array([step], np.int32))
        got = [float(r.asnumpy()) for r in all_rates(t)]
        want = [float(s(t).asnumpy()) for s in schedules]
        np.testing.assert_allclose(got, want, rtol=1e-6)
        assert [float(s(step).asnumpy()) for s in schedules] == pytest.approx(want, rel=1e-6)
    assert ms.get_jit_stats()["compiles"] - before == 1


def test_python_callable_lr_needs_pynative():
    # A Python-number callable (it reads the step's value) works eagerly, not in a graph.
    setup = _Setup(lambda p: nn.SGD(p, lambda step: 0.01 * (int(step.asnumpy()) + 1)))
    x, y = _data()
    eager_step(setup.grad_fn, setup.opt, x, y)
    assert setup.opt.global_step.asnumpy().tolist() == [1]
    with pytest.raises(TypeError, match="only known when"):
        jitted_step(setup.grad_fn, setup.opt, x, y)


def _train_one_step_cell(mode, steps=STEPS):
    ms.set_seed(0)
    net = nn.Dense(4, 3)
    opt = nn.Adam(net.trainable_params(), nn.WarmUpLR(0.05, 2))
    train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()), opt)
    x, y = _data()
    ms.set_context(mode=mode)
    try:
        before = ms.get_jit_stats()
        losses = [float(train(x, y).asnumpy()) for _ in range(steps)]
        after = ms.get_jit_stats()
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    return (losses, [p.asnumpy().copy() for p in opt.parameters],
            after["compiles"] - before["compiles"],
            after["recompile_reasons"][len(before["recompile_reasons"]):])


def test_train_one_step_cell_in_graph_mode():
    eager_losses, eager_params, eager_compiles, _ = _train_one_step_cell(ms.PYNATIVE_MODE)
    assert eager_compiles == 0
    losses, params, compiles, reasons = _train_one_step_cell(ms.GRAPH_MODE)
    assert compiles == 1, reasons
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5, atol=1e-6)
    for g, e in zip(params, eager_params):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
