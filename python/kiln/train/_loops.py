"""Model's loops: training without and with dataset sink mode, evaluation, and the compiled
sink loop (sink_size training steps as one graph)."""
import numpy as np

from kiln import context
from kiln.jit.api import cell_jit_function
from kiln.nn.cell import Cell
from kiln.train._queue_sink import QueueSink
from kiln.train.callback._callback import CallbackManager, RunContext
from kiln.train.callback._monitors import loss_value

__all__ = ["SinkLoop", "train_plain", "train_sink", "run_eval", "eval_during_train",
           "compile_only"]


class SinkLoop(Cell):
    """``count + 1`` training steps as one graph: step 0, then a graph loop (``range`` over
    the 0-d tensor `count`) over steps 1..count, each on slice i of every stacked column.
    Returns the last step's outputs (what MindSpore reports as a sink's net_outputs). The
    optimizer's in-place updates inside the loop are seen by the next iteration."""

    def __init__(self, network):
        super().__init__(auto_prefix=False)
        self.network = network

    def construct(self, count, *columns):
        out = self.network(*[c[0] for c in columns])
        for i in range(count):
            out = self.network(*[c[i + 1] for c in columns])
        return out


def compile_only(network, batch):
    """Compiles network's construct for `batch` (cached, as a first call would) without running
    it."""
    cell_jit_function(network).compiled_for(network, tuple(batch), {})


def _check_element(model, batch):
    if model._loss_fn is not None and len(batch) != 2:
        raise ValueError(f"When 'loss_fn' is not None, 'train_dataset' should return two "
                         f"elements, but got {len(batch)}, please check the number of elements "
                         f"returned by 'train_dataset'")


def _begin_epoch(model, list_callback, run_context, cb_params, index, initial_epoch):
    cb_params.cur_epoch_num = index + 1 + initial_epoch
    model._current_epoch_num = cb_params.cur_epoch_num
    model._current_step_num = 0
    list_callback.on_train_epoch_begin(run_context)


def _end_epoch(model, list_callback, run_context, cb_params, valid):
    if valid is not None:
        eval_during_train(model, valid, cb_params)
    list_callback.on_train_epoch_end(run_context)
    cb_params.pop("metrics", None)
    cb_params.pop("eval_results", None)
    return run_context.get_stop_requested()


def _one_step(model, network, batch, list_callback, run_context, cb_params, advance):
    cb_params.cur_step_num += advance
    model._current_step_num = (cb_params.cur_step_num - 1) % cb_params.batch_num + 1
    cb_params.train_dataset_element = batch
    list_callback.on_train_step_begin(run_context)
    model._set_mode(model._train_network, True)
    outputs = network(*batch)
    cb_params.net_outputs = outputs
    _update_loss_scale(model, outputs)
    list_callback.on_train_step_end(run_context)


def _update_loss_scale(model, outputs):
    manager = model._loss_scale_manager
    if manager is None or not hasattr(manager, "get_drop_overflow_update"):
        return
    if manager.get_drop_overflow_update() and isinstance(outputs, tuple) and len(outputs) > 1:
        manager.update_loss_scale(bool(np.all(outputs[1].asnumpy())))


def train_plain(model, epoch, source, list_callback, cb_params, initial_epoch, valid):
    """Each batch is one call of the train network (compiled once in GRAPH_MODE)."""
    cb_params.cur_step_num = 0
    cb_params.dataset_sink_mode = False
    run_context = RunContext(cb_params)
    list_callback.on_train_begin(run_context)
    for i in range(epoch - initial_epoch):
        _begin_epoch(model, list_callback, run_context, cb_params, i, initial_epoch)
        for batch in source.epoch():
            _check_element(model, batch)
            _one_step(model, model._train_network, batch, list_callback, run_context, cb_params,
                      1)
            if run_context.get_stop_requested():
                break
        if _end_epoch(model, list_callback, run_context, cb_params, valid):
            break
    list_callback.on_train_end(run_context)


