"""kiln.dataset's engine seen from Python: order, epochs, workers, seeds, errors and shutdown."""
import gc
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import kiln as ms
import kiln.dataset as ds
from kiln import _C


@pytest.fixture(autouse=True)
def _dataset_config():
    seed, workers, prefetch = (ds.config._state["seed"], ds.config.get_num_parallel_workers(),
                               ds.config.get_prefetch_size())
    yield
    ds.config._state["seed"] = seed
    ds.config.set_num_parallel_workers(workers)
    ds.config.set_prefetch_size(prefetch)


def _rows(dataset, **kw):
    return [[np.asarray(c).tolist() for c in row]
            for row in dataset.create_tuple_iterator(output_numpy=True, num_epochs=1, **kw)]


def _pipeline_threads():
    """The process's OS threads (the pipeline's are C++ threads, invisible to threading)."""
    return len(os.listdir("/proc/self/task"))


def test_for_loop_yields_kiln_tensors_and_numpy_on_request():
    data = ds.NumpySlicesDataset({"x": np.arange(6, dtype=np.float32).reshape(3, 2),
                                  "y": np.array([0, 1, 2])}, shuffle=False)
    rows = list(data)
    assert len(rows) == 3 and all(isinstance(c, ms.Tensor) for c in rows[0])
    np.testing.assert_array_equal(rows[1][0].asnumpy(), [2.0, 3.0])
    assert rows[2][1].asnumpy() == 2
    numpy_rows = list(data.create_tuple_iterator(output_numpy=True))
    assert isinstance(numpy_rows[0][0], np.ndarray)
    dicts = list(data.create_dict_iterator(num_epochs=1))
    assert set(dicts[0]) == {"x", "y"} and isinstance(dicts[0]["x"], ms.Tensor)


def test_an_iterator_runs_num_epochs_and_is_reused_across_them():
    data = ds.GeneratorDataset(lambda: iter([(np.array(i),) for i in range(4)]), ["v"])
    it = data.create_tuple_iterator(num_epochs=3, output_numpy=True)
    epochs = [[int(r[0]) for r in it] for _ in range(4)]
    assert epochs == [[0, 1, 2, 3]] * 3 + [[]]


def test_map_with_many_workers_keeps_the_order():
    def slow_square(x):
        time.sleep(0.001 * (int(x) % 3))
        return x * x

    data = ds.NumpySlicesDataset(np.arange(40), ["x"], shuffle=False)
    out = _rows(data.map(slow_square, num_parallel_workers=6))
    assert out == [[i * i] for i in range(40)]


def _augmented(workers):
    ds.config.set_seed(1234)
    data = ds.NumpySlicesDataset(np.arange(30, dtype=np.float32), ["x"], shuffle=True,
                                 num_parallel_workers=workers)
    data = data.map(ds.transforms.RandomApply([lambda v: v + 1000], prob=0.5),
                    num_parallel_workers=workers)
    return _rows(data.shuffle(8).batch(4))


def test_results_under_a_seed_do_not_depend_on_the_worker_count():
    one, four, again = _augmented(1), _augmented(4), _augmented(4)
    assert one == four == again
    flat = sorted(v % 1000 for batch in one for v in batch[0])
    assert flat == list(range(30))  # a permutation, some values shifted by the random op
    assert any(v >= 1000 for batch in one for v in batch[0])


def test_unseeded_pipelines_differ():
    ds.config._state["seed"] = None
    data = ds.NumpySlicesDataset(np.arange(50), ["x"], shuffle=True)
    assert _rows(data) != _rows(data)


def test_each_epoch_has_its_own_shuffle():
    ds.config.set_seed(3)
    data = ds.NumpySlicesDataset(np.arange(20), ["x"])
    it = data.create_tuple_iterator(num_epochs=2, output_numpy=True)
    first, second = [int(r[0]) for r in it], [int(r[0]) for r in it]
    assert sorted(first) == sorted(second) == list(range(20)) and first != second


def test_break_stops_the_pipeline_and_its_threads():
    before = _pipeline_threads()
    data = ds.GeneratorDataset(lambda: ((np.array(i),) for i in range(10**9)), ["x"])
    data = data.map(lambda x: x + 1, num_parallel_workers=4)
    for i, _ in enumerate(data.create_tuple_iterator(output_numpy=True)):
        if i == 5:
            break
        assert _pipeline_threads() >= before + 6  # source, dispatcher, 4 workers, collector
    gc.collect()
    assert _pipeline_threads() == before


