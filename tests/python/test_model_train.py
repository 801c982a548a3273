"""kiln.train.Model: training converges in both modes, eval/predict/fit, dataset sink mode (one
compiled loop, MindSpore's step reporting), resume with initial_epoch, gradient accumulation."""
import numpy as np
import pytest

import kiln as ms
import kiln.dataset as ds
from kiln import nn
from kiln.train import GradAccumulationCell, Model
from kiln.train.callback import Callback

MODES = [ms.PYNATIVE_MODE, ms.GRAPH_MODE]


def _data(n=256, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    y = (x @ rng.normal(size=(8, 3)).astype(np.float32)).argmax(1).astype(np.int32)
    return x, y


def _dataset(x, y, batch=32):
    return ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(batch)


def _net(seed=1):
    ms.set_seed(seed)
    return nn.SequentialCell(nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 3))


def _model(net=None, lr=0.1, metrics=None):
    net = net or _net()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), lr, 0.9)
    return Model(net, loss, opt, metrics=metrics)


class Steps(Callback):
    """Records (epoch, step, loss) at every step end."""

    def __init__(self):
        self.seen = []

    def on_train_step_end(self, run_context):
        p = run_context.original_args()
        self.seen.append((p.cur_epoch_num, p.cur_step_num,
                          float(np.mean(p.net_outputs.asnumpy()))))


def _params(net):
    return {p.name: p.asnumpy().copy() for p in net.get_parameters()}


@pytest.mark.parametrize("mode", MODES)
def test_training_converges_and_eval_predict(mode):
    ms.set_context(mode=mode)
    x, y = _data()
    model = _model(metrics={"accuracy"})
    before = model.eval(_dataset(x, y))["accuracy"]
    model.train(5, _dataset(x, y))
    after = model.eval(_dataset(x, y))["accuracy"]
    assert before < 0.6 and after > 0.9
    logits = model.predict(ms.Tensor(x[:4])).asnumpy()
    assert logits.shape == (4, 3)
    np.testing.assert_array_equal(logits.argmax(1), model.predict_network(
        ms.Tensor(x[:4])).asnumpy().argmax(1))


def test_graph_and_pynative_train_identically_and_graph_compiles_once():
    x, y = _data()
    results = {}
    for mode in MODES:
        ms.set_context(mode=mode)
        net = _net()
        rec = Steps()
        before = ms.get_jit_stats()["compiles"]
        _model(net).train(2, _dataset(x, y), callbacks=rec)
        results[mode] = (rec.seen, _params(net), ms.get_jit_stats()["compiles"] - before)
    (steps_p, params_p, compiles_p), (steps_g, params_g, compiles_g) = results.values()
    assert [s[:2] for s in steps_p] == [s[:2] for s in steps_g]
    np.testing.assert_allclose([s[2] for s in steps_p], [s[2] for s in steps_g], rtol=1e-5)
    for name in params_p:
        np.testing.assert_allclose(params_p[name], params_g[name], rtol=1e-5, atol=1e-6)
    assert compiles_p == 0 and compiles_g == 1  # the training step, once for 16 steps


