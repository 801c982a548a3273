"""Optimizers against hand-computed NumPy updates; learning-rate values, lists and schedules."""
import math

import numpy as np
import pytest

import kiln as ms
from kiln import Parameter, Tensor, nn

RNG = np.random.default_rng(2)
STEPS = 4


def make_params():
    w0 = RNG.standard_normal((3, 2)).astype(np.float32)
    b0 = RNG.standard_normal((3,)).astype(np.float32)
    grads = [(RNG.standard_normal((3, 2)).astype(np.float32),
              RNG.standard_normal((3,)).astype(np.float32)) for _ in range(STEPS)]
    params = [Parameter(Tensor(w0.copy()), name="w"), Parameter(Tensor(b0.copy()), name="b")]
    return params, [w0.astype(np.float64), b0.astype(np.float64)], grads


def run(opt, params, grads):
    ids = [p._data_ptr for p in params]
    for g in grads:
        assert opt((Tensor(g[0]), Tensor(g[1]))) is True
    assert [p._data_ptr for p in params] == ids  # updated in place, same storage
    return [p.asnumpy() for p in params]


@pytest.mark.parametrize("momentum,dampening,nesterov,wd", [
    (0.0, 0.0, False, 0.0), (0.9, 0.0, False, 0.0), (0.9, 0.0, True, 0.0),
    (0.8, 0.3, False, 0.01), (0.9, 0.0, True, 0.05),
])
def test_sgd(momentum, dampening, nesterov, wd):
    params, ref, grads = make_params()
    lr = 0.1
    opt = nn.SGD(params, learning_rate=lr, momentum=momentum, dampening=dampening,
                 weight_decay=wd, nesterov=nesterov)
    got = run(opt, params, grads)
    accum = [None, None]
    for g in grads:
        for i in range(2):
            gi = g[i] + wd * ref[i]
            if momentum > 0:
                accum[i] = gi if accum[i] is None else momentum * accum[i] + (1 - dampening) * gi
                gi = gi + momentum * accum[i] if nesterov else accum[i]
            ref[i] = ref[i] - lr * gi
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert int(opt.global_step.asnumpy()[0]) == STEPS


@pytest.mark.parametrize("nesterov,wd", [(False, 0.0), (True, 0.0), (False, 0.1)])
def test_momentum(nesterov, wd):
    params, ref, grads = make_params()
    lr, mom = 0.05, 0.9
    opt = nn.Momentum(params, lr, mom, weight_decay=wd, use_nesterov=nesterov)
    got = run(opt, params, grads)
    accum = [np.zeros_like(r) for r in ref]
    for g in grads:
        for i in range(2):
            gi = g[i] + wd * ref[i]
            accum[i] = mom * accum[i] + gi
            ref[i] = ref[i] - lr * (gi + mom * accum[i] if nesterov else accum[i])
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert [p.name for p in opt.moments] == ["moments.w", "moments.b"]


@pytest.mark.parametrize("wd,nesterov,amsgrad", [(0.0, False, False), (0.1, False, False),
                                                 (0.0, True, False), (0.0, False, True)])