def test_stop_joins_threads_blocked_on_full_queues():
    pipe = _C.DatasetPipeline(2)
    src = pipe.add_source("endless", lambda epoch: iter(lambda: (np.zeros(3),), None), -1)
    root = pipe.add_map("id", src, lambda row, epoch, index: row, 3)
    pipe.start(root)
    assert pipe.next()[0] == 0
    time.sleep(0.05)
    start = time.perf_counter()
    pipe.stop()
    assert time.perf_counter() - start < 5
    assert pipe.next()[0] == 2  # after stop: the end


def test_a_generator_raising_mid_epoch_names_the_row():
    def gen():
        for i in range(10):
            if i == 6:
                raise ValueError("corrupt record")
            yield (np.array(i),)

    it = ds.GeneratorDataset(gen, ["x"]).create_tuple_iterator(output_numpy=True)
    got = []
    with pytest.raises(RuntimeError, match=r"GeneratorDataset row 6 of epoch 0: ValueError: "
                                           r"corrupt record") as info:
        for row in it:
            got.append(int(row[0]))
    assert got == list(range(6))
    assert isinstance(info.value.__cause__, ValueError)  # MindSpore raises RuntimeError too


def test_a_failing_map_names_the_op_and_the_row():
    def explode(x):
        if int(x) == 3:
            raise KeyError("bad key")
        return x

    data = ds.NumpySlicesDataset(np.arange(8), ["x"], shuffle=False).map(
        [lambda x: x, explode], num_parallel_workers=3)
    with pytest.raises(RuntimeError,
                       match=r"map\(<lambda>, explode\) row 3 of epoch 0, in explode: KeyError"):
        _rows(data)


def test_a_random_access_source_error_names_the_index():
    class Source:
        def __len__(self):
            return 5

        def __getitem__(self, i):
            if i == 2:
                raise IndexError("no such record")
            return (np.array(i),)

    data = ds.GeneratorDataset(Source(), ["x"], shuffle=False, num_parallel_workers=2)
    with pytest.raises(RuntimeError, match="reading index 2: IndexError: 'no such record'|"
                                           "reading index 2: IndexError: no such record"):
        _rows(data)


def test_a_user_exception_class_is_kept_as_the_cause():
    class Broken(Exception):
        pass

    def fail(x):
        raise Broken("nope")

    data = ds.NumpySlicesDataset(np.arange(3), ["x"]).map(fail)
    with pytest.raises(RuntimeError, match="Broken: nope") as info:
        _rows(data)
    assert isinstance(info.value.__cause__, Broken)


def test_iterating_while_kiln_ops_hold_the_gil_does_not_deadlock():
    """The training loop runs kiln ops (holding the GIL) between rows while workers need the
    GIL for Python transforms; the reader waits without it."""
    data = ds.NumpySlicesDataset(np.random.rand(64, 8).astype(np.float32), ["x"],
                                 shuffle=False).map(lambda x: x * 2, num_parallel_workers=4)
    w = ms.Tensor(np.ones((8, 8), np.float32))
    total = 0.0
    for (x,) in data.batch(8).create_tuple_iterator(num_epochs=1):
        total += float(ms.ops.matmul(x, w).sum().asnumpy())
        time.sleep(0.001)
    assert total > 0


def test_kiln_ops_inside_a_map_function():
    data = ds.NumpySlicesDataset(np.arange(12, dtype=np.float32), ["x"], shuffle=False)
    data = data.map(lambda x: (ms.Tensor(x) * 3).asnumpy(), num_parallel_workers=3)
    assert _rows(data) == [[3.0 * i] for i in range(12)]