def train_sink(model, epoch, source, list_callback, cb_params, sink_size, initial_epoch, valid):
    """Dataset sink mode: an epoch is `sink_size` steps, read on from where the last one
    stopped. In GRAPH_MODE the sink runs as one compiled loop whose steps pop their batches
    from a dataset queue a feeder thread fills (_queue_sink.py; a few loop calls when batches
    change shape); callbacks see one step per sink, cur_step_num advancing by sink_size. In
    PyNative every step is reported (as MindSpore's PyNative sink does)."""
    cb_params.cur_step_num = 0
    cb_params.dataset_sink_mode = True
    run_context = RunContext(cb_params)
    list_callback.on_train_begin(run_context)
    graph = context.get_context("mode") == context.GRAPH_MODE
    sink = QueueSink(model._train_network, source,
                     lambda columns: _check_element(model, columns)) if graph else None
    batches = None if graph else source.endless()
    try:
        for i in range(epoch - initial_epoch):
            _begin_epoch(model, list_callback, run_context, cb_params, i, initial_epoch)
            if graph:
                _one_step(model, lambda: sink.run(sink_size), (), list_callback, run_context,
                          cb_params, sink_size)
            else:
                for _ in range(sink_size):
                    batch = next(batches)
                    _check_element(model, batch)
                    _one_step(model, model._train_network, batch, list_callback, run_context,
                              cb_params, 1)
                    if run_context.get_stop_requested():
                        break
            if _end_epoch(model, list_callback, run_context, cb_params, valid):
                break
    finally:
        if sink is not None:
            sink.close()
    list_callback.on_train_end(run_context)


def run_eval(model, source, list_callback, cb_params, sink_mode, add_eval_loss=False):
    """One pass of the eval network over `source`, updating the metrics; returns them. (Sink
    mode evaluates step by step too: MindSpore's evaluation sink is one step per call.)"""
    run_context = RunContext(cb_params)
    cb_params.dataset_sink_mode = sink_mode
    model._clear_metrics()
    losses = []
    list_callback.on_eval_begin(run_context)
    list_callback.on_eval_epoch_begin(run_context)
    network = model._set_mode(model._eval_network, False)
    for batch in source.epoch():
        cb_params.cur_step_num += 1
        cb_params.eval_dataset_element = batch
        list_callback.on_eval_step_begin(run_context)
        outputs = network(*batch)
        cb_params.net_outputs = outputs
        list_callback.on_eval_step_end(run_context)
        model._update_metrics(outputs)
        if add_eval_loss:
            losses.append(loss_value(outputs[model._eval_indexes[0]]
                                     if model._eval_indexes else outputs))
        if run_context.get_stop_requested():
            break
    list_callback.on_eval_epoch_end(run_context)
    metrics = model._get_metrics()
    cb_params.metrics = metrics
    if add_eval_loss:
        cb_params.eval_results = dict(metrics)
        # MindSpore's Loss metric: the mean of the batches' losses.
        cb_params.eval_results["eval_loss"] = float(np.mean(losses)) if losses else 0.0
    list_callback.on_eval_end(run_context)
    model._set_mode(model._train_network, True)
    return metrics


def _should_eval(epoch, frequency):
    return epoch % frequency == 0 if isinstance(frequency, int) else epoch in frequency


def eval_during_train(model, valid, cb_params):
    """fit's evaluation after an epoch: cb_params switches to "eval" for the evaluation and back
    (its step count, batch_num, sink mode and outputs restored) afterwards."""
    source, frequency, sink_mode, callbacks = valid
    if not _should_eval(cb_params.cur_epoch_num, frequency):
        return
    saved = {k: cb_params[k] for k in ("cur_step_num", "batch_num", "dataset_sink_mode",
                                       "net_outputs")}
    cb_params.eval_network = model._eval_network
    cb_params.valid_dataset = source.data
    cb_params.batch_num = source.size()
    cb_params.mode = "eval"
    cb_params.cur_step_num = 0
    with CallbackManager(callbacks) as list_callback:
        run_eval(model, source, list_callback, cb_params, sink_mode, add_eval_loss=True)
    cb_params.mode = "train"
    cb_params.update(saved)
