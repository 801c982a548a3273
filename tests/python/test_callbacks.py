"""kiln.train.callback: the hook order and callback parameters Model reports, legacy names,
request_stop, LossMonitor/TimeMonitor output, ModelCheckpoint rotation, EarlyStopping,
ReduceLROnPlateau, History, LambdaCallback, ProgressBar and LossPlot."""
import io
import os
import sys

import numpy as np
import pytest

import kiln as ms
import kiln.dataset as ds
from kiln import nn
from kiln.train import Model
from kiln.train.callback import (
    Callback,
    CheckpointConfig,
    EarlyStopping,
    History,
    LambdaCallback,
    LossMonitor,
    LossPlot,
    ModelCheckpoint,
    ProgressBar,
    ReduceLROnPlateau,
    RunContext,
    TimeMonitor,
)

MODES = [ms.PYNATIVE_MODE, ms.GRAPH_MODE]


def _dataset(n=96, batch=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    y = (x @ rng.normal(size=(8, 3)).astype(np.float32)).argmax(1).astype(np.int32)
    return ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(batch)


def _model(lr=0.1, metrics=None):
    ms.set_seed(1)
    net = nn.SequentialCell(nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 3))
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    return Model(net, loss, nn.Momentum(net.trainable_params(), lr, 0.9), metrics=metrics)


class Recorder(Callback):
    def __init__(self):
        self.events = []

    def _add(self, name, run_context):
        p = run_context.original_args()
        self.events.append((name, p.get("cur_epoch_num"), p.get("cur_step_num")))

    def __getattribute__(self, name):
        if name.startswith("on_"):
            return lambda rc: self._add(name, rc)
        return super().__getattribute__(name)


@pytest.mark.parametrize("mode", MODES)
def test_hook_order_and_fields(mode):
    ms.set_context(mode=mode)
    rec = Recorder()
    fields = {}

    class Fields(Callback):
        def on_train_step_end(self, run_context):
            p = run_context.original_args()
            fields.update({k: p[k] for k in ("epoch_num", "batch_num", "mode", "optimizer",
                                             "loss_fn", "train_network", "net_outputs",
                                             "dataset_sink_mode", "network")})

    model = _model()
    model.train(2, _dataset(), callbacks=[rec, Fields()])
    names = [e[0] for e in rec.events]
    epoch = ["on_train_epoch_begin"] + ["on_train_step_begin", "on_train_step_end"] * 3 + \
        ["on_train_epoch_end"]
    assert names == ["on_train_begin"] + epoch * 2 + ["on_train_end"]
    steps = [e[2] for e in rec.events if e[0] == "on_train_step_end"]
    assert steps == [1, 2, 3, 4, 5, 6]
    assert fields["epoch_num"] == 2 and fields["batch_num"] == 3 and fields["mode"] == "train"
    assert fields["optimizer"] is model.train_network.optimizer
    assert fields["train_network"] is model.train_network and not fields["dataset_sink_mode"]
    assert isinstance(fields["net_outputs"], ms.Tensor)
    rec.events.clear()
    model2 = _model(metrics={"accuracy"})
    model2.eval(_dataset(), callbacks=rec)
    assert [e[0] for e in rec.events] == (["on_eval_begin", "on_eval_epoch_begin"] +
                                          ["on_eval_step_begin", "on_eval_step_end"] * 3 +
                                          ["on_eval_epoch_end", "on_eval_end"])


def test_legacy_names_are_called_by_the_default_hooks():
    calls = []

    class Old(Callback):
        def begin(self, rc):
            calls.append("begin")

        def epoch_end(self, rc):
            calls.append("epoch_end")

        def step_end(self, rc):
            calls.append(("step_end", rc.original_args().mode))

    model = _model(metrics={"accuracy"})
    model.train(1, _dataset(), callbacks=Old())
    assert calls == ["begin", ("step_end", "train"), ("step_end", "train"),
                     ("step_end", "train"), "epoch_end"]
    calls.clear()
    model.eval(_dataset(n=32), callbacks=Old())
    assert calls == ["begin", ("step_end", "eval"), "epoch_end"]


def test_run_context_and_callback_list_checks():
    with pytest.raises(TypeError, match="dict"):
        RunContext([1])
    rc = RunContext({"a": 1})
    assert rc.original_args() == {"a": 1} and not rc.get_stop_requested()
    rc.request_stop()
    assert rc.get_stop_requested()
    with pytest.raises(TypeError, match="Callback"):
        _model().train(1, _dataset(), callbacks=[object()])


def test_callbacks_are_entered_and_exited():
    seen = []

    class Resource(Callback):
        def __enter__(self):
            seen.append("enter")
            return self

        def __exit__(self, *err):
            seen.append("exit")

    with pytest.raises(ZeroDivisionError):
        class Boom(Callback):
            def on_train_step_end(self, rc):
                raise ZeroDivisionError

        _model().train(1, _dataset(), callbacks=[Resource(), Boom()])
    assert seen == ["enter", "exit"]


