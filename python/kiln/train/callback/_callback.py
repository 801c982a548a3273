"""Callback protocol: Callback, RunContext, the callback parameters and the list that runs them."""
from contextlib import ExitStack

from kiln import log

__all__ = ["Callback", "RunContext", "CallbackManager", "InternalCallbackParam"]

_LEGACY = {"begin", "end", "epoch_begin", "epoch_end", "step_begin", "step_end"}


class Callback:
    """Base class of callbacks. Override the ``on_train_*`` / ``on_eval_*`` methods (or the
    legacy ``begin``/``epoch_begin``/``step_begin``/``step_end``/``epoch_end``/``end``, which
    the default ``on_*`` methods call, as MindSpore's do). A callback is a context manager that
    Model enters for the duration of train/eval/fit."""

    def __enter__(self):
        return self

    def __exit__(self, *err):
        """Releases resources (nothing by default)."""

    # Legacy names: each is what both the train and the eval hook of its stage call by default.
    def begin(self, run_context):
        """Called once before training or evaluation."""

    def epoch_begin(self, run_context):
        """Called before each epoch."""

    def epoch_end(self, run_context):
        """Called after each epoch."""

    def step_begin(self, run_context):
        """Called before each step."""

    def step_end(self, run_context):
        """Called after each step."""

    def end(self, run_context):
        """Called once after training or evaluation."""

    def on_train_begin(self, run_context):
        self.begin(run_context)

    def on_train_epoch_begin(self, run_context):
        self.epoch_begin(run_context)

    def on_train_epoch_end(self, run_context):
        self.epoch_end(run_context)

    def on_train_step_begin(self, run_context):
        self.step_begin(run_context)

    def on_train_step_end(self, run_context):
        self.step_end(run_context)

    def on_train_end(self, run_context):
        self.end(run_context)

    def on_eval_begin(self, run_context):
        self.begin(run_context)

    def on_eval_epoch_begin(self, run_context):
        self.epoch_begin(run_context)

    def on_eval_epoch_end(self, run_context):
        self.epoch_end(run_context)

    def on_eval_step_begin(self, run_context):
        self.step_begin(run_context)

    def on_eval_step_end(self, run_context):
        self.step_end(run_context)

    def on_eval_end(self, run_context):
        self.end(run_context)


def _fan_out(name):
    def call_all(self, run_context):
        for cb in self._callbacks:
            getattr(cb, name)(run_context)
    call_all.__name__ = name
    call_all.__doc__ = f"Calls {name} of every callback, in order."
    return call_all


class CallbackManager(Callback):
    """Runs a list of callbacks in order; entering it enters each of them (an ExitStack, so the
    ones entered are exited even when a later one fails)."""

    def __init__(self, callbacks):
        self._callbacks, self._stack = [], None
        if isinstance(callbacks, Callback):
            self._callbacks.append(callbacks)
        elif isinstance(callbacks, list):
            for cb in callbacks:
                if not isinstance(cb, Callback):
                    raise TypeError("When the 'callbacks' is a list, the elements in "
                                    "'callbacks' must be Callback functions.")
                self._callbacks.append(cb)
        elif callbacks is not None:
            raise TypeError("The 'callbacks' is not a Callback or a list of Callback.")

    def __enter__(self):
        if self._stack is None:
            entered, self._stack = [], ExitStack().__enter__()
            for cb in self._callbacks:
                target = self._stack.enter_context(cb)
                if not isinstance(target, Callback):
                    log.warning("Please return 'self' or a Callback as the enter target.")
                    target = cb
                entered.append(target)
            self._callbacks = entered
        return self

    def __exit__(self, *err):
        stack, self._stack = self._stack, None
        return stack.__exit__(*err)


for _name in sorted(_LEGACY) + [f"on_{m}_{s}" for m in ("train", "eval")
                                for s in ("begin", "epoch_begin", "epoch_end", "step_begin",
                                          "step_end", "end")]:
    setattr(CallbackManager, _name, _fan_out(_name))


class InternalCallbackParam(dict):
    """The callback parameters: a dict whose keys are also attributes (cb_params.cur_step_num)."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"the callback parameters have no field {key!r}") from None

    def __setattr__(self, key, value):
        self[key] = value


class RunContext:
    """What a callback receives: original_args() is the callback parameters (cur_epoch_num,
    cur_step_num, batch_num, net_outputs, ...); request_stop() ends training after the current
    step (and epoch)."""

    def __init__(self, original_args):
        if not isinstance(original_args, dict):
            raise TypeError(f"The argument 'original_args' of RunContext should be dict type, "
                            f"but got {type(original_args)}.")
        self._original_args = original_args
        self._stop_requested = False

    def original_args(self):
        return self._original_args

    def request_stop(self):
        self._stop_requested = True

    def get_stop_requested(self):
        return self._stop_requested


def legacy_methods(callback):
    """The legacy method names a user's callback class defines itself (Model warns in train and
    eval, and refuses them in fit, as MindSpore does)."""
    return set(type(callback).__dict__) & _LEGACY
