"""kiln.experimental.optim (MindSpore's PyTorch-style optimizers and lr_scheduler) against NumPy
references of MindSpore's update rules over several steps, parameter groups, schedulers in the
chained and closed forms, and a compiled training step."""
import math

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn, ops
from kiln.experimental import optim

RNG = np.random.default_rng(13)
INIT = [RNG.standard_normal((3, 2)).astype(np.float32), RNG.standard_normal(4).astype(np.float32)]
GRADS = [[RNG.standard_normal(p.shape).astype(np.float32) for p in INIT] for _ in range(4)]


def _params():
    return [ms.Parameter(Tensor(a.copy()), name=n) for a, n in zip(INIT, ("w", "b"))]


def np_sgd(p, g, s, t, lr, momentum=0.0, damp=0.0, wd=0.0, nesterov=False):
    g = g + wd * p
    if momentum > 0:
        s["buf"] = g if t == 1 else momentum * s["buf"] + (1 - damp) * g
        g = g + momentum * s["buf"] if nesterov else s["buf"]
    return p - lr * g


def np_adam(p, g, s, t, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0):
    g = g + wd * p
    s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0) + (1 - b2) * g * g
    lr_t = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    return p - lr_t * s["m"] / (np.sqrt(s["v"]) + eps)


def np_adamw(p, g, s, t, lr, b1=0.9, b2=0.999, eps=1e-8, wd=1e-2, amsgrad=False):
    p = p * (1 - lr * wd)
    s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0) + (1 - b2) * g * g
    v = s["v"]
    if amsgrad:
        s["vmax"] = np.maximum(s.get("vmax", 0), v)
        v = s["vmax"]
    denom = np.sqrt(v) / math.sqrt(1 - b2 ** t) + eps
    return p - lr / (1 - b1 ** t) * s["m"] / denom


def np_rmsprop(p, g, s, t, lr, alpha=0.99, eps=1e-8, wd=0.0, momentum=0.0, centered=False):
    g = g + wd * p
    s["ms"] = alpha * s.get("ms", 0) + (1 - alpha) * g * g
    if centered:
        s["mg"] = alpha * s.get("mg", 0) + (1 - alpha) * g
        avg = np.sqrt(s["ms"] - s["mg"] ** 2) + eps
    else:
        avg = np.sqrt(s["ms"]) + eps
    if momentum > 0:
        s["buf"] = momentum * s.get("buf", 0) + g / avg
        return p - lr * s["buf"]
    return p - lr * g / avg


def np_adagrad(p, g, s, t, lr, lr_decay=0.0, wd=0.0, init=0.0, eps=1e-10):
    g = g + wd * p
    s["acc"] = s.get("acc", init) + g * g
    return p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(s["acc"]) + eps)


def np_adadelta(p, g, s, t, lr, rho=0.9, eps=1e-6, wd=0.0):
    g = g + wd * p
    s["acc"] = rho * s.get("acc", 0) + (1 - rho) * g * g
    update = np.sqrt(s.get("upd", 0) + eps) * g / np.sqrt(s["acc"] + eps)
    s["upd"] = rho * s.get("upd", 0) + (1 - rho) * update * update
    return p - lr * update


def np_adamax(p, g, s, t, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0):
    g = g + wd * p
    s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    s["u"] = np.maximum(b2 * s.get("u", 0), np.abs(g) + eps)
    return p - lr / (1 - b1 ** t) * s["m"] / s["u"]