def test_loss_monitor_output_and_nan(capsys):
    _model().train(2, _dataset(), callbacks=LossMonitor(2))
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(", loss is ")[0] for line in lines] == [
        "epoch: 1 step: 2", "epoch: 2 step: 1", "epoch: 2 step: 3"]
    float(lines[0].split("loss is ")[1])
    with pytest.raises(ValueError, match="per_print_times"):
        LossMonitor(-1)

    class NaNLoss(Callback):
        def on_train_step_end(self, rc):
            rc.original_args().net_outputs = ms.Tensor(np.float32(np.nan))

    with pytest.raises(ValueError, match="NAN or INF"):
        _model().train(1, _dataset(), callbacks=[NaNLoss(), LossMonitor()])


def test_time_monitor_output(capsys):
    _model().train(2, _dataset(), callbacks=TimeMonitor())
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("Train epoch time: ") and
                                   "per step time: " in line for line in lines)


def _ckpts(directory):
    return sorted(f for f in os.listdir(directory) if f.endswith(".ckpt"))


@pytest.mark.parametrize("mode", MODES)
def test_model_checkpoint_rotation_and_contents(mode, tmp_path):
    ms.set_context(mode=mode)
    config = CheckpointConfig(save_checkpoint_steps=2, keep_checkpoint_max=2,
                              append_info=["epoch_num", "step_num"])
    cb = ModelCheckpoint("net", str(tmp_path), config)
    model = _model()
    model.train(3, _dataset(), callbacks=cb)         # 9 steps: saves at 2, 4, 6, 8 and 9 (end)
    assert _ckpts(tmp_path) == ["net-3_2.ckpt", "net-3_3.ckpt"]
    params = ms.load_checkpoint(str(tmp_path / "net-3_3.ckpt"))
    assert int(np.asarray(params["step_num"].asnumpy()).reshape(-1)[0]) == 9
    assert int(np.asarray(params["epoch_num"].asnumpy()).reshape(-1)[0]) == 3
    names = set(params)
    assert {"global_step", "learning_rate"} <= names
    assert any(n.startswith("moments.") for n in names)        # the optimizer's state
    for p in model.train_network.get_parameters():
        np.testing.assert_array_equal(params[p.name].asnumpy(), p.asnumpy())
    assert not [f for f in os.listdir(tmp_path) if not f.endswith(".ckpt")]  # no temp files
    # A second run into the same directory does not overwrite: prefix net_1.
    ModelCheckpoint("net", str(tmp_path), config)
    cb2 = ModelCheckpoint("net", str(tmp_path), config)
    model.train(1, _dataset(), callbacks=cb2)
    assert os.path.basename(cb2.latest_ckpt_file_name) == "net_1-1_3.ckpt"


def test_checkpoint_config_rules(tmp_path):
    with pytest.raises(ValueError, match="can't be all None or 0"):
        CheckpointConfig(0, 0, 0, 0)
    with pytest.raises(ValueError, match="non-negative"):
        CheckpointConfig(save_checkpoint_steps=-1)
    c = CheckpointConfig(save_checkpoint_steps=5, save_checkpoint_seconds=10,
                         keep_checkpoint_max=0, keep_checkpoint_per_n_minutes=0)
    assert c.save_checkpoint_seconds is None and c.keep_checkpoint_max == 1
    c = CheckpointConfig(keep_checkpoint_max=3, keep_checkpoint_per_n_minutes=5)
    assert c.keep_checkpoint_per_n_minutes is None
    with pytest.raises(TypeError, match="CheckpointConfig"):
        ModelCheckpoint(config={})
    with pytest.raises(ValueError, match="prefix"):
        ModelCheckpoint("a/b")
    # seconds: nothing is due within the run but the final save
    cb = ModelCheckpoint("s", str(tmp_path), CheckpointConfig(save_checkpoint_steps=0,
                                                             save_checkpoint_seconds=3600))
    _model().train(1, _dataset(), callbacks=cb)
    assert _ckpts(tmp_path) == ["s-1_3.ckpt"]


def test_keep_checkpoint_per_n_minutes_keeps_one(tmp_path):
    cb = ModelCheckpoint("m", str(tmp_path), CheckpointConfig(
        save_checkpoint_steps=1, keep_checkpoint_max=0, keep_checkpoint_per_n_minutes=1))
    _model().train(2, _dataset(), callbacks=cb)
    # All six files fall within one minute: the oldest and the newest remain.
    assert _ckpts(tmp_path) == ["m-1_1.ckpt", "m-2_3.ckpt"]


def test_early_stopping_on_training_loss():
    class Flat(Callback):  # a loss that never improves after the first epoch
        def on_train_epoch_end(self, rc):
            rc.original_args().net_outputs = ms.Tensor(np.float32(1.0))

    stop = EarlyStopping(monitor="loss", patience=2)
    hist = History()
    _model().train(10, _dataset(), callbacks=[Flat(), stop, hist])
    assert hist.epoch == [1, 2, 3] and stop.stopped_epoch == 3
    with pytest.raises(ValueError, match="mode"):
        EarlyStopping(mode="up")