def test_interpreter_exit_with_a_running_pipeline_is_clean():
    code = (
        "import numpy as np, kiln.dataset as ds\n"
        "d = ds.GeneratorDataset(lambda: ((np.zeros(4),) for _ in iter(int, 1)), ['x'])\n"
        "d = d.map(lambda x: x + 1, num_parallel_workers=3)\n"
        "it = d.create_tuple_iterator(output_numpy=True)\n"
        "next(it); next(it)\n"
        "print('done')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"


def test_config_setters_check_their_arguments():
    with pytest.raises(ValueError):
        ds.config.set_num_parallel_workers(0)
    with pytest.raises(TypeError):
        ds.config.set_prefetch_size(1.5)
    with pytest.raises(ValueError):
        ds.config.set_seed(-1)
    ds.config.set_seed(7)
    assert ds.config.get_seed() == 7
    ds.config.set_prefetch_size(3)
    assert ds.config.get_prefetch_size() == 3
    assert _rows(ds.NumpySlicesDataset(np.arange(10), ["x"], shuffle=False)) == [
        [i] for i in range(10)]


def test_num_epochs_is_checked():
    data = ds.NumpySlicesDataset(np.arange(3), ["x"])
    with pytest.raises(ValueError):
        data.create_tuple_iterator(num_epochs=0)


def test_ctrl_c_while_waiting_for_a_row_interrupts_and_exits_cleanly():
    code = (  # Python's Ctrl-C handler even if this runner was started with SIGINT ignored
        "import signal, time, numpy as np, kiln.dataset as ds\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "def slow():\n"
        "    while True:\n"
        "        time.sleep(0.2)\n"
        "        yield (np.zeros(2),)\n"
        "it = ds.GeneratorDataset(slow, ['x']).create_tuple_iterator(output_numpy=True)\n"
        "next(it)\n"
        "print('ready', flush=True)\n"
        "try:\n"
        "    for _ in it:\n"
        "        pass\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 0, err
    assert out.strip() == "interrupted"


def test_dropping_the_iterator_inside_its_own_map_function():
    """The last reference goes in a worker thread: the pipeline stops from one of its own
    threads, which must not try to join itself."""
    holder, assigned, dropped = {}, threading.Event(), threading.Event()

    def f(x):
        if int(x) == 0 and not dropped.is_set():
            assigned.wait(10)
            del holder["it"]
            dropped.set()
        return x

    data = ds.NumpySlicesDataset(np.arange(50), ["x"], shuffle=False).map(f,
                                                                         num_parallel_workers=1)
    holder["it"] = data.create_tuple_iterator(output_numpy=True)
    assigned.set()
    assert dropped.wait(10)
    time.sleep(0.1)
    assert _rows(data)[:3] == [[0], [1], [2]]  # the process and the engine carry on


def test_many_iterators_leave_no_threads_behind():
    """Pipelines made and dropped in a loop (early breaks, finished epochs, errors): the
    process ends with the threads it started with."""
    gc.collect()
    before = _pipeline_threads()
    data = ds.NumpySlicesDataset(np.arange(64), ["x"]).map(lambda x: x + 1,
                                                          num_parallel_workers=3).batch(8)

    def boom(x):
        if int(x) == 9:
            raise ValueError("nine")
        return x

    failing = ds.NumpySlicesDataset(np.arange(64), ["x"]).map(boom, num_parallel_workers=2)
    for i in range(30):
        for j, _ in enumerate(data.create_tuple_iterator(num_epochs=2)):
            if j == i % 5:
                break
        assert len(list(data)) == 8
        with pytest.raises(RuntimeError):
            list(failing)
    gc.collect()
    assert _pipeline_threads() == before


def test_sync_wait_paces_the_pipeline():
    seen = []
    data = ds.NumpySlicesDataset(np.arange(6), ["x"], shuffle=False)
    data = data.sync_wait("step", num_batch=2, callback=seen.append).map(lambda x: x * 10)
    it = data.create_tuple_iterator(output_numpy=True, num_epochs=1)
    got = [int(next(it)[0]), int(next(it)[0])]
    time.sleep(0.2)
    assert it._pipe is not None and seen == []  # two rows passed; the third waits
    data.sync_update("step", data={"step": 1})
    got += [int(next(it)[0]), int(next(it)[0])]
    data.sync_update("step", num_batch=5, data={"step": 2})
    got += [int(r[0]) for r in it]
    assert got == [0, 10, 20, 30, 40, 50] and seen == [{"step": 1}, {"step": 2}]
    with pytest.raises(ValueError, match="no sync_wait named 'other'"):
        data.sync_update("other")


def test_a_pipeline_waiting_at_a_sync_point_stops():
    data = ds.NumpySlicesDataset(np.arange(6), ["x"]).sync_wait("never")
    it = data.create_tuple_iterator(output_numpy=True)
    next(it)
    start = time.perf_counter()
    it.stop()  # the sync stage is blocked: stop must wake it
    assert time.perf_counter() - start < 5
