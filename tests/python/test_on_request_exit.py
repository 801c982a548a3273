"""train.OnRequestExit: a signal stops Model.train / eval after the current step, saves the
network (checkpoint and MindIR), and the next run resumes from the checkpoint."""
import os
import signal

import numpy as np
import pytest

import kiln as ms
import kiln.dataset as ds
from kiln import nn
from kiln.train import Model
from kiln.train.callback import Callback, OnRequestExit


def _dataset(n=96, batch=16):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    y = rng.integers(0, 3, size=n).astype(np.int32)
    return ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(batch)


def _model(seed=1):
    ms.set_seed(seed)
    net = nn.SequentialCell(nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 3))
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    return Model(net, loss, nn.Momentum(net.trainable_params(), 0.1, 0.9), metrics={"acc"}), net


class SignalAt(Callback):
    """Sends the process `sig` at the end of train step (or eval step) `step`; counts steps."""

    def __init__(self, step, sig=signal.SIGTERM):
        self.step, self.sig, self.steps, self.eval_steps = step, sig, 0, 0

    def on_train_step_end(self, run_context):
        self.steps += 1
        if self.steps == self.step:
            os.kill(os.getpid(), self.sig)

    def on_eval_step_end(self, run_context):
        self.eval_steps += 1
        if self.eval_steps == self.step:
            os.kill(os.getpid(), self.sig)


class Recorder(Callback):
    """The trainable weights when training begins (after earlier callbacks' on_train_begin)."""

    def on_train_step_begin(self, run_context):
        if not hasattr(self, "weights"):
            net = run_context.original_args().network
            self.weights = {p.name: p.asnumpy().copy() for p in net.trainable_params()}


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_a_signal_stops_training_saves_and_the_next_run_resumes(tmp_path, mode):
    ms.set_context(mode=mode)
    model, net = _model()
    exit_cb = OnRequestExit(file_name="Demo", directory=str(tmp_path))
    counter = SignalAt(2)
    before = signal.getsignal(signal.SIGTERM)
    model.train(3, _dataset(), callbacks=[counter, exit_cb])
    assert counter.steps == 2  # of 18: stopped after the step the signal came in
    assert signal.getsignal(signal.SIGTERM) is before  # the handler was for the run only
    ckpt, mindir = exit_cb.path("train", ".ckpt"), exit_cb.path("train", ".mindir")
    assert os.path.isfile(ckpt) and os.path.isfile(mindir)
    saved = {p.name: p.asnumpy().copy() for p in net.trainable_params()}
    loaded = ms.load(mindir)
    assert loaded is not None
    # a fresh job with other initial weights starts from the saved ones
    resumed, net2 = _model(seed=7)
    resume_cb = OnRequestExit(file_name="Demo", directory=str(tmp_path))
    first = Recorder()
    resumed.train(1, _dataset(), callbacks=[first, resume_cb])
    for name, value in first.weights.items():
        np.testing.assert_array_equal(value, saved[name])


def test_without_a_signal_nothing_is_saved(tmp_path):
    model, _ = _model()
    cb = OnRequestExit(directory=str(tmp_path))
    counter = SignalAt(step=-1)
    model.train(1, _dataset(), callbacks=[counter, cb])
    assert counter.steps == 6 and not os.listdir(tmp_path)


def test_a_signal_during_eval_stops_it_and_saves_the_eval_network(tmp_path):
    model, _ = _model()
    cb = OnRequestExit(save_mindir=False, file_name="E", directory=str(tmp_path),
                       sig=signal.SIGUSR1)
    counter = SignalAt(2, signal.SIGUSR1)
    model.eval(_dataset(), callbacks=[counter, cb])
    assert counter.eval_steps == 2
    assert os.path.isfile(cb.path("eval", ".ckpt"))
    assert not os.path.exists(cb.path("eval", ".mindir"))


def test_arguments_are_checked():
    with pytest.raises(TypeError, match="save_ckpt must be a bool"):
        OnRequestExit(save_ckpt=1)
    with pytest.raises(ValueError, match="file_name"):
        OnRequestExit(file_name="a/b")
    with pytest.raises(ValueError, match="SIGKILL cannot be caught"):
        OnRequestExit(sig=signal.SIGKILL)
    with pytest.raises(TypeError, match="sig must be a signal number"):
        OnRequestExit(sig="TERM")
