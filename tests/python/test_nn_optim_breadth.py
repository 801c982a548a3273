"""RMSProp, Adagrad, ProximalAdagrad, Adadelta, AdaMax, Lamb, FTRL, ASGD and Rprop against NumPy
references of
MindSpore's documented update rules over several steps, in PyNative and compiled; parameter
groups (lr, weight_decay, grad_centralization, order_params) and a Cell as weight_decay."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn

STEPS = 4
RNG = np.random.default_rng(3)
INIT = [RNG.standard_normal((3, 2)).astype(np.float32), RNG.standard_normal(4).astype(np.float32)]
GRADS = [[RNG.standard_normal(p.shape).astype(np.float32) for p in INIT] for _ in range(STEPS)]


def rmsprop(p, g, s, t, lr=0.1, decay=0.9, momentum=0.0, eps=1e-10, centered=False):
    s.setdefault("ms", np.ones_like(p))
    s.setdefault("mom", np.zeros_like(p))
    s.setdefault("mg", np.zeros_like(p))
    s["ms"] = decay * s["ms"] + (1 - decay) * g * g
    denom = s["ms"]
    if centered:
        s["mg"] = decay * s["mg"] + (1 - decay) * g
        denom = s["ms"] - s["mg"] ** 2
    s["mom"] = momentum * s["mom"] + lr * g / np.sqrt(denom + eps)
    return p - s["mom"]


def adagrad(p, g, s, t, lr=0.001, accum=0.1, update_slots=True):
    s.setdefault("accum", np.full_like(p, accum))
    if update_slots:
        s["accum"] = s["accum"] + g * g
    return p - lr * g / np.sqrt(s["accum"])


def proximal_adagrad(p, g, s, t, lr=0.001, accum=0.1, l1=0.0, l2=0.0):
    s.setdefault("accum", np.full_like(p, accum))
    s["accum"] = s["accum"] + g * g
    prox = p - lr * g / np.sqrt(s["accum"])
    return np.sign(prox) / (1 + lr * l2) * np.maximum(np.abs(prox) - lr * l1, 0.0)


def adadelta(p, g, s, t, lr=1.0, rho=0.9, eps=1e-6):
    s.setdefault("a", np.zeros_like(p))
    s.setdefault("u", np.zeros_like(p))
    s["a"] = rho * s["a"] + (1 - rho) * g * g
    update = np.sqrt(s["u"] + eps) * g / np.sqrt(s["a"] + eps)
    s["u"] = rho * s["u"] + (1 - rho) * update * update
    return p - lr * update


def adamax(p, g, s, t, lr=0.001, b1=0.9, b2=0.999, eps=1e-8):
    s.setdefault("m", np.zeros_like(p))
    s.setdefault("v", np.zeros_like(p))
    s["m"] = b1 * s["m"] + (1 - b1) * g
    s["v"] = np.maximum(b2 * s["v"], np.abs(g))
    return p - lr / (1 - b1 ** t) * s["m"] / (s["v"] + eps)


def lamb(p, g, s, t, lr=0.01, b1=0.9, b2=0.999, eps=1e-6, wd=0.0):
    s.setdefault("m", np.zeros_like(p))
    s.setdefault("v", np.zeros_like(p))
    s["m"] = b1 * s["m"] + (1 - b1) * g
    s["v"] = b2 * s["v"] + (1 - b2) * g * g
    update = s["m"] / (1 - b1 ** t) / (np.sqrt(s["v"] / (1 - b2 ** t)) + eps) + wd * p
    w_norm, g_norm = np.linalg.norm(p), np.linalg.norm(g)
    trust = w_norm / np.linalg.norm(update) if w_norm > 0 and g_norm > 0 else 1.0
    return p - lr * np.clip(trust, 0, 10) * update


def ftrl(p, g, s, t, lr=0.001, accum=0.1, lr_power=-0.5, l1=0.0, l2=0.0):
    s.setdefault("accum", np.full_like(p, accum))
    s.setdefault("linear", np.zeros_like(p))
    new = s["accum"] + g * g
    s["linear"] = s["linear"] + g - (new ** -lr_power - s["accum"] ** -lr_power) / lr * p
    quad = new ** -lr_power / lr + 2 * l2
    s["accum"] = new
    lin = s["linear"]
    return np.where(np.abs(lin) > l1, (np.sign(lin) * l1 - lin) / quad, 0.0)


def asgd(p, g, s, t, lr=0.1, lambd=1e-4, alpha=0.75, t0=1e6):
    s.setdefault("eta", 0.0)
    s.setdefault("mu", 1.0)
    s.setdefault("ax", np.zeros_like(p))
    if t == 1:
        s["eta"] = lr
    p = p * (1 - lambd * s["eta"]) - s["eta"] * g
    s["ax"] = s["ax"] + (p - s["ax"]) * s["mu"] if s["mu"] != 1 else p
    s["eta"] = lr / (1 + lambd * lr * t) ** alpha
    s["mu"] = 1 / max(1, t - t0)
    return p


def rprop(p, g, s, t, lr=0.1, etas=(0.5, 1.2), sizes=(1e-6, 50.0)):
    s.setdefault("prev", np.zeros_like(p))
    s.setdefault("size", np.zeros_like(p))
    size = np.full_like(p, lr) if t == 1 else s["size"]
    trend = np.sign(g * s["prev"])
    factor = np.where(trend > 0, etas[1], np.where(trend < 0, etas[0], 1.0))
    size = np.clip(size * factor, *sizes)
    g = np.where(factor == etas[0], 0.0, g)
    s["prev"], s["size"] = g, size
    return p - np.sign(g) * size


CASES = {
    "rmsprop": (lambda ps: nn.RMSProp(ps), rmsprop),
    "rmsprop_centered_momentum": (
        lambda ps: nn.RMSProp(ps, 0.05, momentum=0.5, centered=True),
        lambda *a: rmsprop(*a, lr=0.05, momentum=0.5, centered=True)),
    "adagrad": (lambda ps: nn.Adagrad(ps, learning_rate=0.1),
                lambda *a: adagrad(*a, lr=0.1)),
    "adagrad_frozen_slots": (lambda ps: nn.Adagrad(ps, 0.5, 0.1, update_slots=False),
                             lambda *a: adagrad(*a, lr=0.1, accum=0.5, update_slots=False)),
    "proximal_adagrad": (lambda ps: nn.ProximalAdagrad(ps, learning_rate=0.1),
                         lambda *a: proximal_adagrad(*a, lr=0.1)),
    # l1 = 0.3 zeroes the entries whose proximal step ends within lr * l1 of zero
    "proximal_adagrad_l1_l2": (lambda ps: nn.ProximalAdagrad(ps, 0.2, 0.5, l1=0.3, l2=0.2),
                               lambda *a: proximal_adagrad(*a, lr=0.5, accum=0.2, l1=0.3,
                                                           l2=0.2)),
    "adadelta": (lambda ps: nn.Adadelta(ps, rho=0.8), lambda *a: adadelta(*a, rho=0.8)),
    "adamax": (lambda ps: nn.AdaMax(ps, 0.05), lambda *a: adamax(*a, lr=0.05)),
    "lamb": (lambda ps: nn.Lamb(ps, 0.01), lamb),
    "lamb_decay": (lambda ps: nn.Lamb(ps, 0.02, weight_decay=0.1),
                   lambda *a: lamb(*a, lr=0.02, wd=0.1)),
    "ftrl": (lambda ps: nn.FTRL(ps), ftrl),
    "ftrl_l1_l2": (lambda ps: nn.FTRL(ps, learning_rate=0.1, l1=0.05, l2=0.1),
                   lambda *a: ftrl(*a, lr=0.1, l1=0.05, l2=0.1)),
    "asgd": (lambda ps: nn.ASGD(ps), asgd),
    "asgd_averaging": (lambda ps: nn.ASGD(ps, 0.05, lambd=0.01, t0=1.0),
                       lambda *a: asgd(*a, lr=0.05, lambd=0.01, t0=1.0)),
    "rprop": (lambda ps: nn.Rprop(ps), rprop),
}


def _params():
    return [ms.Parameter(Tensor(a.copy()), name=n) for a, n in zip(INIT, ("w", "b"))]


def _reference(rule, steps=STEPS):
    values = [a.astype(np.float64) for a in INIT]
    states = [{}, {}]
    for t in range(1, steps + 1):
        values = [rule(p, g.astype(np.float64), s, t)
                  for p, g, s in zip(values, GRADS[t - 1], states)]
    return values


@ms.jit
def _compiled_step(opt, g0, g1):
    return opt((g0, g1))


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_updates_match_mindspore_rules(name, mode):
    make, rule = CASES[name]
    params = _params()
    opt = make(params)
    for grads in GRADS:
        g = [Tensor(a) for a in grads]
        (opt(tuple(g)) if mode == "pynative" else _compiled_step(opt, *g))
    for got, want in zip(params, _reference(rule)):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=2e-5, atol=2e-6)
    assert int(opt.global_step.asnumpy()[0]) == STEPS


def test_state_names_and_initial_values():
    params = _params()
    rms = nn.RMSProp(params, centered=True)
    assert [p.name for p in rms.ms] == ["mean_square.w", "mean_square.b"]
    np.testing.assert_array_equal(rms.ms[0].asnumpy(), np.ones((3, 2)))
    assert [p.name for p in rms.mg] == ["mean_grad.w", "mean_grad.b"]
    ada = nn.Adagrad(params, accum=0.3)
    np.testing.assert_allclose(ada.accum[1].asnumpy(), np.full(4, 0.3))
    asgd_opt = nn.ASGD(params)
    assert [p.name for p in asgd_opt.eta] == ["eta_w", "eta_b"]
    assert nn.AdaMax(params).beta1_power.name == "beta1_power"
    assert [p.name for p in nn.FTRL(params).linear] == ["linear.w", "linear.b"]
    prox = nn.ProximalAdagrad(params, accum=0.4)
    assert [p.name for p in prox.accum] == ["accum.w", "accum.b"]
    np.testing.assert_allclose(prox.accum[0].asnumpy(), np.full((3, 2), 0.4))


def test_argument_errors_are_mindspore_types():
    params = _params()
    with pytest.raises(TypeError, match="RMSProp: decay must be a float"):
        nn.RMSProp(params, decay=1)
    with pytest.raises(ValueError, match="RMSProp: epsilon"):
        nn.RMSProp(params, epsilon=0.0)
    with pytest.raises(ValueError, match="Adadelta: rho"):
        nn.Adadelta(params, rho=1.5)
    with pytest.raises(ValueError, match="AdaMax: beta1"):
        nn.AdaMax(params, beta1=1.0)
    with pytest.raises(ValueError, match="FTRL: lr_power"):
        nn.FTRL(params, lr_power=0.5)
    with pytest.raises(ValueError, match="FTRL: dynamic"):
        nn.FTRL(params, learning_rate=[0.1, 0.2])
    with pytest.raises(TypeError, match="Rprop: etas must be a tuple"):
        nn.Rprop(params, etas=[0.5, 1.2])
    with pytest.raises(ValueError, match="Rprop: etaplus"):
        nn.Rprop(params, etas=(0.5, 1.0))
    with pytest.raises(TypeError, match="ASGD: t0 must be a float"):
        nn.ASGD(params, t0=10)
    with pytest.raises(ValueError, match="ProximalAdagrad: l1"):
        nn.ProximalAdagrad(params, l1=-0.1)
    with pytest.raises(TypeError, match="ProximalAdagrad: use_locking must be a bool"):
        nn.ProximalAdagrad(params, use_locking=1)


# ---- parameter groups ----

def test_groups_lr_weight_decay_and_order_params():
    w, b = _params()
    groups = [{"params": [b], "lr": 0.05, "weight_decay": 0.1},
              {"params": [w]},
              {"order_params": [w, b]}]
    opt = nn.RMSProp(groups, learning_rate=0.2, weight_decay=0.01)
    assert [p.name for p in opt.parameters] == ["w", "b"]      # order_params decides
    opt((Tensor(GRADS[0][0]), Tensor(GRADS[0][1])))
    want_w = rmsprop(INIT[0].astype(np.float64), GRADS[0][0] + 0.01 * INIT[0], {}, 1, lr=0.2)
    want_b = rmsprop(INIT[1].astype(np.float64), GRADS[0][1] + 0.1 * INIT[1], {}, 1, lr=0.05)
    np.testing.assert_allclose(w.asnumpy(), want_w, rtol=1e-5)
    np.testing.assert_allclose(b.asnumpy(), want_b, rtol=1e-5)
    lrs = opt.get_lr()
    assert len(lrs) == 2 and np.isclose(float(lrs[1].asnumpy()), 0.05)


def test_groups_decay_parameters_named_gamma_too():
    gamma = ms.Parameter(Tensor(np.ones(3, np.float32)), name="bn.gamma")
    grouped = nn.SGD([{"params": [gamma], "weight_decay": 0.5}], learning_rate=1.0)
    grouped((Tensor(np.zeros(3, np.float32)),))
    np.testing.assert_allclose(gamma.asnumpy(), [0.5] * 3)     # decayed: groups have no filter
    beta = ms.Parameter(Tensor(np.ones(3, np.float32)), name="bn.beta")
    plain = nn.SGD([beta], learning_rate=1.0, weight_decay=0.5)
    plain((Tensor(np.zeros(3, np.float32)),))
    np.testing.assert_allclose(beta.asnumpy(), [1.0] * 3)      # ungrouped: skipped by name


def test_group_errors():
    w, b = _params()
    with pytest.raises(ValueError, match="order_params has 1 parameters"):
        nn.Adagrad([{"params": [w, b]}, {"order_params": [w]}])
    with pytest.raises(RuntimeError, match="already exists"):
        nn.Adagrad([{"params": [w]}, {"params": [w]}])
    with pytest.raises(ValueError, match="only include the 'order_params' key"):
        nn.Adagrad([{"params": [w]}, {"order_params": [w], "lr": 0.1}])
    with pytest.raises(TypeError, match="grad_centralization must be a bool"):
        nn.Adagrad([{"params": [w], "grad_centralization": 1}])


def test_grad_centralization_on_wide_gradients():
    kernel = ms.Parameter(Tensor(np.zeros((2, 16, 1, 1), np.float32)), name="conv.weight")
    bias = ms.Parameter(Tensor(np.zeros(2, np.float32)), name="conv.bias")
    opt = nn.SGD([{"params": [kernel, bias], "grad_centralization": True}], learning_rate=1.0)
    gk = RNG.standard_normal((2, 16, 1, 1)).astype(np.float32)
    gb = RNG.standard_normal(2).astype(np.float32)
    opt((Tensor(gk), Tensor(gb)))
    np.testing.assert_allclose(kernel.asnumpy(), -(gk - gk.mean((1, 2, 3), keepdims=True)),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bias.asnumpy(), -gb, rtol=1e-6)   # rank 1: left alone


class _HalvingDecay(nn.Cell):
    def construct(self, global_step):
        return ms.ops.pow(0.5, ms.ops.cast(global_step, ms.float32)) * 0.2


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_cell_as_weight_decay(mode):
    w = ms.Parameter(Tensor(np.ones(3, np.float32)), name="w")
    opt = nn.SGD([w], learning_rate=0.1, weight_decay=_HalvingDecay())
    assert opt.dynamic_weight_decay
    zero = Tensor(np.zeros(3, np.float32))
    want = np.ones(3)
    for t in range(3):
        if mode == "pynative":
            opt((zero,))
        else:
            _compiled_single(opt, zero)
        want = want - 0.1 * (0.2 * 0.5 ** t) * want
    np.testing.assert_allclose(w.asnumpy(), want, rtol=1e-6)


@ms.jit
def _compiled_single(opt, g):
    return opt((g,))


def test_loss_scale_unscales_the_gradient_not_the_decay():
    # MindSpore 2.10 (run): weight_decay is pre-multiplied by loss_scale, so the step is
    # g / loss_scale + weight_decay * p.
    w = ms.Parameter(Tensor(np.array([1.0, 2.0], np.float32)), name="w")
    nn.SGD([w], learning_rate=1.0, weight_decay=0.5, loss_scale=4.0)(
        (Tensor(np.array([0.5, -1.0], np.float32)),))
    np.testing.assert_allclose(w.asnumpy(), [0.375, 1.25])


# ---- dynamic_lr lists (MindSpore's documented examples and formulas) ----

def test_dynamic_lr_lists():
    approx = pytest.approx
    assert nn.piecewise_constant_lr([2, 5, 10], [0.1, 0.05, 0.01]) == \
        [0.1] * 2 + [0.05] * 3 + [0.01] * 5
    assert nn.exponential_decay_lr(0.1, 0.9, 6, 2, 1) == approx([0.1, 0.1, 0.09, 0.09, 0.081,
                                                                 0.081])
    assert nn.exponential_decay_lr(0.1, 0.5, 6, 1, 2, True) == approx(
        [0.1, 0.1, 0.05, 0.05, 0.025, 0.025])
    assert nn.natural_exp_decay_lr(0.1, 0.9, 6, 2, 2, True) == approx(
        [0.1] * 4 + [0.1 * np.exp(-1.8)] * 2)
    assert nn.natural_exp_decay_lr(0.1, 0.9, 4, 1, 2) == approx(
        [0.1 * np.exp(-0.9 * e) for e in range(4)])
    assert nn.inverse_decay_lr(0.1, 0.5, 6, 1, 1, True) == approx(
        [0.1 / (1 + 0.5 * e) for e in range(6)])
    assert nn.inverse_decay_lr(0.1, 0.5, 4, 1, 2) == approx(
        [0.1 / (1 + 0.5 * e / 2) for e in range(4)])
    assert nn.cosine_decay_lr(0.01, 0.1, 6, 2, 2) == approx([0.1, 0.1, 0.055, 0.055, 0.01,
                                                             0.01])
    assert nn.polynomial_decay_lr(0.1, 0.01, 6, 2, 2, 0.5) == approx(
        [0.1, 0.1, 0.09 * 0.5 ** 0.5 + 0.01, 0.09 * 0.5 ** 0.5 + 0.01, 0.01, 0.01])
    grown = nn.polynomial_decay_lr(0.1, 0.01, 6, 1, 2, 1.0, update_decay_epoch=True)
    spans = [2, 2, 2, 4, 4, 6]
    assert grown == approx([0.09 * (1 - e / s) + 0.01 for e, s in zip(range(6), spans)])
    assert nn.warmup_lr(0.1, 6, 2, 2) == approx([0.0, 0.0, 0.05, 0.05, 0.1, 0.1])


def test_dynamic_lr_argument_checks():
    with pytest.raises(TypeError, match="exponential_decay_lr: learning_rate must be a float"):
        nn.exponential_decay_lr(1, 0.9, 6, 2, 1)
    with pytest.raises(ValueError, match="inverse_decay_lr: total_step must be > 0"):
        nn.inverse_decay_lr(0.1, 0.9, 0, 2, 1)
    with pytest.raises(TypeError, match="natural_exp_decay_lr: decay_epoch must be an int"):
        nn.natural_exp_decay_lr(0.1, 0.9, 6, 2, 1.5)
    with pytest.raises(ValueError, match="cosine_decay_lr: max_lr must be greater"):
        nn.cosine_decay_lr(0.1, 0.1, 6, 2, 2)
    with pytest.raises(ValueError, match="piecewise_constant_lr: milestone must be increasing"):
        nn.piecewise_constant_lr([3, 2], [0.1, 0.2])
    with pytest.raises(TypeError, match="polynomial_decay_lr: update_decay_epoch"):
        nn.polynomial_decay_lr(0.1, 0.01, 6, 2, 2, 0.5, update_decay_epoch=1)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_a_dynamic_lr_list_drives_a_new_optimizer(mode):
    lrs = nn.polynomial_decay_lr(0.1, 0.01, STEPS, 1, 2, 1.0)
    params = _params()
    opt = nn.RMSProp(params, learning_rate=lrs)
    for grads in GRADS:
        g = [Tensor(a) for a in grads]
        (opt(tuple(g)) if mode == "pynative" else _compiled_step(opt, *g))
    values = [a.astype(np.float64) for a in INIT]
    states = [{}, {}]
    for t in range(1, STEPS + 1):
        values = [rmsprop(p, g.astype(np.float64), s, t, lr=lrs[t - 1])
                  for p, g, s in zip(values, GRADS[t - 1], states)]
    for got, want in zip(params, values):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=2e-5, atol=2e-6)
