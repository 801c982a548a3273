"""Model: MindSpore's high-level train / eval / predict / fit over a network, a loss and an
optimizer, with callbacks; the step compiles once in GRAPH_MODE and runs eagerly in PyNative."""
import importlib
import numbers

from kiln import context, log
from kiln._auto_parallel import ParallelMode, get_auto_parallel_context
from kiln.common.tensor import Tensor
from kiln.nn.cell import Cell
from kiln.nn.graph_cell import GraphCell
from kiln.nn.wrap.cell_wrapper import TrainOneStepCell, WithEvalCell, WithLossCell
from kiln.train._data import DataSource
from kiln.train._loops import SinkLoop, eval_during_train, run_eval, train_plain, train_sink
from kiln.train.callback._callback import CallbackManager, InternalCallbackParam, legacy_methods
from kiln.train.callback._checkpoint import ModelCheckpoint
from kiln.train.callback._progress import LossPlot

__all__ = ["Model"]

_KWARGS = ("loss_scale_manager", "keep_batchnorm_fp32", "boost_config_dict", "acc_level")
_AMP_LEVELS = ("O0", "O1", "O2", "O3", "auto")
# kiln's own callbacks: never warned about for legacy method names, and (but TimeMonitor) not
# run during fit's evaluation, as MindSpore treats its internal callbacks.
INTERNAL_CALLBACKS = {"LossMonitor", "TimeMonitor", "ModelCheckpoint", "History",
                      "EarlyStopping", "ReduceLROnPlateau", "ProgressBar", "LossPlot"}


def _check_bool(value, name):
    if not isinstance(value, bool):
        raise TypeError(f"The type of '{name}' must be bool, but got {type(value).__name__}.")
    return value


def _check_int(value, name, minimum=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"The type of '{name}' must be int, but got {type(value).__name__}.")
    if minimum is not None and value < minimum:
        raise ValueError(f"The '{name}' must be >= {minimum}, but got {value}.")
    return int(value)


def _callback_list(callbacks):
    if callbacks is None:
        return []
    if isinstance(callbacks, (list, tuple)):
        return list(callbacks)
    return [callbacks]


def _amp_module():
    try:
        return importlib.import_module("kiln.amp")
    except ImportError:
        return None