CASES = {
    "sgd": (lambda ps: optim.SGD(ps, 0.1), lambda *a: np_sgd(*a, lr=0.1)),
    "sgd_momentum": (lambda ps: optim.SGD(ps, 0.1, momentum=0.9, dampening=0.2,
                                          weight_decay=0.01),
                     lambda *a: np_sgd(*a, lr=0.1, momentum=0.9, damp=0.2, wd=0.01)),
    "sgd_nesterov": (lambda ps: optim.SGD(ps, 0.1, momentum=0.9, nesterov=True),
                     lambda *a: np_sgd(*a, lr=0.1, momentum=0.9, nesterov=True)),
    "adam": (lambda ps: optim.Adam(ps, 0.05, weight_decay=0.1),
             lambda *a: np_adam(*a, lr=0.05, wd=0.1)),
    "adamw": (lambda ps: optim.AdamW(ps, 0.05), lambda *a: np_adamw(*a, lr=0.05)),
    "adamw_amsgrad": (lambda ps: optim.AdamW(ps, 0.05, weight_decay=0.1, amsgrad=True),
                      lambda *a: np_adamw(*a, lr=0.05, wd=0.1, amsgrad=True)),
    "rmsprop": (lambda ps: optim.RMSprop(ps, 0.01), lambda *a: np_rmsprop(*a, lr=0.01)),
    "rmsprop_centered_momentum": (
        lambda ps: optim.RMSprop(ps, 0.01, alpha=0.9, momentum=0.5, centered=True,
                                 weight_decay=0.1),
        lambda *a: np_rmsprop(*a, lr=0.01, alpha=0.9, momentum=0.5, centered=True, wd=0.1)),
    "adagrad": (lambda ps: optim.Adagrad(ps, 0.1, lr_decay=0.5, weight_decay=0.1,
                                         initial_accumulator_value=0.2),
                lambda *a: np_adagrad(*a, lr=0.1, lr_decay=0.5, wd=0.1, init=0.2)),
    "adadelta": (lambda ps: optim.Adadelta(ps, 1.0, rho=0.8, weight_decay=0.1),
                 lambda *a: np_adadelta(*a, lr=1.0, rho=0.8, wd=0.1)),
    "adamax": (lambda ps: optim.Adamax(ps, 0.05, weight_decay=0.1),
               lambda *a: np_adamax(*a, lr=0.05, wd=0.1)),
}


@ms.jit
def _compiled(opt, g0, g1):
    return opt((g0, g1))


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_updates_match_the_rules(name, mode):
    make, rule = CASES[name]
    params = _params()
    opt = make(params)
    for grads in GRADS:
        g = [Tensor(a) for a in grads]
        (opt(tuple(g)) if mode == "pynative" else _compiled(opt, *g))
    values, states = [a.astype(np.float64) for a in INIT], [{}, {}]
    for t, grads in enumerate(GRADS, 1):
        values = [rule(p, g.astype(np.float64), s, t) for p, g, s in zip(values, grads, states)]
    for got, want in zip(params, values):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=2e-5, atol=2e-6)


def test_groups_maximize_and_errors():
    w, b = _params()
    opt = optim.SGD([{"params": [w], "lr": 0.5}, {"params": b, "weight_decay": 0.1}], 0.1,
                    maximize=True)
    assert [p.name for p in opt.lrs] == ["learning_rate_group_0", "learning_rate_group_1"]
    assert opt.param_groups[1]["lr"].asnumpy() == np.float32(0.1)
    opt((Tensor(GRADS[0][0]), Tensor(GRADS[0][1])))
    np.testing.assert_allclose(w.asnumpy(), INIT[0] + 0.5 * GRADS[0][0], rtol=1e-6)
    np.testing.assert_allclose(b.asnumpy(), INIT[1] - 0.1 * (-GRADS[0][1] + 0.1 * INIT[1]),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.Adam([{"params": [w]}, {"params": [w]}])
    with pytest.raises(TypeError, match="ordered collections"):
        optim.Adam([{"params": {w}}])
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        optim.AdamW([w], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="nesterov"):
        optim.SGD([w], 0.1, nesterov=True)


def _trace(make, steps=9):
    ps = _params()
    opt = optim.SGD([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.2}], 0.1)
    sched = make(opt)
    out = []
    for _ in range(steps):
        out.append([float(v.asnumpy()) for v in sched.get_last_lr()])
        sched.step()
    sched.step(2)
    out.append([float(v.asnumpy()) for v in sched.get_last_lr()])
    assert float(opt.lrs[0].asnumpy()) == pytest.approx(out[-1][0])
    return np.array(out)