def test_adam(wd, nesterov, amsgrad):
    params, ref, grads = make_params()
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    opt = nn.Adam(params, learning_rate=lr, weight_decay=wd, use_nesterov=nesterov,
                  use_amsgrad=amsgrad)
    got = run(opt, params, grads)
    m = [np.zeros_like(r) for r in ref]
    v = [np.zeros_like(r) for r in ref]
    vmax = [np.zeros_like(r) for r in ref]
    for t, g in enumerate(grads, start=1):
        lr_t = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        for i in range(2):
            gi = g[i] + wd * ref[i]
            m[i] = b1 * m[i] + (1 - b1) * gi
            v[i] = b2 * v[i] + (1 - b2) * gi * gi
            vmax[i] = np.maximum(vmax[i], v[i])
            denom = np.sqrt(vmax[i] if amsgrad else v[i]) + eps
            num = b1 * m[i] + (1 - b1) * gi if nesterov else m[i]
            ref[i] = ref[i] - lr_t * num / denom
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_adamw_decoupled_weight_decay():
    params, ref, grads = make_params()
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.99, 1e-8, 0.1
    opt = nn.AdamW(params, learning_rate=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=wd)
    got = run(opt, params, grads)
    m = [np.zeros_like(r) for r in ref]
    v = [np.zeros_like(r) for r in ref]
    for t, g in enumerate(grads, start=1):
        for i in range(2):
            m[i] = b1 * m[i] + (1 - b1) * g[i]
            v[i] = b2 * v[i] + (1 - b2) * g[i] ** 2
            ref[i] = ref[i] * (1 - lr * wd)
            ref[i] = ref[i] - lr * (m[i] / (1 - b1 ** t)) / (np.sqrt(v[i] / (1 - b2 ** t)) + eps)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_adam_weight_decay_mindspore_rule():
    params, ref, grads = make_params()
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.999, 1e-6, 0.01
    opt = nn.AdamWeightDecay(params, learning_rate=lr, weight_decay=wd)
    got = run(opt, params, grads)
    m = [np.zeros_like(r) for r in ref]
    v = [np.zeros_like(r) for r in ref]
    for g in grads:
        for i in range(2):
            m[i] = b1 * m[i] + (1 - b1) * g[i]
            v[i] = b2 * v[i] + (1 - b2) * g[i] ** 2
            ref[i] = ref[i] - lr * (m[i] / (np.sqrt(v[i]) + eps) + wd * ref[i])
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_weight_decay_skips_gamma_and_beta():
    g = Parameter(Tensor(np.ones(2, np.float32)), name="bn.gamma")
    w = Parameter(Tensor(np.ones(2, np.float32)), name="fc.weight")
    opt = nn.SGD([g, w], learning_rate=1.0, weight_decay=0.5)
    zero = Tensor(np.zeros(2, np.float32))
    opt((zero, zero))
    np.testing.assert_allclose(g.asnumpy(), [1, 1])
    np.testing.assert_allclose(w.asnumpy(), [0.5, 0.5])


def test_none_gradient_skips_parameter_and_loss_scale():
    params, ref, grads = make_params()
    opt = nn.SGD(params, learning_rate=0.5, loss_scale=4.0)
    opt((None, Tensor(grads[0][1])))
    np.testing.assert_allclose(params[0].asnumpy(), ref[0], rtol=1e-6)
    np.testing.assert_allclose(params[1].asnumpy(), ref[1] - 0.5 * grads[0][1] / 4, rtol=1e-5)


# ---- learning rates ----

def sgd_lr_trace(learning_rate, steps=5):
    """The learning rate the optimizer used at each step, recovered from a unit gradient."""
    p = Parameter(Tensor(np.zeros(1, np.float32)), name="p")
    opt = nn.SGD([p], learning_rate=learning_rate)
    trace, last = [], 0.0
    for _ in range(steps):
        opt((Tensor(np.ones(1, np.float32)),))
        now = float(p.asnumpy()[0])
        trace.append(last - now)
        last = now
    return trace


def test_learning_rate_float_tensor_list_iterable():
    np.testing.assert_allclose(sgd_lr_trace(0.1), [0.1] * 5, rtol=1e-6)
    np.testing.assert_allclose(sgd_lr_trace(Tensor(np.float32(0.2))), [0.2] * 5, rtol=1e-6)
    np.testing.assert_allclose(sgd_lr_trace([0.1, 0.2, 0.3]), [0.1, 0.2, 0.3, 0.3, 0.3],
                               rtol=1e-5)
    np.testing.assert_allclose(sgd_lr_trace(Tensor(np.array([0.4, 0.2], np.float32))),
                               [0.4, 0.2, 0.2, 0.2, 0.2], rtol=1e-5)
    np.testing.assert_allclose(sgd_lr_trace(x / 10 for x in range(1, 6)),
                               [0.1, 0.2, 0.3, 0.4, 0.5], rtol=1e-5)


def test_changing_the_learning_rate_parameter():
    p = Parameter(Tensor(np.zeros(1, np.float32)), name="p")
    opt = nn.SGD([p], learning_rate=0.1)
    one = (Tensor(np.ones(1, np.float32)),)
    opt(one)
    opt.learning_rate.set_data(Tensor(np.float32(0.5)))   # MindSpore's way to change a fixed lr
    opt(one)
    np.testing.assert_allclose(p.asnumpy(), [-0.6], rtol=1e-6)
    assert float(opt.get_lr().asnumpy()) == pytest.approx(0.5)


def test_learning_rate_schedule_and_callable():
    sched = nn.ExponentialDecayLR(0.1, 0.5, 2)
    np.testing.assert_allclose(sgd_lr_trace(sched), [0.1 * 0.5 ** (s / 2) for s in range(5)],
                               rtol=1e-5)
    np.testing.assert_allclose(sgd_lr_trace(lambda step: 0.01 * (int(step.asnumpy()) + 1)),
                               [0.01, 0.02, 0.03, 0.04, 0.05], rtol=1e-5)


