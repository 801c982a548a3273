"""EarlyStopping and ReduceLROnPlateau: act on a monitored value at the end of each epoch."""
import copy
import numbers

import numpy as np

from kiln import log
from kiln.common.parameter import Parameter
from kiln.common.tensor import Tensor
from kiln.train.callback._callback import Callback
from kiln.train.callback._monitors import loss_value
from kiln.train.serialization import load_param_into_net

__all__ = ["EarlyStopping", "ReduceLROnPlateau"]

# Names whose smaller values are better: mode="auto" minimises these and maximises the rest.
_SMALLER_BETTER = {"hausdorff_distance", "mae", "mse", "loss", "perplexity",
                   "mean_surface_distance", "root_mean_square_distance", "eval_loss"}


def _number(value, who, name, kinds=numbers.Real):
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TypeError(f"For '{who}', '{name}' must be a number, but got "
                        f"{type(value).__name__}.")
    return value


class _Monitor(Callback):
    """What both callbacks share: the monitored value and what counts as an improvement."""

    def __init__(self, who, monitor, mode, min_delta):
        super().__init__()
        if not isinstance(monitor, str):
            raise TypeError(f"For '{who}', 'monitor' must be a str, but got "
                            f"{type(monitor).__name__}.")
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"mode should be 'auto', 'min' or 'max', but got {mode}.")
        self._who, self.monitor, self.mode = who, monitor, mode
        self.min_delta = abs(float(_number(min_delta, who, "min_delta")))
        self._minimise = mode == "min" or (mode == "auto" and monitor in _SMALLER_BETTER)
        self.best = self._worst()

    def _worst(self):
        return np.inf if self._minimise else -np.inf

    def is_improvement(self, current, reference):
        if self._minimise:
            return current < reference - self.min_delta
        return current > reference + self.min_delta

    def _value(self, cb_params):
        """The monitored value of this epoch: "loss" is the last step's training loss; other
        names are looked up in fit's evaluation results. None (with a warning) when absent."""
        candidates = {}
        if self.monitor == "loss":
            value = loss_value(cb_params.get("net_outputs"))
        else:
            candidates = cb_params.get("eval_results") or {}
            value = candidates.get(self.monitor)
        if value is None:
            log.warning(f"{self._who} is conditioned on {self.monitor}, which is not "
                        f"available. Available choices are: {sorted({'loss', *candidates})}")
            return None
        if isinstance(value, Tensor):
            value = value.asnumpy()
        value = np.asarray(value)
        if value.shape not in ((), (1,)):
            raise ValueError(f"{self._who} only supports scalar monitor now, but "
                             f"{self.monitor} has shape {value.shape}.")
        return float(value.reshape(()))


class EarlyStopping(_Monitor):
    """Stops training when the monitored value (default fit's ``eval_loss``; ``"loss"`` is the
    training loss) has not improved by more than min_delta for `patience` epochs; `baseline`
    must also be beaten; restore_best_weights loads the best epoch's parameters back."""

    def __init__(self, monitor="eval_loss", min_delta=0, patience=0, verbose=False, mode="auto",
                 baseline=None, restore_best_weights=False):
        super().__init__("EarlyStopping", monitor, mode, min_delta)
        self.patience = int(_number(patience, "EarlyStopping", "patience", numbers.Integral))
        if self.patience < 0:
            raise ValueError(f"For 'EarlyStopping', 'patience' must be >= 0, got {patience}.")
        self.verbose = bool(verbose)
        self.baseline = None if baseline is None else float(
            _number(baseline, "EarlyStopping", "baseline"))
        self.restore_best_weights = bool(restore_best_weights)
        self.wait = 0
        self.stopped_epoch = 0
        self.best_weights_param_dict = None

    def on_train_begin(self, run_context):
        self.wait = 0
        self.stopped_epoch = 0
        self.best = self._worst()
        self.best_weights_param_dict = None

    @staticmethod
    def _snapshot(network):
        return {name: Parameter(Tensor(p.asnumpy().copy()), name=name)
                for name, p in network.parameters_dict().items()}

    def on_train_epoch_end(self, run_context):
        cb_params = run_context.original_args()
        current = self._value(cb_params)
        if current is None:
            return
        network = cb_params.train_network
        if self.restore_best_weights and self.best_weights_param_dict is None:
            self.best_weights_param_dict = self._snapshot(network)
        self.wait += 1
        if self.is_improvement(current, self.best):
            self.best = current
            if self.restore_best_weights:
                self.best_weights_param_dict = self._snapshot(network)
            if self.baseline is None or self.is_improvement(current, self.baseline):
                self.wait = 0
        if self.wait >= self.patience:
            self.stopped_epoch = cb_params.cur_epoch_num
            run_context.request_stop()
            if self.restore_best_weights and self.best_weights_param_dict is not None:
                if self.verbose:
                    print("Restoring model weights from the end of the best epoch.")
                load_param_into_net(network, copy.copy(self.best_weights_param_dict))

    def on_train_end(self, run_context):
        if self.stopped_epoch > 0 and self.verbose:
            print(f"Epoch {self.stopped_epoch:05d}: early stopping")


class ReduceLROnPlateau(_Monitor):
    """Multiplies the optimizer's learning rate by `factor` (not below min_lr) when the monitored
    value has not improved for `patience` epochs, then waits `cooldown` epochs. The optimizer
    needs one fixed learning rate (its ``learning_rate`` Parameter)."""

    def __init__(self, monitor="eval_loss", factor=0.1, patience=10, verbose=False, mode="auto",
                 min_delta=1e-4, cooldown=0, min_lr=0):
        super().__init__("ReduceLROnPlateau", monitor, mode, min_delta)
        self.factor = float(_number(factor, "ReduceLROnPlateau", "factor"))
        if self.factor >= 1.0:
            raise ValueError(f"For 'ReduceLROnPlateau', 'factor' should be < 1.0, but got "
                             f"{factor}.")
        self.patience = int(_number(patience, "ReduceLROnPlateau", "patience",
                                    numbers.Integral))
        self.cooldown = int(_number(cooldown, "ReduceLROnPlateau", "cooldown", numbers.Integral))
        self.min_lr = float(_number(min_lr, "ReduceLROnPlateau", "min_lr"))
        self.verbose = bool(verbose)
        self.cooldown_counter = 0
        self.wait = 0

    def on_train_begin(self, run_context):
        self.cooldown_counter = 0
        self.wait = 0
        self.best = self._worst()

    def on_train_epoch_end(self, run_context):
        cb_params = run_context.original_args()
        lr = getattr(cb_params.optimizer, "learning_rate", None)
        if not isinstance(lr, Parameter):
            raise ValueError("ReduceLROnPlateau does not support dynamic learning rate and group "
                             "learning rate now.")
        current = self._value(cb_params)
        if current is None:
            return
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if self.is_improvement(current, self.best):
            self.best = current
            self.wait = 0
        elif self.cooldown_counter <= 0:
            self.wait += 1
            if self.wait >= self.patience:
                old = float(np.asarray(lr.asnumpy()).reshape(-1)[0])
                if old > self.min_lr:
                    new = max(old * self.factor, self.min_lr)
                    lr.set_data(Tensor(np.full(tuple(lr.shape), new, np.float32)))
                    if self.verbose:
                        print(f"Epoch {cb_params.cur_epoch_num:05d}: ReduceLROnPlateau reducing "
                              f"learning rate to {new}.")
                    self.cooldown_counter = self.cooldown
                    self.wait = 0