def _closed(fn):
    return [[fn(0.1, e), fn(0.2, e)] for e in range(9)] + [[fn(0.1, 2), fn(0.2, 2)]]


@pytest.mark.parametrize("name,make,closed", [
    ("step", lambda o: optim.lr_scheduler.StepLR(o, 2, 0.5), lambda b, e: b * 0.5 ** (e // 2)),
    ("exp", lambda o: optim.lr_scheduler.ExponentialLR(o, 0.8), lambda b, e: b * 0.8 ** e),
    ("linear", lambda o: optim.lr_scheduler.LinearLR(o, 0.25, 1.0, 4),
     lambda b, e: b * (0.25 + 0.75 * min(e, 4) / 4)),
    ("const", lambda o: optim.lr_scheduler.ConstantLR(o, 0.5, 3),
     lambda b, e: b * (0.5 if e < 3 else 1.0)),
    ("poly", lambda o: optim.lr_scheduler.PolynomialLR(o, 4, 2.0),
     lambda b, e: b * (1 - min(e, 4) / 4) ** 2),
    ("lambda", lambda o: optim.lr_scheduler.LambdaLR(o, lambda e: 0.9 ** e),
     lambda b, e: b * 0.9 ** e),
    ("cos", lambda o: optim.lr_scheduler.CosineAnnealingLR(o, 8, 0.001),
     lambda b, e: 0.001 + (b - 0.001) * (1 + math.cos(math.pi * e / 8)) / 2),
])
def test_schedulers(name, make, closed):
    np.testing.assert_allclose(_trace(make), _closed(closed), rtol=1e-5, atol=1e-7)


def test_multistep_and_multiplicative():
    trace = _trace(lambda o: optim.lr_scheduler.MultiStepLR(o, [2, 3, 3, 6], 0.5))
    factors = [1, 1, 0.5, 0.125, 0.125, 0.125, 0.0625, 0.0625, 0.0625, 0.5]
    np.testing.assert_allclose(trace[:, 0], [0.1 * f for f in factors], rtol=1e-5)
    trace = _trace(lambda o: optim.lr_scheduler.MultiplicativeLR(o, lambda e: 0.95))
    np.testing.assert_allclose(trace[:9, 1], [0.2 * 0.95 ** e for e in range(9)], rtol=1e-5)
    with pytest.raises(TypeError, match="StepLR"):
        optim.lr_scheduler.StepLR(optim.SGD(_params(), 0.1), 2, 1)


def test_a_compiled_training_step_sees_the_scheduled_rate():
    ms.set_seed(0)
    net = nn.Dense(3, 2)
    opt = optim.Adam(net.trainable_params(), 0.1)
    sched = optim.lr_scheduler.StepLR(opt, 1, 0.5)
    grad_fn = ms.value_and_grad(lambda x: ops.mean(net(x) ** 2), None, opt.parameters)
    x = Tensor(RNG.standard_normal((4, 3)).astype(np.float32))

    @ms.jit
    def train_step(data):
        loss, grads = grad_fn(data)
        opt(grads)
        return loss

    before = ms.get_jit_stats()["compiles"]
    weights = []
    for _ in range(3):
        train_step(x)
        weights.append(net.weight.asnumpy().copy())
        sched.step()
    assert ms.get_jit_stats()["compiles"] - before == 1
    assert float(opt.lrs[0].asnumpy()) == pytest.approx(0.0125)
    step_sizes = [np.abs(weights[i + 1] - weights[i]).max() for i in range(2)]
    assert step_sizes[1] < step_sizes[0]


@pytest.mark.parametrize("cls", [optim.RMSprop, optim.Adagrad, optim.Adadelta, optim.Adamax])
def test_adaptive_maximize_and_arguments(cls):
    a, b = _params(), _params()
    up, down = cls(a, maximize=True), cls(b)
    for grads in GRADS[:2]:
        up(tuple(Tensor(g) for g in grads))
        down(tuple(Tensor(-g) for g in grads))
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.asnumpy(), y.asnumpy(), rtol=1e-6)
    with pytest.raises(ValueError):
        cls(_params(), lr=-1.0)