@pytest.mark.parametrize("mode", MODES)
def test_any_iterable_of_batches(mode):
    ms.set_context(mode=mode)
    x, y = _data(64)
    batches = [(x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]  # NumPy tuples
    tensors = [[ms.Tensor(a), ms.Tensor(b)] for a, b in batches]     # lists of Tensors
    rec1, rec2 = Steps(), Steps()
    _model(_net()).train(2, batches, callbacks=rec1)
    _model(_net()).train(2, tensors, callbacks=rec2)
    assert [s[:2] for s in rec1.seen] == [(1, 1), (1, 2), (1, 3), (1, 4),
                                         (2, 5), (2, 6), (2, 7), (2, 8)]
    np.testing.assert_allclose([s[2] for s in rec1.seen], [s[2] for s in rec2.seen], rtol=1e-6)
    gen_rec = Steps()
    _model(_net()).train(1, ((a, b) for a, b in batches), callbacks=gen_rec)  # a generator
    assert len(gen_rec.seen) == 4


def test_bad_arguments():
    x, y = _data(64)
    model = _model()
    with pytest.raises(ValueError, match="initial_epoch"):
        model.train(2, _dataset(x, y), initial_epoch=2)
    with pytest.raises(ValueError, match="sink_size"):
        model.train(1, _dataset(x, y), dataset_sink_mode=True, sink_size=0)
    with pytest.raises(TypeError, match="dataset_sink_mode"):
        model.train(1, _dataset(x, y), dataset_sink_mode=1)
    with pytest.raises(ValueError, match="two elements"):
        model.train(1, [(x[:8],)])
    with pytest.raises(ValueError, match="kwargs"):
        Model(_net(), nn.MSELoss(), None, bogus=1)
    with pytest.raises(TypeError, match="network"):
        Model(lambda v: v)
    with pytest.raises(ValueError, match="metrics"):
        _model().eval(_dataset(x, y))
    with pytest.raises(ValueError, match="eval_network"):
        Model(_net(), metrics={"accuracy"})
    with pytest.raises(ValueError, match="optimizer"):
        Model(_net(), nn.MSELoss(), amp_level="O2")
    with pytest.raises(TypeError, match="predict"):
        model.predict(x[:2])


@pytest.mark.parametrize("mode", MODES)
def test_fit_evaluates_and_reports_eval_results(mode):
    ms.set_context(mode=mode)
    x, y = _data()

    class Seen(Callback):
        def __init__(self):
            self.results, self.modes = [], []

        def on_train_epoch_end(self, run_context):
            p = run_context.original_args()
            self.results.append((p.cur_epoch_num, dict(p.get("eval_results", {}))))

        def on_eval_begin(self, run_context):
            self.modes.append(run_context.original_args().mode)

    seen = Seen()
    model = _model(metrics={"accuracy"})
    model.fit(4, _dataset(x, y), _dataset(x, y), valid_frequency=2, callbacks=seen)
    assert [e for e, _ in seen.results] == [1, 2, 3, 4]
    assert seen.results[0][1] == {} and seen.results[2][1] == {}
    assert set(seen.results[1][1]) == {"accuracy", "eval_loss"}
    assert seen.results[3][1]["accuracy"] > 0.9 and seen.modes == ["eval", "eval"]
    with pytest.raises(ValueError, match="on_train"):  # legacy names are refused by fit
        class Old(Callback):
            def step_end(self, run_context):
                pass
        model.fit(1, _dataset(x, y), callbacks=Old())


@pytest.mark.parametrize("mode", MODES)
def test_sink_mode_step_reporting(mode):
    ms.set_context(mode=mode)
    x, y = _data(160)                        # 5 batches of 32
    rec = Steps()
    epochs = []

    class Epochs(Callback):
        def on_train_epoch_end(self, run_context):
            p = run_context.original_args()
            epochs.append((p.cur_epoch_num, p.cur_step_num, p.batch_num, p.dataset_sink_mode))

    _model(_net()).train(3, _dataset(x, y), callbacks=[rec, Epochs()], dataset_sink_mode=True,
                         sink_size=4)
    if mode == ms.GRAPH_MODE:                 # one reported step per sink of 4
        assert [s[:2] for s in rec.seen] == [(1, 4), (2, 8), (3, 12)]
    else:                                     # PyNative reports every step
        assert [s[:2] for s in rec.seen] == [(e, s) for s in range(1, 13)
                                            for e in [(s - 1) // 4 + 1]]
    assert epochs == [(1, 4, 4, True), (2, 8, 4, True), (3, 12, 4, True)]


def test_sink_loop_equals_step_by_step_and_continues_across_epochs():
    """12 steps over a 5-batch dataset in sinks of 4: the dataset wraps around mid-sink, and the
    compiled loop leaves the parameters and loss as 12 plain steps over the repeated data."""
    x, y = _data(160)
    ms.set_context(mode=ms.GRAPH_MODE)
    net_sink, rec = _net(), Steps()
    before = ms.get_jit_stats()["compiles"]
    _model(net_sink).train(3, _dataset(x, y), callbacks=rec, dataset_sink_mode=True, sink_size=4)
    compiles = ms.get_jit_stats()["compiles"] - before
    ms.set_context(mode=ms.PYNATIVE_MODE)
    net_plain, rec_plain = _net(), Steps()
    batches = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 160, 32)]
    stream = (batches * 3)[:12]
    _model(net_plain).train(1, stream, callbacks=rec_plain)
    for name, value in _params(net_plain).items():
        np.testing.assert_allclose(_params(net_sink)[name], value, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose([s[2] for s in rec.seen],
                               [rec_plain.seen[i][2] for i in (3, 7, 11)], rtol=1e-5)
    assert compiles == 1  # the sink loop (the training step inside it), reused every sink


def test_sink_mode_with_ragged_last_batch():
    """A sink whose batches change shape (the last, partial batch) is split into loops of equal
    shapes; every sample is still trained on."""
    ms.set_context(mode=ms.GRAPH_MODE)
    x, y = _data(150)                          # 4 batches of 32, then 22
    net = _net()
    model = _model(net)
    model.train(2, _dataset(x, y), dataset_sink_mode=True)
    assert int(model.train_network.optimizer.global_step.asnumpy()[0]) == 10


@pytest.mark.parametrize("mode", MODES)
def test_request_stop_ends_training(mode):
    ms.set_context(mode=mode)
    x, y = _data(128)

    class StopAt(Callback):
        def on_train_step_end(self, run_context):
            if run_context.original_args().cur_step_num == 6:
                run_context.request_stop()

    rec = Steps()
    model = _model(_net())
    model.train(5, _dataset(x, y), callbacks=[rec, StopAt()])
    assert [s[1] for s in rec.seen] == [1, 2, 3, 4, 5, 6]
    assert int(model.train_network.optimizer.global_step.asnumpy()[0]) == 6


@pytest.mark.parametrize("mode", MODES)
def test_resume_with_initial_epoch_is_exact(mode, tmp_path):
    """4 epochs at once == 2 epochs, checkpoint (with the optimizer's state), a new model loaded
    from it, then epochs 3-4 with initial_epoch=2."""
    ms.set_context(mode=mode)
    x, y = _data(128)
    net_ref = _net()
    _model(net_ref).train(4, _dataset(x, y))

    net_a = _net()
    model_a = _model(net_a)
    ckpt = ms.ModelCheckpoint("run", str(tmp_path),
                              ms.CheckpointConfig(save_checkpoint_steps=8, keep_checkpoint_max=1))
    model_a.train(2, _dataset(x, y), callbacks=ckpt)
    assert ckpt.latest_ckpt_file_name.endswith("run-2_4.ckpt")

    net_b = _net(seed=7)                       # different initial weights
    model_b = _model(net_b)
    not_loaded = ms.load_param_into_net(model_b.train_network,
                                        ms.load_checkpoint(ckpt.latest_ckpt_file_name))
    assert not_loaded == [] or not_loaded == ([], [])
    rec = Steps()
    model_b.train(4, _dataset(x, y), callbacks=rec, initial_epoch=2)
    assert [s[0] for s in rec.seen] == [3] * 4 + [4] * 4
    for name, value in _params(net_ref).items():
        np.testing.assert_allclose(_params(net_b)[name], value, rtol=1e-6, atol=1e-7)


def _accumulation_check(accumulate_step, micro, opt_cls):
    x, y = _data(micro * accumulate_step * 3, seed=3)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    big_net, acc_net = _net(), _net()
    big = nn.TrainOneStepCell(nn.WithLossCell(big_net, loss), opt_cls(big_net.trainable_params()))
    acc = GradAccumulationCell(nn.WithLossCell(acc_net, loss),
                               opt_cls(acc_net.trainable_params()), accumulate_step)
    big_batch = micro * accumulate_step
    for k in range(3):
        big(ms.Tensor(x[k * big_batch:(k + 1) * big_batch]),
            ms.Tensor(y[k * big_batch:(k + 1) * big_batch]))
        for j in range(accumulate_step):
            lo = k * big_batch + j * micro
            acc(ms.Tensor(x[lo:lo + micro]), ms.Tensor(y[lo:lo + micro]))
        for name, value in _params(big_net).items():
            np.testing.assert_allclose(_params(acc_net)[name], value, rtol=1e-5, atol=1e-6)
    assert int(acc.optimizer.global_step.asnumpy()[0]) == 3
    assert all(np.all(p.asnumpy() == 0) for p in acc.accumulated)


@pytest.mark.parametrize("mode", MODES)
def test_gradient_accumulation_equals_big_batch(mode):
    ms.set_context(mode=mode)
    _accumulation_check(4, 8, lambda p: nn.Momentum(p, 0.1, 0.9))
    _accumulation_check(3, 5, lambda p: nn.Adam(p, 0.01))


@pytest.mark.parametrize("mode", MODES)
def test_gradient_accumulation_through_model(mode):
    """A GradAccumulationCell as Model's network (MindSpore's way of a custom training cell):
    after 8 micro-batches the optimizer has stepped twice, in both modes, and each step
    between updates leaves the weights unchanged."""
    ms.set_context(mode=mode)
    x, y = _data(64)
    net = _net()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    cell = GradAccumulationCell(nn.WithLossCell(net, loss),
                                nn.Momentum(net.trainable_params(), 0.1, 0.9), 4)
    snapshots = []

    class Snap(Callback):
        def on_train_step_end(self, run_context):
            snapshots.append(net[0].weight.asnumpy().copy())

    Model(cell).train(1, _dataset(x, y, batch=8), callbacks=Snap())
    assert int(cell.optimizer.global_step.asnumpy()[0]) == 2
    for i in (0, 1, 4, 5):
        np.testing.assert_array_equal(snapshots[i], snapshots[i + 1])
    assert not np.array_equal(snapshots[2], snapshots[3])
    with pytest.raises(ValueError, match="accumulate_step"):
        GradAccumulationCell(nn.WithLossCell(net, loss),
                             nn.Momentum(net.trainable_params(), 0.1, 0.9), 0)


def test_build_compiles_without_running():
    ms.set_context(mode=ms.GRAPH_MODE)
    x, y = _data(64)
    net = _net()
    model = _model(net, metrics={"accuracy"})
    weights = _params(net)
    before = ms.get_jit_stats()["compiles"]
    model.build(_dataset(x, y), _dataset(x, y))
    assert ms.get_jit_stats()["compiles"] - before == 2
    for name, value in weights.items():
        np.testing.assert_array_equal(_params(net)[name], value)
    model.train(1, _dataset(x, y))
    model.eval(_dataset(x, y))
    assert ms.get_jit_stats()["compiles"] - before == 2   # train and eval reuse the graphs
    ms.set_context(mode=ms.PYNATIVE_MODE)
    with pytest.raises(RuntimeError, match="GRAPH_MODE"):
        model.build(_dataset(x, y))


@pytest.mark.parametrize("mode", MODES)
def test_amp_level_routes_to_kiln_amp(mode):
    """amp_level / loss_scale_manager go to kiln.amp.build_train_network: where it exists the
    loss-scaled step trains (its (loss, overflow, scale) outputs through the loops, sink mode
    included); where it does not, Model says so with a ValueError."""
    ms.set_context(mode=mode)
    try:
        import kiln.amp as amp
        has_amp = hasattr(amp, "build_train_network")
    except ImportError:
        has_amp = False
    net = _net()
    args = (net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
            nn.Momentum(net.trainable_params(), 0.1, 0.9))
    if not has_amp:
        with pytest.raises(ValueError, match="kiln.amp.build_train_network"):
            Model(*args, amp_level="O2")
        return
    x, y = _data()
    model = Model(*args, metrics={"accuracy"}, amp_level="O2")
    model.train(4, _dataset(x, y))
    model.train(1, _dataset(x, y), dataset_sink_mode=True, sink_size=4)
    assert isinstance(model.train_network.network, nn.Cell)
    assert model.eval(_dataset(x, y))["accuracy"] > 0.85


@pytest.mark.parametrize("sink_size", [1, 3, 7])
def test_data_sink_compiled_loop_equals_eager_steps(sink_size):
    """ms.data_sink with a JitConfig (one compiled loop per call) leaves the weights and returns
    the loss of the same steps run eagerly; calls continue through the dataset and wrap."""
    x, y = _data(160)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")

    def trainer(net):
        opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
        grad_fn = ms.value_and_grad(lambda a, b: loss_fn(net(a), b), None,
                                    net.trainable_params())

        def train_step(data, label):
            loss, grads = grad_fn(data, label)
            opt(grads)
            return loss
        return train_step

    sink_net, eager_net = _net(), _net()
    before = ms.get_jit_stats()["compiles"]
    sink = ms.data_sink(trainer(sink_net), _dataset(x, y), sink_size=sink_size,
                        jit_config=ms.JitConfig())
    eager = ms.data_sink(trainer(eager_net), _dataset(x, y), sink_size=sink_size)
    for _ in range(3):
        np.testing.assert_allclose(sink().asnumpy(), eager().asnumpy(), rtol=1e-5)
    assert ms.get_jit_stats()["compiles"] - before == 1
    for name, value in _params(eager_net).items():
        np.testing.assert_allclose(_params(sink_net)[name], value, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="sink_size"):
        ms.data_sink(trainer(eager_net), _dataset(x, y), sink_size=0)


def test_data_sink_input_signature_serves_every_chunk_with_one_loop():
    """With an input_signature a sink of stacked batches compiles one loop for any chunk length
    and batch size (here runs of 2-row and 3-row batches), matching eager steps; a column that
    contradicts the signature is an error naming it."""
    sizes = [2, 2, 3, 3, 2, 2, 3, 3]
    rng = np.random.default_rng(4)
    batches = [(rng.standard_normal((n, 4)).astype(np.float32),
                rng.standard_normal((n, 4)).astype(np.float32)) for n in sizes]
    dataset = ds.GeneratorDataset(lambda: iter(batches), ["x", "y"], shuffle=False)

    def fn(a, b):
        return (a * b).sum() + a[-1, 0]

    signature = (ms.Tensor(shape=[None, 4], dtype=ms.float32),
                 ms.Tensor(shape=[None, 4], dtype=ms.float32))
    sink = ms.data_sink(fn, dataset, sink_size=4, jit_config=ms.JitConfig(),
                        input_signature=signature)
    before = ms.get_jit_stats()["compiles"]
    for call in range(2):  # runs [2, 2] and [3, 3] in each sink
        want = fn(*[ms.Tensor(c) for c in batches[4 * call + 3]])
        np.testing.assert_allclose(sink().asnumpy(), want.asnumpy(), rtol=1e-6)
    assert ms.get_jit_stats()["compiles"] - before == 1
    wrong = ms.data_sink(fn, dataset, sink_size=4, jit_config=ms.JitConfig(),
                         input_signature=(ms.Tensor(shape=[None, 5], dtype=ms.float32),) * 2)
    with pytest.raises(ValueError, match=r"input 1 has shape \(2, 2, 4\).*\(None, None, 5\)"):
        wrong()
