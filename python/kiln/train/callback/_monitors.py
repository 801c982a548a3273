"""LossMonitor, TimeMonitor, History and LambdaCallback (MindSpore's printing and recording)."""
import numbers
import time

import numpy as np

from kiln.common.tensor import Tensor
from kiln.train.callback._callback import Callback

__all__ = ["LossMonitor", "TimeMonitor", "History", "LambdaCallback", "loss_value"]


def _check_non_negative_int(value, who, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"For '{who}', the '{name}' must be a non-negative int, but got "
                         f"{value!r}.")
    return int(value)


def loss_value(outputs):
    """The loss a step returned, as a Python float: the first item of a tuple/list (a loss-scale
    step returns (loss, overflow, scale)), a Tensor averaged. Anything else is returned as is."""
    if isinstance(outputs, (tuple, list)) and outputs and isinstance(outputs[0], Tensor):
        outputs = outputs[0]
    if isinstance(outputs, Tensor):
        return float(np.mean(outputs.asnumpy()))
    return outputs


def step_in_epoch(cb_params):
    return (cb_params.cur_step_num - 1) % cb_params.batch_num + 1


class LossMonitor(Callback):
    """Prints ``epoch: E step: S, loss is L`` every `per_print_times` steps (0 prints nothing;
    in sink mode at the first reported step past the interval) and raises ValueError when the
    loss is NaN or inf. In fit, prints the evaluation results at the end of an epoch."""

    def __init__(self, per_print_times=1):
        super().__init__()
        self._per_print_times = _check_non_negative_int(per_print_times, "LossMonitor",
                                                        "per_print_times")
        self._last_print_time = 0

    def on_train_begin(self, run_context):
        self._last_print_time = 0

    def on_train_step_end(self, run_context):
        cb_params = run_context.original_args()
        epoch = cb_params.get("cur_epoch_num", 1)
        loss = loss_value(cb_params.net_outputs)
        step = step_in_epoch(cb_params)
        if isinstance(loss, float) and not np.isfinite(loss):
            raise ValueError(f"In epoch: {epoch} step: {step}, loss is NAN or INF, training "
                             f"process cannot continue, terminating training.")
        if self._per_print_times and \
                cb_params.cur_step_num - self._last_print_time >= self._per_print_times:
            self._last_print_time = cb_params.cur_step_num
            print(f"epoch: {epoch} step: {step}, loss is {loss}", flush=True)

    def on_train_epoch_end(self, run_context):
        cb_params = run_context.original_args()
        metrics = cb_params.get("metrics")
        if metrics:
            print(f"Eval result: epoch {cb_params.cur_epoch_num}, metrics: {metrics}", flush=True)


class TimeMonitor(Callback):
    """Prints the epoch's time and the time per step (``data_size`` steps per epoch, by default
    the epoch's batch_num). With data_time=True also the time spent waiting for data."""

    def __init__(self, data_size=None, data_time=False):
        super().__init__()
        if data_size is not None:
            data_size = _check_non_negative_int(data_size, "TimeMonitor", "data_size")
        if not isinstance(data_time, bool):
            raise TypeError(f"For 'TimeMonitor', 'data_time' must be a bool, but got "
                            f"{type(data_time).__name__}.")
        self.data_size = data_size
        self.data_time = data_time
        self._epoch_start = self._step_end = None
        self._data_seconds = 0.0

    def _begin(self):
        self._epoch_start = self._step_end = time.time()
        self._data_seconds = 0.0

    def _report(self, run_context, what):
        if self._epoch_start is None:
            return
        ms = (time.time() - self._epoch_start) * 1000
        cb_params = run_context.original_args()
        steps = self.data_size or cb_params.get("batch_num") or 1
        line = f"{what} epoch time: {ms:5.3f} ms, per step time: {ms / steps:5.3f} ms"
        if self.data_time:
            line += f", data time: {self._data_seconds * 1000:5.3f} ms"
        print(line, flush=True)

    def on_train_epoch_begin(self, run_context):
        self._begin()

    def on_train_step_begin(self, run_context):
        if self._step_end is not None:
            self._data_seconds += time.time() - self._step_end

    def on_train_step_end(self, run_context):
        self._step_end = time.time()

    def on_train_epoch_end(self, run_context):
        self._report(run_context, "Train")

    def on_eval_epoch_begin(self, run_context):
        self._begin()

    def on_eval_epoch_end(self, run_context):
        self._report(run_context, "Eval")


class History(Callback):
    """Records each training epoch's number (``epoch``) and, per epoch, the last step's loss
    (``history['net_output']``) and the evaluation results of fit (``history['accuracy']``,
    ``history['eval_loss']``, ...)."""

    def __init__(self):
        super().__init__()
        self.epoch = []
        self.history = {}

    def on_train_begin(self, run_context):
        self.epoch = []
        self.history = {}

    def on_train_epoch_end(self, run_context):
        cb_params = run_context.original_args()
        if cb_params.get("mode") == "train":
            self.epoch.append(cb_params.cur_epoch_num)
        outputs = cb_params.get("net_outputs")
        if outputs is not None:
            self.history.setdefault("net_output", []).append(loss_value(outputs))
        for name, value in (cb_params.get("eval_results") or {}).items():
            self.history.setdefault(name, []).append(value)


_HOOKS = tuple(f"on_{m}_{s}" for m in ("train", "eval")
               for s in ("epoch_begin", "epoch_end", "step_begin", "step_end", "begin", "end"))


class LambdaCallback(Callback):
    """A callback from functions: ``LambdaCallback(on_train_epoch_end=lambda run_context: ...)``;
    each argument (on_train_begin ... on_eval_end) is called with the RunContext."""

    def __init__(self, on_train_epoch_begin=None, on_train_epoch_end=None,
                 on_train_step_begin=None, on_train_step_end=None, on_train_begin=None,
                 on_train_end=None, on_eval_epoch_begin=None, on_eval_epoch_end=None,
                 on_eval_step_begin=None, on_eval_step_end=None, on_eval_begin=None,
                 on_eval_end=None):
        super().__init__()
        given = dict(locals())
        for hook in _HOOKS:
            fn = given[hook]
            if fn is not None and not callable(fn):
                raise TypeError(f"For 'LambdaCallback', '{hook}' must be callable or None, "
                                f"but got {type(fn).__name__}.")
            # An instance attribute shadows the method: unset hooks do nothing (they do not
            # fall back to the legacy names).
            setattr(self, hook, fn if fn is not None else _nothing)


def _nothing(run_context):
    """An unset LambdaCallback hook."""