def test_schedules_values():
    step = Tensor(np.array(3, np.int32))
    assert float(nn.ExponentialDecayLR(0.1, 0.9, 2, is_stair=True)(step).asnumpy()) == \
        pytest.approx(0.1 * 0.9)
    # MindSpore 2.10 (run): exp(-decay_rate * step), the step not divided by decay_steps.
    assert float(nn.NaturalExpDecayLR(0.1, 0.9, 2)(step).asnumpy()) == \
        pytest.approx(0.1 * math.exp(-0.9 * 3))
    assert float(nn.NaturalExpDecayLR(0.1, 0.9, 2, True)(step).asnumpy()) == \
        pytest.approx(0.1 * math.exp(-0.9 * 2))
    assert float(nn.InverseDecayLR(0.1, 0.5, 1)(step).asnumpy()) == pytest.approx(0.1 / 2.5)
    assert float(nn.CosineDecayLR(0.01, 0.1, 6)(step).asnumpy()) == pytest.approx(0.055)
    assert float(nn.PolynomialDecayLR(0.1, 0.01, 6, 2.0)(step).asnumpy()) == \
        pytest.approx(0.09 * 0.25 + 0.01)
    assert float(nn.WarmUpLR(0.1, 6)(step).asnumpy()) == pytest.approx(0.05)
    assert nn.piecewise_constant_lr([2, 5], [0.1, 0.01]) == [0.1, 0.1, 0.01, 0.01, 0.01]
    # MindSpore's rule: min(floor(i / step_per_epoch), warmup_epoch) / warmup_epoch, 0 first.
    assert nn.warmup_lr(0.1, 6, 2, 2) == pytest.approx([0.0, 0.0, 0.05, 0.05, 0.1, 0.1])
    assert len(nn.cosine_decay_lr(0.01, 0.1, 6, 2, 2)) == 6


def test_get_lr_and_groups():
    w = Parameter(Tensor(np.zeros(2, np.float32)), name="w")
    b = Parameter(Tensor(np.zeros(2, np.float32)), name="b")
    opt = nn.Momentum([{"params": [w], "lr": 0.5}, {"params": [b]}], 0.1, 0.0)
    lrs = opt.get_lr()
    assert [float(x.asnumpy()) for x in lrs] == pytest.approx([0.5, 0.1])
    assert float(opt.get_lr_parameter(b).asnumpy()) == pytest.approx(0.1)
    one = Tensor(np.ones(2, np.float32))
    opt((one, one))
    np.testing.assert_allclose(w.asnumpy(), [-0.5, -0.5])
    np.testing.assert_allclose(b.asnumpy(), [-0.1, -0.1])
    plain = nn.SGD([w], 0.3)
    assert float(plain.get_lr().asnumpy()) == pytest.approx(0.3)


def test_optimizer_argument_errors():
    params, _, _ = make_params()
    with pytest.raises(ValueError, match="learning_rate"):
        nn.SGD(params, learning_rate=-1.0)
    with pytest.raises(ValueError, match="SGD: nesterov"):
        nn.SGD(params, momentum=0.0, nesterov=True)
    with pytest.raises(ValueError, match="weight_decay"):
        nn.Adam(params, weight_decay=-0.1)
    with pytest.raises(TypeError, match="params"):
        nn.SGD(params[0])
    with pytest.raises(ValueError, match="empty"):
        nn.Adam([])
    opt = nn.SGD(params)
    with pytest.raises(ValueError, match="1 gradients for 2 parameters"):
        opt((Tensor(np.zeros((3, 2), np.float32)),))
    with pytest.raises(ValueError, match="parameter 'b'"):
        opt((Tensor(np.zeros((3, 2), np.float32)), Tensor(np.zeros(4, np.float32))))
    with pytest.raises(ValueError, match="unique name"):
        nn.SGD([Parameter(Tensor(np.zeros(1, np.float32)), name="w"),
                Parameter(Tensor(np.zeros(1, np.float32)), name="w")])


def test_optimizer_state_is_named_and_not_trainable():
    net = nn.Dense(2, 2)
    opt = nn.Adam(net.trainable_params())
    names = [p.name for p in opt.get_parameters()]
    assert "moment1.weight" in names and "moment2.bias" in names and "global_step" in names
    assert [p.name for p in opt.trainable_params()] == ["weight", "bias"]
    assert opt.parameters[0] is net.weight
    assert ms.Tensor(opt.global_step).asnumpy().tolist() == [0]
