"""Dataset sink mode's queue: the get_next op (MindSpore's GetNext) popping batches inside a
compiled loop, its errors, and Model.train's sink fed through it equal to plain training."""
import _thread
import signal
import threading
import time

import numpy as np
import pytest

import kiln as ms
import kiln.dataset as ds
from kiln import _C, Tensor, nn
from kiln.ops._core import call
from kiln.train import Model
from kiln.train._queue_sink import get_next


def _attrs(qid, shape=(2, 3), dtype=ms.float32):
    return (qid, (dtype._enum.value,), (len(shape),), tuple(shape))


@pytest.fixture
def queue():
    qid = _C.feed_queue_create(8)
    yield qid
    _C.feed_queue_destroy(qid)


def _push(qid, *values):
    for v in values:
        assert _C.feed_queue_push(qid, [Tensor(np.full((2, 3), v, np.float32))])


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_get_next_pops_one_batch_per_loop_iteration(queue, mode):
    _push(queue, 1.0, 2.0, 3.0, 4.0)
    attrs = _attrs(queue)

    def pops(count):
        total = get_next(attrs)[0]
        for _ in range(count):
            total = total + get_next(attrs)[0]
        return total

    fn = ms.jit(pops) if mode == "graph" else pops
    out = fn(Tensor(np.array(2, np.int32)))
    np.testing.assert_array_equal(out.asnumpy(), np.full((2, 3), 6.0))  # 1 + 2 + 3
    assert _C.feed_queue_pops(queue) == 3
    out = fn(Tensor(np.array(0, np.int32)))
    np.testing.assert_array_equal(out.asnumpy(), np.full((2, 3), 4.0))


def test_get_next_stays_inside_the_compiled_loop(queue, tmp_path):
    """Not hoisted out of the loop (it reads the same attributes every iteration), not merged
    with its twin and not removed when its value is unused."""
    _push(queue, *range(6))
    attrs = _attrs(queue)

    def f(count):
        get_next(attrs)  # unused: still pops
        x = get_next(attrs)[0]
        for _ in range(count):
            x = get_next(attrs)[0]
        return x

    ms.set_context(save_graphs=True, save_graphs_path=str(tmp_path))
    try:
        out = ms.jit(f)(Tensor(np.array(3, np.int32)))
    finally:
        ms.set_context(save_graphs=False)
    np.testing.assert_array_equal(out.asnumpy(), np.full((2, 3), 4.0))  # 0, 1 popped first
    assert _C.feed_queue_pops(queue) == 5
    (text,) = [p.read_text() for p in sorted(tmp_path.glob("*_optimized.ir"))]
    assert text.count("get_next(") == 3, text


def test_get_next_refuses_a_batch_of_another_shape_and_leaves_it_queued(queue):
    assert _C.feed_queue_push(queue, [Tensor(np.ones((5, 3), np.float32))])
    with pytest.raises(ValueError, match=r"get_next: the next batch is \[float32 \(5, 3\)\] but "
                                         r"this loop was compiled for \[float32 \(2, 3\)\]"):
        call("get_next", (), _attrs(queue))
    assert _C.feed_queue_pops(queue) == 0
    assert tuple(call("get_next", (), _attrs(queue, (5, 3))).shape) == (5, 3)


def test_end_of_data_and_producer_errors_are_clear(queue):
    _push(queue, 1.0)
    _C.feed_queue_close(queue, "")
    call("get_next", (), _attrs(queue))  # what was queued before the end is still read
    with pytest.raises(RuntimeError, match="get_next: the dataset has no more batches"):
        call("get_next", (), _attrs(queue))
    other = _C.feed_queue_create(2)
    _C.feed_queue_close(other, "reading the dataset failed: OSError: disk")
    with pytest.raises(RuntimeError, match="get_next: reading the dataset failed: OSError"):
        call("get_next", (), _attrs(other))
    _C.feed_queue_destroy(other)
    with pytest.raises(RuntimeError, match="does not exist"):
        call("get_next", (), _attrs(other))
    assert not _C.feed_queue_push(other, [Tensor(np.ones(1, np.float32))])


def test_a_waiting_get_next_wakes_when_the_queue_is_closed():
    qid = _C.feed_queue_create(2)
    errors = []

    def wait():
        try:
            ms.jit(lambda: get_next(_attrs(qid))[0])()
        except RuntimeError as e:
            errors.append(str(e))

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.2)
    _C.feed_queue_destroy(qid)
    t.join(timeout=5)
    assert not t.is_alive() and "training stopped" in errors[0]


def test_ctrl_c_interrupts_a_waiting_get_next(queue):
    # Python's own SIGINT handler, whatever this process inherited: a test run started in the
    # background inherits SIGINT ignored, and interrupt_main() then does nothing.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.2, _thread.interrupt_main)
    # should the interrupt never arrive, closing the queue ends the wait (and fails the test)
    failsafe = threading.Timer(10.0, _C.feed_queue_destroy, (queue,))
    timer.start()
    failsafe.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call("get_next", (), _attrs(queue))
    finally:
        failsafe.cancel()
        timer.join()
        signal.signal(signal.SIGINT, previous)


# ---- Model.train(dataset_sink_mode=True) through the queue ----

def _net(seed=1):
    ms.set_seed(seed)
    return nn.SequentialCell(nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 3))


def _model(net):
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    return Model(net, loss, nn.Momentum(net.trainable_params(), 0.1, 0.9))


def _data(n):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    return x, (x @ rng.normal(size=(8, 3)).astype(np.float32)).argmax(1).astype(np.int32)


def _params(net):
    return {p.name: p.asnumpy().copy() for p in net.get_parameters()}


def _sink_threads():
    return [t for t in threading.enumerate() if t.name == "kiln-sink-feeder"]


@pytest.mark.parametrize("kind", ["dataset", "list", "generator"])
def test_sink_training_equals_plain_training(kind):
    """kiln datasets and plain iterables (a list, a one-shot generator) in sinks of 3 over 4
    batches, the last one partial (its own loop): the same parameters as 9 plain steps."""
    x, y = _data(112)  # batches of 32, 32, 32, 16
    batches = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 112, 32)]
    if kind == "dataset":
        data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(32)
    elif kind == "list":
        data = batches
    else:
        data = (b for b in batches)
    ms.set_context(mode=ms.GRAPH_MODE)
    net_sink = _net()
    _model(net_sink).train(3, data, dataset_sink_mode=True, sink_size=3)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    net_plain = _net()
    _model(net_plain).train(1, (batches * 3)[:9])
    for name, value in _params(net_plain).items():
        np.testing.assert_allclose(_params(net_sink)[name], value, rtol=1e-5, atol=1e-6)
    assert not _sink_threads()


def test_a_failing_dataset_raises_its_error_and_stops_the_feeder():
    x, y = _data(64)

    def batches():
        yield x[:32], y[:32]
        raise OSError("the disk went away")

    class Broken:
        def __iter__(self):
            return batches()

    ms.set_context(mode=ms.GRAPH_MODE)
    with pytest.raises(OSError, match="the disk went away"):
        _model(_net()).train(2, Broken(), dataset_sink_mode=True, sink_size=4)
    assert not _sink_threads()


def test_a_dataset_of_three_columns_for_a_model_with_a_loss_is_refused():
    x, y = _data(64)
    ms.set_context(mode=ms.GRAPH_MODE)
    with pytest.raises(ValueError, match="should return two elements, but got 3"):
        _model(_net()).train(1, [(x, y, y)], dataset_sink_mode=True, sink_size=1)
    assert not _sink_threads()
