"""python_multiprocessing=True: map operations and random-access sources in worker processes
(fresh interpreters), with the thread mode's order, seeds, errors and shutdown."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import kiln.dataset as ds
from kiln.dataset import transforms


@pytest.fixture(autouse=True)
def _seeded():
    seed = ds.config._state["seed"]
    ds.config.set_seed(11)
    yield
    ds.config._state["seed"] = seed


def square_and_pid(x):
    return x * x, np.array(os.getpid())


def fail_at_five(x):
    if int(x) == 5:
        raise ValueError("five is not allowed")
    return x


def die_at_three(x):
    if int(x) == 3:
        os._exit(7)
    return x


class Squares:
    """A random-access source that pickles (module level)."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        return np.array(i * i), np.array(os.getpid())


def _rows(dataset):
    return [[np.asarray(c).tolist() for c in row]
            for row in dataset.create_tuple_iterator(output_numpy=True, num_epochs=1)]


def test_map_runs_in_worker_processes_in_order():
    data = ds.NumpySlicesDataset(np.arange(20), ["x"], shuffle=False).map(
        square_and_pid, output_columns=["sq", "pid"], num_parallel_workers=3,
        python_multiprocessing=True)
    rows = _rows(data)
    assert [r[0] for r in rows] == [i * i for i in range(20)]
    pids = {r[1] for r in rows}
    assert os.getpid() not in pids and 1 <= len(pids) <= 3


def test_results_match_the_thread_mode_under_a_seed():
    def run(multiprocessing):
        data = ds.NumpySlicesDataset(np.zeros(40, np.int64), ["x"], shuffle=False)
        data = data.map(transforms.RandomApply([transforms.Fill(1)], prob=0.5),
                        num_parallel_workers=2, python_multiprocessing=multiprocessing)
        return _rows(data)

    threads, processes = run(False), run(True)
    assert threads == processes and 5 < sum(r[0] for r in threads) < 35


def test_a_random_access_source_reads_in_processes():
    data = ds.GeneratorDataset(Squares(), ["sq", "pid"], shuffle=False, num_parallel_workers=2)
    rows = _rows(data)  # python_multiprocessing is True by default, as in MindSpore
    assert [r[0] for r in rows] == [i * i for i in range(12)]
    assert os.getpid() not in {r[1] for r in rows}


def test_an_error_in_a_worker_process_names_the_row_and_op():
    data = ds.NumpySlicesDataset(np.arange(10), ["x"], shuffle=False).map(
        fail_at_five, num_parallel_workers=2, python_multiprocessing=True)
    with pytest.raises(RuntimeError, match=r"map\(fail_at_five\) row 5 of epoch 0, in "
                                           r"fail_at_five: ValueError: five is not allowed"):
        _rows(data)


def test_a_worker_process_that_dies_fails_the_pipeline_without_a_hang():
    data = ds.NumpySlicesDataset(np.arange(10), ["x"], shuffle=False).map(
        die_at_three, num_parallel_workers=2, python_multiprocessing=True)
    with pytest.raises(RuntimeError, match=r"worker process \d+ ended \(exit code 7\)"):
        _rows(data)


def test_processes_end_with_the_iterator():
    data = ds.NumpySlicesDataset(np.arange(1000), ["x"], shuffle=False).map(
        square_and_pid, output_columns=["sq", "pid"], num_parallel_workers=2,
        python_multiprocessing=True)
    it = data.create_tuple_iterator(output_numpy=True)
    pids = [pid for pool in it._resources for pid in pool.pids()]
    assert len(pids) == 2
    for i, _ in enumerate(it):
        if i == 3:
            break
    it.stop()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_operations_that_do_not_pickle_run_on_threads():
    data = ds.NumpySlicesDataset(np.arange(6), ["x"], shuffle=False).map(
        lambda x: x + 1, num_parallel_workers=2, python_multiprocessing=True)
    assert _rows(data) == [[i + 1] for i in range(6)]


def test_a_script_without_a_main_guard():
    """A tutorial-style script: no `if __name__ == "__main__":`. Workers never re-run it; a
    function the script defines itself stays on threads (with a warning), one from a module
    goes to the processes; the script ends cleanly with its pipelines running."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = (
        "import os, sys, numpy as np\n"
        f"sys.path.insert(0, {here!r})\n"
        "import kiln.dataset as ds\n"
        "from test_dataset_multiprocess import square_and_pid\n"
        "def local_pid(x):\n"
        "    return np.array(os.getpid())\n"
        "d = ds.NumpySlicesDataset(np.arange(100000), ['x'], shuffle=False)\n"
        "a = d.map(square_and_pid, output_columns=['s', 'p'], num_parallel_workers=2,\n"
        "          python_multiprocessing=True).create_tuple_iterator(output_numpy=True)\n"
        "b = d.map(local_pid, num_parallel_workers=2,\n"
        "          python_multiprocessing=True).create_tuple_iterator(output_numpy=True)\n"
        "print(int(next(a)[1]) != os.getpid(), int(next(b)[0]) == os.getpid(), flush=True)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]
    assert "defined in the main script" in result.stderr


def sleepy(x):
    if int(x) >= 2:
        time.sleep(120)
    return x


def test_stop_ends_a_worker_stuck_in_user_code():
    data = ds.NumpySlicesDataset(np.arange(10), ["x"], shuffle=False).map(
        sleepy, num_parallel_workers=2, python_multiprocessing=True)
    it = data.create_tuple_iterator(output_numpy=True)
    assert int(next(it)[0]) == 0
    time.sleep(0.5)  # both workers are now inside sleepy
    start = time.perf_counter()
    it.stop()
    assert time.perf_counter() - start < 10


def test_stop_after_every_worker_died_does_not_wait_for_a_free_one():
    """Workers lost to crashes never return to the free list; threads that still want one
    must give up when the pipeline stops (a hang before)."""
    for _ in range(3):
        data = ds.NumpySlicesDataset(np.full(40, 3), ["x"], shuffle=False).map(
            die_at_three, num_parallel_workers=3, python_multiprocessing=True)
        start = time.perf_counter()
        with pytest.raises(RuntimeError, match="ended"):
            _rows(data)
        assert time.perf_counter() - start < 30