class Model:
    """High-level training and inference. `network` with `loss_fn` and `optimizer` is wrapped
    into WithLossCell + TrainOneStepCell (with amp_level/loss_scale_manager, through
    kiln.amp.build_train_network); without an optimizer the network (with loss_fn, wrapped in
    WithLossCell) must update itself. `metrics` (a dict name -> Metric or a set of names)
    enables eval and fit; the eval network is `eval_network` or WithEvalCell(network, loss_fn).
    """

    def __init__(self, network, loss_fn=None, optimizer=None, metrics=None, eval_network=None,
                 eval_indexes=None, amp_level="O0", boost_level="O0", **kwargs):
        for arg in kwargs:
            if arg not in _KWARGS:
                raise ValueError(f"The argument in 'kwargs' should be 'loss_scale_manager' or "
                                 f"'keep_batchnorm_fp32' or 'boost_config_dict' or 'acc_level', "
                                 f"but got '{arg}'.")
        if not isinstance(network, Cell):
            raise TypeError(f"For 'Model', the type of 'network' must be Cell, but got "
                            f"{type(network).__name__}.")
        if amp_level not in _AMP_LEVELS:
            raise ValueError(f"For 'Model', 'amp_level' must be one of {list(_AMP_LEVELS)}, but "
                             f"got {amp_level!r}.")
        boost_level = kwargs.get("acc_level", boost_level)
        if boost_level not in ("O0", "O1", "O2"):
            raise ValueError(f"For 'Model', 'boost_level' must be 'O0', 'O1' or 'O2', but got "
                             f"{boost_level!r}.")
        if boost_level != "O0":
            raise ValueError(f"For 'Model', boost_level={boost_level!r} (MindSpore's boost "
                             f"optimisations) is not supported by kiln; use 'O0'.")
        if optimizer is None and amp_level != "O0":
            raise ValueError("Auto mixed precision will not work because 'optimizer' is None. "
                             "Please set amp_level='O0' to disable auto mixed precision or set "
                             "'optimizer' not be None to use auto mixed precision.")
        self._network = network
        self._loss_fn = loss_fn
        self._optimizer = optimizer
        self._amp_level = amp_level
        self._boost_level = boost_level
        self._loss_scale_manager_set = "loss_scale_manager" in kwargs
        self._loss_scale_manager = kwargs.get("loss_scale_manager")
        self._keep_bn_fp32 = kwargs.get("keep_batchnorm_fp32",
                                        amp_level not in ("O0", "O3"))
        self._metrics = metrics
        self._check_graph_cell(kwargs)
        self._train_network = self._build_train_network()
        self._build_eval_network(metrics, eval_network, eval_indexes)
        self._predict_network = network
        self._sink_loop = None
        self._backbone_is_train = True
        self._current_epoch_num = 0
        self._current_step_num = 0

    # ---- building ----
    def _check_graph_cell(self, kwargs):
        if not isinstance(self._network, GraphCell):
            return
        if self._loss_fn is not None or self._optimizer is not None:
            raise ValueError(f"For 'Model', 'loss_fn' and 'optimizer' should be None when network "
                             f"is a GraphCell, but got 'loss_fn': {self._loss_fn}, 'optimizer': "
                             f"{self._optimizer}.")
        if kwargs:
            raise ValueError("For 'Model', the '**kwargs' argument should be empty when network "
                             "is a GraphCell.")

    def _build_train_network(self):
        network = self._network
        if self._loss_scale_manager_set and self._optimizer is None:
            raise ValueError("The argument 'optimizer' can not be None when set "
                             "'loss_scale_manager'.")
        if self._optimizer is None:
            return WithLossCell(network, self._loss_fn) if self._loss_fn else network
        if self._amp_level == "O0" and not self._loss_scale_manager_set:
            if self._loss_fn is not None:
                network = WithLossCell(network, self._loss_fn)
            return TrainOneStepCell(network, self._optimizer)
        amp = _amp_module()
        if amp is None or not hasattr(amp, "build_train_network"):
            raise ValueError(f"For 'Model', amp_level={self._amp_level!r} and "
                             f"loss_scale_manager need kiln.amp.build_train_network, which this "
                             f"build of kiln does not have; use amp_level='O0' without a "
                             f"loss_scale_manager.")
        config = {"keep_batchnorm_fp32": self._keep_bn_fp32}
        if self._loss_scale_manager_set:
            config["loss_scale_manager"] = self._loss_scale_manager
        return amp.build_train_network(network, self._optimizer, self._loss_fn,
                                       level=self._amp_level, boost_level=self._boost_level,
                                       **config)

    def _build_eval_network(self, metrics, eval_network, eval_indexes):
        from kiln.train.metrics import get_metrics  # noqa: PLC0415 - kiln.train imports Model
        self._metric_fns = get_metrics(metrics) or {}
        self._eval_network, self._eval_indexes = eval_network, None
        if not self._metric_fns:
            return
        if eval_network is not None:
            if eval_indexes is not None and not (isinstance(eval_indexes, list)
                                                 and len(eval_indexes) == 3):
                raise ValueError(f"The argument 'eval_indexes' must be a list or None. If "
                                 f"'eval_indexes' is a list, length of it must be three. But got "
                                 f"'eval_indexes' {eval_indexes}")
            self._eval_indexes = eval_indexes
            return
        if self._loss_fn is None:
            raise ValueError("If `metrics` is set, `eval_network` must not be None. Do not set "
                             "`metrics` if you don't want an evaluation. For one data, one label "
                             "and one logits, set `loss_fn` instead and Model builds the "
                             "evaluation network from `network` and `loss_fn`.")
        self._eval_network = WithEvalCell(self._network, self._loss_fn,
                                          self._amp_level in ("O2", "O3", "auto"))
        self._eval_indexes = [0, 1, 2]

    @property
    def train_network(self):
        return self._train_network

    @property
    def predict_network(self):
        return self._predict_network

    @property
    def eval_network(self):
        return self._eval_network

    def _set_mode(self, network, is_train):
        if self._backbone_is_train != is_train or network.training != is_train:
            network.set_train(is_train)
            self._backbone_is_train = is_train
        return network

    def _sink_network(self):
        if self._sink_loop is None:
            self._sink_loop = SinkLoop(self._train_network)
        return self._sink_loop

    # ---- metrics ----
    def _clear_metrics(self):
        for metric in self._metric_fns.values():
            metric.clear()

    def _update_metrics(self, outputs):
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        if not isinstance(outputs, tuple):
            raise ValueError(f"The argument 'outputs' should be tuple, but got {type(outputs)}.")
        if self._eval_indexes is not None and len(outputs) < 3:
            raise ValueError(f"The length of 'outputs' must be >= 3, but got {len(outputs)}")
        loss_class = getattr(importlib.import_module("kiln.train.metrics"), "Loss", None)
        for metric in self._metric_fns.values():
            if self._eval_indexes is None:
                metric.update(*outputs)
            elif loss_class is not None and isinstance(metric, loss_class):
                metric.update(outputs[self._eval_indexes[0]])
            else:
                metric.update(outputs[self._eval_indexes[1]], outputs[self._eval_indexes[2]])

    def _get_metrics(self):
        return {name: metric.eval() for name, metric in self._metric_fns.items()}

    # ---- public API ----
    def _check_train_args(self, who, epoch, dataset_sink_mode, sink_size, initial_epoch,
                          callbacks, source):
        _check_bool(dataset_sink_mode, "dataset_sink_mode")
        if isinstance(self._train_network, GraphCell) and dataset_sink_mode:
            raise ValueError("Dataset sink mode is currently not supported when training with a "
                             "GraphCell.")
        _check_int(sink_size, "sink_size")
        _check_int(epoch, "epoch", 0)
        _check_int(initial_epoch, "initial_epoch", 0)
        if initial_epoch >= epoch:
            raise ValueError(f"For 'Model.{who}', the parameter 'epoch' must bigger than parameter "
                             f"'initial_epoch', but got the parameter 'epoch' is {epoch}, "
                             f"'initial_epoch' is {initial_epoch}.")
        dataset_size = source.size()
        if dataset_size == 0:
            raise ValueError("There is no valid data in dataset, please check dataset file "
                             "firstly.")
        if sink_size == -1:
            sink_size = dataset_size
        if sink_size < -1 or sink_size == 0:
            raise ValueError(f"For 'Model.{who}', The argument 'sink_size' must be -1 or "
                             f"positive, but got {sink_size}.")
        self._check_callback_methods(callbacks, who)
        return sink_size

    @staticmethod
    def _check_callback_methods(callbacks, who):
        for cb in _callback_list(callbacks):
            names = legacy_methods(cb)
            if not names or type(cb).__name__ in INTERNAL_CALLBACKS:
                continue
            text = (f"For {type(cb).__name__} callback, {sorted(names)} methods may not be "
                    f"supported in later version, Use methods prefixed with 'on_train' or "
                    f"'on_eval' instead when using customized callbacks.")
            if who == "fit":
                raise ValueError(text)
            log.warning(text)

    def train(self, epoch, train_dataset, callbacks=None, dataset_sink_mode=False, sink_size=-1,
              initial_epoch=0):
        """Trains `epoch - initial_epoch` epochs (epochs initial_epoch+1 .. epoch). With
        dataset_sink_mode, an epoch is `sink_size` steps (the whole dataset with -1); in
        GRAPH_MODE those steps run as one compiled loop and callbacks see one step per sink."""
        source = DataSource(train_dataset, "train")
        sink_size = self._check_train_args("train", epoch, dataset_sink_mode, sink_size,
                                           initial_epoch, callbacks, source)
        self._train(epoch, source, callbacks, dataset_sink_mode, sink_size, initial_epoch)

    def fit(self, epoch, train_dataset, valid_dataset=None, valid_frequency=1, callbacks=None,
            dataset_sink_mode=False, valid_dataset_sink_mode=False, sink_size=-1, initial_epoch=0,
            *, plot=None):
        """train() with an evaluation on valid_dataset after every `valid_frequency` epochs (an
        int) or after the listed epochs (a list); callbacks see the results in
        ``cb_params.eval_results`` (metrics and eval_loss) at on_train_epoch_end. kiln adds
        `plot`: a PNG path where LossPlot draws loss and metrics over the steps."""
        source = DataSource(train_dataset, "fit")
        _check_bool(valid_dataset_sink_mode, "valid_dataset_sink_mode")
        sink_size = self._check_train_args("fit", epoch, dataset_sink_mode, sink_size,
                                           initial_epoch, callbacks, source)
        if isinstance(valid_frequency, bool) or not isinstance(valid_frequency, (int, list)):
            raise TypeError(f"For 'Model.fit', the type of 'valid_frequency' must be a list or an "
                            f"integer, but got type {type(valid_frequency)}.")
        if valid_dataset is not None and not self._metric_fns:
            raise ValueError("For 'Model.fit', if valid_dataset is not None, the model argument "
                             "'metrics' can not be None or empty, you should set the argument "
                             "'metrics' for model.")
        callbacks = _callback_list(callbacks)
        if plot is not None:
            callbacks.append(LossPlot(plot))
        valid = None
        if valid_dataset is not None:
            valid = (DataSource(valid_dataset, "fit"), valid_frequency, valid_dataset_sink_mode)
        self._train(epoch, source, callbacks, dataset_sink_mode, sink_size, initial_epoch, valid)

    def _train(self, epoch, source, callbacks, sink_mode, sink_size, initial_epoch, valid=None):
        cb_params = InternalCallbackParam()
        cb_params.train_network = self._train_network
        cb_params.epoch_num = epoch - initial_epoch
        cb_params.initial_epoch = initial_epoch
        cb_params.batch_num = sink_size if sink_mode else source.size()
        cb_params.mode = "train"
        cb_params.loss_fn = self._loss_fn
        cb_params.optimizer = self._optimizer
        cb_params.parallel_mode = get_auto_parallel_context("parallel_mode")
        cb_params.device_number = (1 if cb_params.parallel_mode == ParallelMode.STAND_ALONE
                                   else get_auto_parallel_context("device_num"))
        cb_params.train_dataset = source.data
        cb_params.list_callback = _callback_list(callbacks)
        cb_params.train_dataset_element = None
        cb_params.network = self._network
        cb_params.net_outputs = None
        cb_params.last_save_ckpt_step = None
        cb_params.latest_ckpt_file = None
        if valid is not None:
            valid = valid + (self._eval_callbacks(cb_params.list_callback),)
        try:
            with CallbackManager(cb_params.list_callback) as list_callback:
                if sink_mode:
                    train_sink(self, epoch, source, list_callback, cb_params, sink_size,
                               initial_epoch, valid)
                else:
                    train_plain(self, epoch, source, list_callback, cb_params, initial_epoch,
                                valid)
        except BaseException:
            for cb in cb_params.list_callback:
                if isinstance(cb, ModelCheckpoint):
                    cb.save_breakpoint(cb_params)
            raise
        finally:
            source.close()
            if valid is not None:
                valid[0].close()

    @staticmethod
    def _eval_callbacks(callbacks):
        return [cb for cb in callbacks
                if type(cb).__name__ not in INTERNAL_CALLBACKS or type(cb).__name__ ==
                "TimeMonitor"]

    def _eval_in_fit(self, valid, cb_params):
        return eval_during_train(self, valid, cb_params)

    def eval(self, valid_dataset, callbacks=None, dataset_sink_mode=False):
        """Runs the eval network over valid_dataset and returns {metric name: value}."""
        _check_bool(dataset_sink_mode, "dataset_sink_mode")
        if not self._metric_fns:
            raise ValueError("For Model.eval, the model argument 'metrics' can not be None or "
                             "empty, you should set the argument 'metrics' for model.")
        if isinstance(self._eval_network, GraphCell) and dataset_sink_mode:
            raise ValueError("Sink mode is currently not supported when evaluating with a "
                             "GraphCell.")
        self._check_callback_methods(callbacks, "eval")
        source = DataSource(valid_dataset, "eval")
        cb_params = InternalCallbackParam()
        cb_params.eval_network = self._eval_network
        cb_params.valid_dataset = source.data
        cb_params.batch_num = source.size()
        cb_params.mode = "eval"
        cb_params.cur_step_num = 0
        cb_params.list_callback = _callback_list(callbacks)
        cb_params.network = self._network
        try:
            with CallbackManager(cb_params.list_callback) as list_callback:
                return run_eval(self, source, list_callback, cb_params, dataset_sink_mode)
        finally:
            source.close()

    def predict(self, *predict_data):
        """The network's output for the inputs (Tensors, or Python numbers/strings/None)."""
        for item in predict_data:
            _check_predict_input(item)
        network = self._set_mode(self._predict_network, False)
        return network(*predict_data)

    def build(self, train_dataset=None, valid_dataset=None, sink_size=-1, epoch=1):
        """Compiles the training graph (and the evaluation graph) for the first batch of the
        datasets without running them, so train()/eval() only run graphs. GRAPH_MODE only."""
        if context.get_context("mode") != context.GRAPH_MODE:
            raise RuntimeError("Pre-build process only supports GRAPH_MODE.")
        if not train_dataset and not valid_dataset:
            raise ValueError("The argument 'train_dataset' and 'valid_dataset' can not both be "
                             "None or empty.")
        from kiln.train._loops import compile_only  # noqa: PLC0415
        if train_dataset:
            _check_int(sink_size, "sink_size")
            compile_only(self._set_mode(self._train_network, True),
                         _first_batch(train_dataset))
        if valid_dataset:
            if not self._metric_fns:
                raise RuntimeError("If define `valid_dataset`, metric fn can not be None or "
                                   "empty, you should set the argument 'metrics' for model.")
            compile_only(self._set_mode(self._eval_network, False),
                         _first_batch(valid_dataset))
            self._set_mode(self._train_network, True)


def _first_batch(dataset):
    source = DataSource(dataset, "build")
    try:
        return next(source.epoch())
    finally:
        source.close()


def _check_predict_input(item):
    if isinstance(item, (list, tuple)):
        for sub in item:
            _check_predict_input(sub)
    elif not (item is None or isinstance(item, (Tensor, int, float, str))):
        raise TypeError(f"For 'Model.predict', the type of each input must be Tensor, int, "
                        f"float, str, None or a tuple/list of them, but got "
                        f"{type(item).__name__}.")