def test_early_stopping_restores_best_weights():
    model = _model(lr=5.0, metrics={"accuracy"})  # a rate that makes training diverge
    stop = EarlyStopping(monitor="accuracy", patience=1, restore_best_weights=True)
    best = {}

    class Keep(Callback):
        def on_train_epoch_end(self, rc):
            acc = rc.original_args()["eval_results"]["accuracy"]
            if acc > best.get("acc", -1):
                best["acc"] = acc
                best["w"] = model.predict_network[0].weight.asnumpy().copy()

    model.fit(20, _dataset(), _dataset(), callbacks=[Keep(), stop])
    assert stop.stopped_epoch > 0
    np.testing.assert_array_equal(model.predict_network[0].weight.asnumpy(), best["w"])


def test_reduce_lr_on_plateau():
    class Flat(Callback):
        def on_train_epoch_end(self, rc):
            rc.original_args().net_outputs = ms.Tensor(np.float32(1.0))

    model = _model(lr=0.1)
    cb = ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1, min_delta=0, min_lr=0.03)
    model.train(4, _dataset(), callbacks=[Flat(), cb])
    lr = float(model.train_network.optimizer.learning_rate.asnumpy().reshape(-1)[0])
    assert lr == pytest.approx(0.03)   # 0.1 -> 0.05 -> 0.03 (min_lr) -> stays
    with pytest.raises(ValueError, match="factor"):
        ReduceLROnPlateau(factor=1.5)


def test_history_and_lambda_callback():
    hist = History()
    seen = []
    lam = LambdaCallback(on_train_epoch_end=lambda rc: seen.append(
        rc.original_args().cur_epoch_num), on_eval_end=lambda rc: seen.append("eval"))
    model = _model(metrics={"accuracy"})
    model.fit(2, _dataset(), _dataset(), callbacks=[hist, lam])
    assert hist.epoch == [1, 2] and len(hist.history["net_output"]) == 2
    assert set(hist.history) == {"net_output", "accuracy", "eval_loss"}
    assert seen == ["eval", 1, "eval", 2]
    with pytest.raises(TypeError, match="callable"):
        LambdaCallback(on_train_begin=3)


def test_progress_bar_plain_lines_when_not_a_terminal():
    out = io.StringIO()
    _model(metrics={"accuracy"}).fit(2, _dataset(), _dataset(), callbacks=ProgressBar(file=out))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in out.getvalue()
    assert lines[0].startswith("Epoch 1/2: 3/3 steps, loss ") and "accuracy: " in lines[0]


def test_progress_bar_live_line_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    _model().train(1, _dataset(), callbacks=ProgressBar(width=10, file=out))
    text = out.getvalue()
    assert text.count("\r") == 4 and text.endswith("\n") and text.count("\n") == 1
    assert "[==========] 3/3" in text and "step/s" in text


def test_fit_writes_a_png_plot(tmp_path):
    path = tmp_path / "curve.png"
    _model(metrics={"accuracy"}).fit(2, _dataset(), _dataset(), plot=str(path))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    plot = LossPlot(str(tmp_path / "b.png"))
    _model().train(2, _dataset(), callbacks=plot)
    assert plot.steps == [1, 2, 3, 4, 5, 6] and os.path.getsize(tmp_path / "b.png") > 0


def test_plot_without_matplotlib_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    with pytest.raises(ImportError, match=r"kiln\[plot\]"):
        LossPlot("x.png")


def test_exception_save_writes_a_breakpoint_checkpoint(tmp_path):
    class Fail(Callback):
        def on_train_step_end(self, rc):
            if rc.original_args().cur_step_num == 4:
                raise RuntimeError("power cut")

    config = CheckpointConfig(save_checkpoint_steps=100, exception_save=True)
    model = _model()
    with pytest.raises(RuntimeError, match="power cut"):
        model.train(3, _dataset(), callbacks=[ModelCheckpoint("b", str(tmp_path), config),
                                              Fail()])
    assert _ckpts(tmp_path) == ["b-2_1_breakpoint.ckpt"]
    saved = ms.load_checkpoint(str(tmp_path / "b-2_1_breakpoint.ckpt"))
    assert int(saved["global_step"].asnumpy().reshape(-1)[0]) == 4


def test_missing_callbacks_say_so():
    with pytest.raises(AttributeError, match="SummaryCollector is not in kiln yet"):
        ms.train.callback.SummaryCollector  # noqa: B018
    with pytest.raises(AttributeError, match="mindspore.train.SummaryLandscape is not in kiln"):
        ms.train.SummaryLandscape  # noqa: B018
    assert ms.train.LossMonitor is LossMonitor and ms.LossMonitor is LossMonitor
    assert ms.train.callback.ModelCheckpoint is ModelCheckpoint
