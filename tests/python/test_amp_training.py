"""kiln.amp's training side: build_train_network, the loss-scale managers (and their update cells
in TrainOneStepWithLossScaleCell), StaticLossScaler / DynamicLossScaler and all_finite --
MindSpore's rules, in PyNative and GRAPH_MODE."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, amp, nn

MODES = ["pynative", "graph"]
RNG = np.random.default_rng(7)
X = RNG.standard_normal((16, 8)).astype(np.float32)
LABELS = RNG.integers(0, 3, 16).astype(np.int32)


def _mode(mode):
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(8, 16)
        self.bn = nn.BatchNorm1d(16)
        self.fc2 = nn.Dense(16, 3)

    def construct(self, x):
        return self.fc2(nn.ReLU()(self.bn(self.fc1(x))))


def _net():
    ms.set_seed(3)
    return Net()


def _train(step, steps=6):
    return [step(Tensor(X), Tensor(LABELS)) for _ in range(steps)]


def _loss(out):
    return float((out[0] if isinstance(out, tuple) else out).asnumpy())


# ---- build_train_network ----

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("level", ["O0", "O1", "O2", "O3"])
def test_build_train_network_trains_at_each_level(mode, level):
    _mode(mode)
    net = _net()
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    step = amp.build_train_network(net, opt, nn.CrossEntropyLoss(), level=level)
    want = nn.TrainOneStepWithLossScaleCell if level == "O2" else nn.TrainOneStepCell
    assert type(step) is want and step.training
    losses = [_loss(out) for out in _train(step, 8)]
    assert losses[-1] < losses[0]
    assert all(p.dtype == ms.float32 for p in net.trainable_params())


def test_build_train_network_level_settings():
    net = _net()
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    amp.build_train_network(net, opt, nn.CrossEntropyLoss(), level="O2")
    # O2: float16 everywhere, BatchNorm kept in float32 and handing float16 on.
    assert net.fc1._amp_dtype == ms.float16 and net.bn._amp_dtype == ms.float32
    assert net.bn._amp_output_dtype == ms.float16
    net = _net()
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    amp.build_train_network(net, opt, nn.CrossEntropyLoss(), level="O3",
                            cast_model_type=ms.bfloat16)
    assert net.fc1._amp_dtype == ms.bfloat16 and net.bn._amp_dtype == ms.bfloat16


def test_build_train_network_loss_scale_managers():
    net = _net()
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    step = amp.build_train_network(net, opt, nn.CrossEntropyLoss(), level="O0",
                                   loss_scale_manager=amp.FixedLossScaleManager(64.0))
    assert isinstance(step, nn.TrainOneStepWithLossScaleCell)
    assert isinstance(step.loss_scaling_manager, nn.FixedLossScaleUpdateCell)
    assert float(step.scale_sense.asnumpy()) == 64.0
    manager = amp.FixedLossScaleManager(64.0, drop_overflow_update=False)
    step = amp.build_train_network(net, opt, nn.CrossEntropyLoss(), level="O0",
                                   loss_scale_manager=manager)
    assert type(step) is nn.TrainOneStepCell and step.sens == 64.0


def test_build_train_network_errors():
    net = _net()
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    loss = nn.CrossEntropyLoss()
    with pytest.raises(ValueError, match="Unsupported arg 'keep_fp32'"):
        amp.build_train_network(net, opt, loss, level="O2", keep_fp32=True)
    with pytest.raises(TypeError, match="string"):
        amp.build_train_network(net, opt, loss, level=2)
    with pytest.raises(ValueError, match="level"):
        amp.build_train_network(net, opt, loss, level="O4")
    with pytest.raises(ValueError, match="boost"):
        amp.build_train_network(net, opt, loss, boost_level="O1")
    with pytest.raises(TypeError, match="optimizer"):
        amp.build_train_network(net, object(), loss)
    with pytest.raises(TypeError, match="loss_scale_manager"):
        amp.build_train_network(net, opt, loss, loss_scale_manager=128.0)
    with pytest.raises(TypeError, match="keep_batchnorm_fp32"):
        amp.build_train_network(net, opt, loss, keep_batchnorm_fp32=1)


@pytest.mark.parametrize("mode", MODES)
def test_overflow_skips_the_update_and_dynamic_scale_shrinks(mode):
    _mode(mode)
    net = amp.auto_mixed_precision(_net(), "O3", dtype=ms.bfloat16)
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    # A batch with an inf overflows the gradients: the update is skipped and the scale shrinks
    # by scale_factor; the next (finite) batch updates the weights at the new scale.
    manager = amp.DynamicLossScaleManager(init_loss_scale=2.0 ** 20, scale_factor=4,
                                          scale_window=1000)
    step = amp.build_train_network(net, opt, nn.CrossEntropyLoss(), loss_scale_manager=manager)
    before = [p.asnumpy().copy() for p in net.trainable_params()]
    bad = X.copy()
    bad[3, 2] = np.inf
    loss, overflow, scale = step(Tensor(bad), Tensor(LABELS))
    assert bool(overflow.asnumpy()) and float(scale.asnumpy()) == 2.0 ** 20
    for p, b in zip(net.trainable_params(), before, strict=True):
        np.testing.assert_array_equal(p.asnumpy(), b)  # skipped
    assert float(step.scale_sense.asnumpy()) == 2.0 ** 18
    loss, overflow, scale = step(Tensor(X), Tensor(LABELS))
    assert not bool(overflow.asnumpy()) and float(scale.asnumpy()) == 2.0 ** 18
    assert np.isfinite(float(loss.asnumpy()))
    assert all(not np.array_equal(p.asnumpy(), b)
               for p, b in zip(net.trainable_params(), before, strict=True))


# ---- managers ----

def test_fixed_loss_scale_manager():
    m = amp.FixedLossScaleManager()
    assert m.get_loss_scale() == 128.0 and m.get_drop_overflow_update()
    m.update_loss_scale(True)
    assert m.get_loss_scale() == 128.0
    assert isinstance(m.get_update_cell(), nn.FixedLossScaleUpdateCell)
    assert amp.FixedLossScaleManager(8, False).get_update_cell() is None
    with pytest.raises(ValueError, match="loss_scale"):
        amp.FixedLossScaleManager(0.5)
    assert ms.FixedLossScaleManager is amp.FixedLossScaleManager
    assert ms.train.DynamicLossScaleManager is amp.DynamicLossScaleManager


def test_dynamic_loss_scale_manager_python_rule():
    m = amp.DynamicLossScaleManager(init_loss_scale=16, scale_factor=2, scale_window=2)
    seen = []
    for overflow in (False, False, True, False, False, False):
        m.update_loss_scale(overflow)
        seen.append(m.get_loss_scale())
    assert seen == [16, 32, 16, 16, 32, 32]
    cell = m.get_update_cell()
    assert isinstance(cell, nn.DynamicLossScaleUpdateCell) and cell.get_loss_scale() == 32
    with pytest.raises(ValueError, match="init_loss_scale"):
        amp.DynamicLossScaleManager(init_loss_scale=0.5)
    with pytest.raises(ValueError, match="scale_window"):
        amp.DynamicLossScaleManager(scale_window=0)
    with pytest.raises(ValueError, match="scale_factor"):
        amp.DynamicLossScaleManager(scale_factor=0)


def test_dynamic_loss_scale_manager_gives_up_after_too_many_overflows():
    m = amp.DynamicLossScaleManager()
    m.bad_step_max = 3
    for _ in range(3):
        m.update_loss_scale(True)
    with pytest.raises(RuntimeError, match="overflows in a row"):
        m.update_loss_scale(True)


# ---- scalers and all_finite ----

def test_static_loss_scaler():
    s = amp.StaticLossScaler(1024)
    loss = s.scale(Tensor(np.array(0.5, np.float32)))
    assert float(loss.asnumpy()) == 512.0
    grads = s.unscale((Tensor(np.array([1024.0, 2048.0], np.float32)),
                       Tensor(np.array([3072.0], np.float16))))
    np.testing.assert_array_equal(grads[0].asnumpy(), [1.0, 2.0])
    assert grads[1].dtype == ms.float16 and float(grads[1].asnumpy()[0]) == 3.0
    assert s.adjust(Tensor(np.array(False))) is False
    assert float(s.scale_value.asnumpy()) == 1024.0
    with pytest.raises(ValueError, match="scale_value"):
        amp.StaticLossScaler(0.5)
    with pytest.raises(TypeError, match="scale_value"):
        amp.StaticLossScaler("8")


@pytest.mark.parametrize("mode", MODES)
def test_dynamic_loss_scaler_adjust(mode):
    _mode(mode)
    s = amp.DynamicLossScaler(scale_value=16, scale_factor=2, scale_window=2)

    @ms.jit
    def adjust(finite):
        return s.adjust(finite)

    run = adjust if mode == "graph" else s.adjust
    seen = []
    for finite in (True, True, False, True, True, True):
        run(Tensor(np.array(finite)))
        seen.append((float(s.scale_value.asnumpy()), int(s.counter.asnumpy())))
    assert seen == [(16, 1), (32, 0), (16, 0), (16, 1), (32, 0), (32, 1)]
    s = amp.DynamicLossScaler(scale_value=1, scale_factor=2, scale_window=3)
    s.adjust(Tensor(np.array(False)))
    assert float(s.scale_value.asnumpy()) == 1.0  # never below 1
    with pytest.raises(TypeError, match="scale_factor"):
        amp.DynamicLossScaler(2, 1.5, 3)
    with pytest.raises(ValueError, match="scale_window"):
        amp.DynamicLossScaler(2, 2, 0)


@pytest.mark.parametrize("mode", MODES)
def test_hand_written_step_with_dynamic_loss_scaler(mode):
    """The pattern of MindSpore's mixed-precision tutorial: scale the loss, unscale the
    gradients, update only when they are finite, adjust the scale."""
    _mode(mode)
    net = amp.auto_mixed_precision(_net(), "O2", dtype=ms.bfloat16)
    loss_fn = nn.CrossEntropyLoss()
    opt = nn.SGD(net.trainable_params(), 0.1)
    scaler = amp.DynamicLossScaler(scale_value=2 ** 10, scale_factor=2, scale_window=50)

    def forward(x, y):
        return scaler.scale(loss_fn(net(x), y))

    grad_fn = ms.value_and_grad(forward, None, opt.parameters)

    @ms.jit
    def step(x, y):
        loss, grads = grad_fn(x, y)
        loss = scaler.unscale(loss)
        grads = scaler.unscale(grads)
        finite = amp.all_finite(grads)
        if finite:
            opt(grads)
        scaler.adjust(finite)
        return loss

    losses = [float(step(Tensor(X), Tensor(LABELS)).asnumpy()) for _ in range(8)]
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("mode", MODES)
def test_all_finite(mode):
    _mode(mode)
    ok = (Tensor(np.ones(3, np.float32)), Tensor(np.array([2.0], np.float16)),
          Tensor(np.array([1, 2], np.int32)))
    fn = ms.jit(amp.all_finite) if mode == "graph" else amp.all_finite
    out = fn(ok)
    assert out.dtype == ms.bool_ and out.shape == () and bool(out.asnumpy())
    for bad in (np.inf, -np.inf, np.nan):
        values = np.array([1.0, bad], np.float32)
        assert not bool(fn((Tensor(values), ok[0])).asnumpy())
        assert not bool(fn([ok[0], Tensor(values).astype(ms.bfloat16)]).asnumpy())
    with pytest.raises(TypeError, match="all_finite"):
        amp.all_finite(Tensor(np.ones(2, np.float32)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("level", ["O2", "O3"])
def test_batchnorm_statistics_update_in_low_precision(mode, level):
    """BatchNorm's moving statistics are state it updates in place: they stay float32 and are
    read uncast, so the update reaches them at every level (O3 runs BatchNorm itself in bf16)."""
    _mode(mode)
    net = _net()
    anet = amp.auto_mixed_precision(net, level, dtype=ms.bfloat16)
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    step = amp.build_train_network(anet, opt, nn.CrossEntropyLoss())
    x = X * 2 + 1
    step(Tensor(x), Tensor(LABELS))
    h = x @ net.fc1.weight.asnumpy().T + net.fc1.bias.asnumpy()  # fc1 already updated: close
    mean = net.bn.moving_mean.asnumpy()
    assert net.bn.moving_mean.dtype == ms.float32
    np.testing.assert_allclose(mean, 0.1 * h.mean(0), rtol=0.1, atol=0.02)
