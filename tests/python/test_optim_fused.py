"""Fused optimizer updates (apply_sgd, apply_adam, apply_momentum with bf16 gradients), cached
weight casts, and bf16 training with them against the unfused path, in both modes."""

import numpy as np
import pytest

import kiln as ms
from kiln import _C, Tensor, amp, nn, ops
from kiln.jit import cell_interface
from kiln.ops._core import call

RNG = np.random.default_rng(0)


def _bf16(a):
    """a rounded to bfloat16 (as kiln casts), back in float32."""
    return Tensor(a).astype(ms.bfloat16).astype(ms.float32).asnumpy()


def _run(fn, mode, *args):
    return ms.jit(fn)(*args) if mode == "graph" else fn(*args)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("momentum,dampening,nesterov", [(0.0, 0.0, False), (0.9, 0.1, False),
                                                         (0.9, 0.0, True)])
def test_apply_sgd_matches_numpy_over_steps(mode, momentum, dampening, nesterov):
    v0, g1, g2 = (RNG.standard_normal((6, 5)).astype(np.float32) for _ in range(3))
    var, acc, stat = Tensor(v0.copy()), Tensor(np.zeros((6, 5), np.float32)), \
        Tensor(np.ones((6, 5), np.float32))

    def step(v, a, s, g):
        return call("apply_sgd", (v, a, s, 0.1, g), (momentum, dampening, nesterov)) * 1.0

    v, a = v0.astype(np.float64), np.zeros((6, 5))
    for k, g in enumerate((g1, g2)):
        _run(step, mode, var, acc, stat, Tensor(g))
        if momentum > 0:
            a = g if k == 0 else a * momentum + g * (1 - dampening)
            upd = g + a * momentum if nesterov else a
        else:
            upd = g
        v = v - 0.1 * upd
    np.testing.assert_allclose(var.asnumpy(), v, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(stat.asnumpy(), 0)
    if momentum > 0:
        np.testing.assert_allclose(acc.asnumpy(), a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("nesterov", [False, True])
def test_apply_adam_matches_numpy(mode, nesterov):
    v0, m0, g = (RNG.standard_normal((4, 7)).astype(np.float32) for _ in range(3))
    s0 = np.abs(RNG.standard_normal((4, 7))).astype(np.float32)
    var, m, s = Tensor(v0.copy()), Tensor(m0.copy()), Tensor(s0.copy())
    lr, c1, c2, decay, b1, b2, eps = 0.01, 1.5, 2.0, 0.001, 0.9, 0.99, 1e-6

    def step(v, m_, s_, g_):
        return call("apply_adam", (v, m_, s_, lr, g_, c1, c2, decay), (b1, b2, eps, nesterov))

    _run(step, mode, var, m, s, Tensor(g))
    m1 = b1 * m0 + (1 - b1) * g
    s1 = b2 * s0 + (1 - b2) * g * g
    n = b1 * m1 + (1 - b1) * g if nesterov else m1
    want = v0 * (1 - decay) - lr * n * c1 / (np.sqrt(s1 * c2) + eps)
    np.testing.assert_allclose(m.asnumpy(), m1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s.asnumpy(), s1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var.asnumpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["apply_momentum", "apply_sgd", "apply_adam"])
def test_updates_take_a_bf16_gradient_as_its_float32_value(op):
    v0, g = RNG.standard_normal((2, 3, 4)).astype(np.float32), RNG.standard_normal((2, 3, 4))
    g16 = Tensor(g.astype(np.float32)).astype(ms.bfloat16)
    outs = []
    for grad in (g16, g16.astype(ms.float32)):
        var = Tensor(v0.copy())
        z = Tensor(np.zeros_like(v0))
        if op == "apply_momentum":
            ops.apply_momentum(var, z, 0.1, grad, 0.9)
        elif op == "apply_sgd":
            call(op, (var, z, Tensor(np.ones_like(v0)), 0.1, grad), (0.9, 0.0, False))
        else:
            call(op, (var, z, Tensor(np.zeros_like(v0)), 0.1, grad, 1.0, 1.0, 0.0),
                 (0.9, 0.999, 1e-8, False))
        outs.append(var.asnumpy())
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize(
    "args,exc,match",
    [
        (dict(grad=np.ones(3, np.float32)), ValueError, "shape"),
        (dict(grad=np.ones(4, np.float64)), TypeError, "gradient"),
        (dict(stat=np.ones(4, np.float64)), TypeError, "stat"),
        (dict(lr=np.ones(2, np.float32)), ValueError, "learning_rate"),
        (dict(var=np.ones(4, np.int32)), TypeError, "floating"),
    ],
)
def test_apply_sgd_rejects_bad_input(args, exc, match):
    a = dict(var=np.ones(4, np.float32), acc=np.zeros(4, np.float32),
             stat=np.ones(4, np.float32), lr=np.array(0.1, np.float32),
             grad=np.ones(4, np.float32))
    a.update(args)
    with pytest.raises(exc, match=f"apply_sgd.*{match}|{match}.*apply_sgd"):
        call("apply_sgd", tuple(Tensor(a[k]) for k in ("var", "acc", "stat", "lr", "grad")),
             (0.9, 0.0, False))


def test_apply_adam_rejects_a_tensor_where_a_scalar_goes():
    v = Tensor(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="apply_adam: c1 must be a scalar"):
        call("apply_adam", (v, Tensor(np.zeros(4, np.float32)), Tensor(np.zeros(4, np.float32)),
                            0.1, v, Tensor(np.ones(2, np.float32)), 1.0, 0.0),
             (0.9, 0.999, 1e-8, False))


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_cached_cast_is_a_cast_with_a_cast_gradient(mode):
    x = Tensor(RNG.standard_normal((5, 3)).astype(np.float32))

    def f(t):
        return ops.sum(call("cached_cast", (t,), (ms.bfloat16._enum,)) * 3.0)

    out = _run(f, mode, x)
    # Each product is a bfloat16 too: the reference rounds them, so a sum that cancels to near
    # zero is still compared to its own rounding, not to products kept in float32.
    products = _bf16((_bf16(x.asnumpy()) * 3).astype(np.float32))
    np.testing.assert_allclose(out.asnumpy(), products.astype(np.float64).sum(), rtol=1e-2)
    grad = _run(ms.grad(f), mode, x)
    assert grad.dtype == ms.float32
    np.testing.assert_array_equal(grad.asnumpy(), np.full((5, 3), 3.0, np.float32))
    y = call("cached_cast", (x,), (ms.bfloat16._enum,))
    assert y.dtype == ms.bfloat16
    np.testing.assert_array_equal(y.astype(ms.float32).asnumpy(), _bf16(x.asnumpy()))


def test_cached_cast_refuses_what_a_cast_would_not_change():
    with pytest.raises(TypeError, match="cached_cast: the tensor is already Float32|float32"):
        call("cached_cast", (Tensor(np.ones(2, np.float32)),), (ms.float32._enum,))
    with pytest.raises(TypeError, match="cached_cast"):
        call("cached_cast", (Tensor(np.ones(2, np.int32)),), (ms.bfloat16._enum,))


def test_an_update_refreshes_the_copy_a_cached_cast_reads():
    """After one cached_cast sighting, apply_momentum writes the bf16 copy with the new weight;
    the next read is served from it (a cache hit), equals a cast of the new weight, and a write
    by anything else (set_data) makes it stale."""
    from kiln import Parameter  # noqa: PLC0415

    # (* 1.0: bytes kiln owns; a NumPy array's bytes, which NumPy may write unseen, get no copy)
    w = Parameter(Tensor(RNG.standard_normal((8, 8)).astype(np.float32)) * 1.0, name="w")
    acc = Tensor(np.zeros((8, 8), np.float32))
    bf = ms.bfloat16._enum
    call("cached_cast", (w,), (bf,))  # the forward asks for a bf16 copy
    ops.apply_momentum(w, acc, 0.1, Tensor(np.ones((8, 8), np.float32)), 0.9)
    before = _C.packed_weight_stats()["hits"]
    got = call("cached_cast", (w,), (bf,))
    assert _C.packed_weight_stats()["hits"] == before + 1
    np.testing.assert_array_equal(got.astype(ms.float32).asnumpy(), _bf16(w.asnumpy()))
    w.set_data(Tensor(np.full((8, 8), 2.5, np.float32)))
    np.testing.assert_array_equal(call("cached_cast", (w,), (bf,)).astype(ms.float32).asnumpy(),
                                  np.full((8, 8), 2.5, np.float32))


class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(12, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Dense(16, 4)

    def construct(self, x):
        return self.fc2(self.act(self.fc1(x)))


OPTIMIZERS = {
    "Momentum": lambda p: nn.Momentum(p, 0.05, 0.9),
    "Momentum-nesterov-wd": lambda p: nn.Momentum(p, 0.05, 0.9, weight_decay=0.01,
                                                  use_nesterov=True),
    "SGD": lambda p: nn.SGD(p, 0.05, momentum=0.9, dampening=0.1),
    "SGD-plain": lambda p: nn.SGD(p, 0.05),
    "Adam": lambda p: nn.Adam(p, 0.01),
    "Adam-nesterov": lambda p: nn.Adam(p, 0.01, use_nesterov=True, weight_decay=0.01),
    "AdamW": lambda p: nn.AdamW(p, 0.01, weight_decay=0.1),
    "AdamWeightDecay": lambda p: nn.AdamWeightDecay(p, 0.01, weight_decay=0.1),
}


def _train_step(net, opt):
    """One step of MSE training of net by opt: the loss, the update applied in place."""
    loss_fn = nn.MSELoss()
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, opt.parameters)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss

    return step


def _train_bf16(make_opt, fused, mode, steps=6, dtype=ms.bfloat16):
    ms.set_seed(1)
    net = amp.auto_mixed_precision(_Net(), "O2", dtype=dtype)
    opt = make_opt(net.trainable_params())
    opt._fused_updates = fused
    step = _train_step(net, opt)
    run = ms.jit(step) if mode == "graph" else step
    rng = np.random.default_rng(3)
    losses = []
    old = cell_interface.CACHED_WEIGHT_CASTS
    cell_interface.CACHED_WEIGHT_CASTS = fused
    try:
        x = Tensor(rng.standard_normal((32, 12)).astype(np.float32))
        y = Tensor(rng.standard_normal((32, 4)).astype(np.float32))
        for _ in range(steps):
            losses.append(float(run(x, y).asnumpy()))
    finally:
        cell_interface.CACHED_WEIGHT_CASTS = old
    return np.array(losses), net, opt


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_bf16_training_fused_matches_unfused(name, mode):
    hits = _C.packed_weight_stats()["hits"]
    fused, net, _ = _train_bf16(OPTIMIZERS[name], True, mode)
    # from the second step on, every weight's bf16 copy comes from the update (4 weights)
    assert _C.packed_weight_stats()["hits"] - hits == 5 * 4
    hits = _C.packed_weight_stats()["hits"]
    plain, ref, _ = _train_bf16(OPTIMIZERS[name], False, mode)
    assert _C.packed_weight_stats()["hits"] == hits  # casts each step, nothing cached
    assert fused[-1] < fused[0]  # it trains
    np.testing.assert_allclose(fused, plain, rtol=8e-3, atol=1e-4)  # one bf16 ulp
    for p, q in zip(net.trainable_params(), ref.trainable_params()):
        assert p.dtype == ms.float32
        # Adam moves an element whose gradient is ~0 by up to lr (0.01) either way: a bf16
        # rounding of such a gradient shows in that element, well under one step
        np.testing.assert_allclose(p.asnumpy(), q.asnumpy(), rtol=8e-3, atol=2e-3)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("name", ["Momentum", "Adam"])
def test_float16_training_fused_matches_unfused(name, mode):
    """The copy and the gradient may be float16 too (computed in float32 by kiln's kernels)."""
    fused = _train_bf16(OPTIMIZERS[name], True, mode, dtype=ms.float16)[0]
    plain = _train_bf16(OPTIMIZERS[name], False, mode, dtype=ms.float16)[0]
    assert fused[-1] < fused[0]
    np.testing.assert_allclose(fused, plain, rtol=1e-3, atol=1e-4)  # one float16 ulp


def test_compiled_bf16_step_feeds_the_update_bf16_gradients(tmp_path):
    """The absorb_grad_casts pass: apply_momentum reads the bf16 gradients uncast."""
    ms.set_context(save_graphs=True, save_graphs_path=str(tmp_path))
    try:
        _train_bf16(OPTIMIZERS["Momentum"], True, "graph", steps=1)
    finally:
        ms.set_context(save_graphs=False)
    (text,) = [p.read_text() for p in sorted(tmp_path.glob("*_optimized.ir"))]
    lines = [line for line in text.splitlines() if "apply_momentum(" in line]
    assert len(lines) == 4, text
    assert "cached_cast(" in text, text
    values = {line.split("=")[0].strip(): line for line in text.splitlines() if "=" in line}
    for line in lines:
        grad = line.split("apply_momentum(")[1].split(",")[3].strip()
        assert ": bf16[" in values.get(grad, ""), (grad, text)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_checkpoints_hold_float32_master_weights_after_fused_bf16_training(mode, tmp_path):
    _, net, opt = _train_bf16(OPTIMIZERS["Momentum"], True, mode, steps=3)
    path = str(tmp_path / "net.ckpt")
    ms.save_checkpoint(net, path)
    saved = ms.load_checkpoint(path)
    for p in net.trainable_params():
        assert saved[p.name].dtype == ms.float32
        np.testing.assert_array_equal(saved[p.name].asnumpy(), p.asnumpy())
    # a loaded checkpoint replaces the weights: the next bf16 forward reads the loaded values
    fresh = amp.auto_mixed_precision(_Net(), "O2", dtype=ms.bfloat16)
    x = Tensor(np.ones((2, 12), np.float32))
    fresh(x)
    ms.load_param_into_net(fresh, saved)
    np.testing.assert_array_equal(fresh(x).asnumpy(), net(x).asnumpy())


def test_a_compiled_step_that_trains_weights_forgets_their_evaluation_packs_when_it_starts():
    """An evaluation in Graph mode keeps each weight packed in its kernel's layout; the compiled
    training step that writes those weights frees the packs as it starts (so they are not alive
    through its first run: BERT-base's peak over setup 1615 -> 1272 MiB), and trains as the
    same step in PyNative."""
    rng = np.random.default_rng(5)
    x = Tensor(rng.standard_normal((64, 256)).astype(np.float32))
    y = Tensor(rng.standard_normal((64, 256)).astype(np.float32))
    losses = {}
    for mode in ("pynative", "graph"):
        ms.set_seed(2)
        net = nn.Dense(256, 256)
        evaluate = ms.jit(lambda v, net=net: net(v))
        packs = _C.packed_weight_stats()["packs"]
        for _ in range(3):
            evaluate(x).asnumpy()
        assert _C.packed_weight_stats()["packs"] > packs  # the evaluation packed the weight
        step = _train_step(net, nn.Momentum(net.trainable_params(), 0.05, 0.9))
        forgotten = _C.packed_weight_stats()["forgotten"]
        step = ms.jit(step) if mode == "graph" else step
        losses[mode] = [float(step(x, y).asnumpy()) for _ in range(3)]
        if mode == "graph":
            assert _C.packed_weight_stats()["forgotten"] > forgotten
        np.testing.assert_allclose(evaluate(x).asnumpy(), net(x).asnumpy(), rtol=1e-5, atol=1e-5)
    assert losses["graph"][-1] < losses["graph"][0]
    np.testing.assert_allclose(losses["graph"], losses["pynative"], rtol=1e-5, atol=1e-6)
