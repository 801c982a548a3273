"""Data-parallel training and the collectives on 2 ranks: each test starts
``mpirun -n 2 python tests/python/dist_workers/<script>`` (OpenMPI, installed by
scripts/bootstrap.sh; a missing mpirun fails these tests, never skips them) and checks what
the ranks report. docs/distributed.md."""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import pytest

WORKERS = pathlib.Path(__file__).resolve().parent / "dist_workers"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _env(**extra):
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
    env.update(extra)
    return env


def _mpirun():
    path = shutil.which("mpirun")
    if path is None:
        pytest.fail("mpirun is missing: install OpenMPI (scripts/bootstrap.sh does)")
    return path


def mpirun(script, *args, timeout=240, **env):
    """Runs `script` on 2 ranks; returns (exit status, output, seconds)."""
    cmd = [_mpirun(), "-n", "2", "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [sys.executable, str(WORKERS / script), *args]
    return _run(cmd, timeout, _env(**env))


def _run(cmd, timeout, env):
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=str(ROOT))
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


def test_collectives_values_and_gradients_on_two_ranks():
    rc, out, _ = mpirun("collectives.py")
    assert rc == 0, out
    assert out.count("COLLECTIVES-OK") == 2, out


def test_two_ranks_on_half_batches_equal_one_process_on_full_batches():
    rc, out, _ = mpirun("dp_train.py", timeout=400)
    assert rc == 0, out
    for network in ("seed", "lenet"):
        for mode in ("pynative", "graph"):
            for path in ("cell", "model"):
                for rank in (0, 1):
                    assert f"DP-OK rank {rank} {network} {mode} {path}" in out, out


def test_a_rank_that_dies_fails_the_job():
    rc, out, seconds = mpirun("faults.py", "die", timeout=120, KILN_COMM_TIMEOUT="20")
    assert rc != 0, out
    assert "rank 0 left AllReduce" not in out
    assert seconds < 60, (seconds, out)


def test_a_rank_that_hangs_fails_the_others_after_the_timeout():
    rc, out, seconds = mpirun("faults.py", "hang", "60", timeout=120, KILN_COMM_TIMEOUT="3")
    assert rc != 0, out
    assert "rank 0 waited" in out and "KILN_COMM_TIMEOUT" in out, out
    assert "rank 0 left AllReduce" not in out
    assert seconds < 45, (seconds, out)


def test_overlapped_buckets_give_the_same_training_on_two_ranks():
    rc, out, _ = mpirun("overlap.py", timeout=400)
    assert rc == 0, out
    for mode in ("pynative", "graph"):
        for rank in (0, 1):
            assert f"OVERLAP-OK rank {rank} {mode}" in out, out


def test_a_blocked_eager_collective_lets_python_threads_run():
    rc, out, _ = mpirun("gil.py")
    assert rc == 0, out
    assert out.count("GIL-OK") == 2, out


def test_a_rank_that_dies_fails_an_overlapped_all_reduce():
    rc, out, seconds = mpirun("faults.py", "die-async", timeout=120, KILN_COMM_TIMEOUT="20")
    assert rc != 0, out
    assert "rank 0 left AllReduce" not in out
    assert seconds < 60, (seconds, out)


def test_a_rank_that_hangs_fails_an_overlapped_all_reduce_after_the_timeout():
    rc, out, seconds = mpirun("faults.py", "hang-async", "60", timeout=120,
                              KILN_COMM_TIMEOUT="3")
    assert rc != 0, out
    assert "rank 0 waited" in out and "KILN_COMM_TIMEOUT" in out, out
    assert "rank 0 left AllReduce" not in out
    assert seconds < 45, (seconds, out)


def test_datasets_are_not_sharded_unless_asked_as_in_mindspore():
    rc, out, _ = mpirun("shards.py")
    assert rc == 0, out
    assert out.count("SHARDS-OK") == 2, out


def test_a_rank_that_hangs_while_the_others_exit_fails_the_job():
    rc, out, seconds = mpirun("faults.py", "hang-at-exit", "60", timeout=120,
                              KILN_COMM_TIMEOUT="3")
    assert rc != 0, out
    assert "rank 0 finishes" in out and "release: rank 0 waited" in out, out
    assert seconds < 45, (seconds, out)


def _hello_ok(rc, out):
    assert rc == 0, out
    # mpirun forwards the ranks' lines as they come: two may share a line of the output
    found = sorted(re.findall(r"HELLO rank=(\d+) size=(\d+) local=(\d+) threads=(\d+) "
                              r"total=(\d+)", out))
    threads = str(max(1, len(os.sched_getaffinity(0)) // 2))
    assert found == [("0", "2", "0", threads, "1"), ("1", "2", "1", threads, "1")], out


def test_python_m_kiln_run_starts_the_ranks():
    _mpirun()
    cmd = [sys.executable, "-m", "kiln.run", "--nproc", "2", str(WORKERS / "hello.py")]
    _hello_ok(*_run(cmd, 240, _env())[:2])


def test_msrun_starts_the_ranks():
    _mpirun()
    cmd = [sys.executable, "-c", "import sys; from kiln.run import msrun_main; "
           "sys.argv[0] = 'msrun'; msrun_main()", "--worker_num=2", "--local_worker_num=2",
           str(WORKERS / "hello.py")]
    _hello_ok(*_run(cmd, 240, _env())[:2])


def test_msrun_is_installed_with_kiln():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'msrun = "kiln.run:msrun_main"' in text
    installed = shutil.which("msrun", path=os.path.dirname(sys.executable))
    if installed is not None:  # an installed kiln (make build): the command itself runs
        _hello_ok(*_run([installed, "--worker_num=2", "--local_worker_num=2",
                         str(WORKERS / "hello.py")], 240, _env())[:2])


def _msrun(*args):
    return [sys.executable, "-c", "import sys; from kiln.run import msrun_main; "
            "sys.argv[0] = 'msrun'; msrun_main()", *args]


@pytest.mark.parametrize("args,words", [
    (["--worker_num=2", "--local_worker_num=4"], "more than --worker_num"),
    (["--worker_num=0", "--local_worker_num=0"], "must be positive"),
    (["--worker_num=2", "--local_worker_num=2", "--node_rank=1"], "node 0 only"),
    (["--worker_num=4", "--local_worker_num=2"], "needs --node_rank"),
    (["--worker_num=4", "--local_worker_num=2", "--node_rank=0", "--master_port=0"],
     "TCP port"),
])
def test_msrun_argument_errors(args, words):
    rc, out, _ = _run(_msrun(*args, "x.py"), 60, _env())
    assert rc == 2 and words in out, out


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_msrun_per_node_form_starts_one_job_from_node_0():
    """Two "nodes" on this machine, one msrun each, as MindSpore's multi-node launch: node 1
    reports to node 0 at --master_addr:--master_port, node 0 runs one mpirun for both."""
    _mpirun()
    common = ["--worker_num=2", "--local_worker_num=1", "--master_addr=127.0.0.1",
              f"--master_port={_free_port()}"]
    hello = str(WORKERS / "hello.py")
    env = _env()
    node1 = subprocess.Popen(_msrun(*common, "--node_rank=1", hello), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=env, cwd=str(ROOT))
    rc0, out0, _ = _run(_msrun(*common, "--node_rank=0", hello), 240, env)
    out1 = node1.communicate(timeout=60)[0]
    assert rc0 == 0 and node1.returncode == 0, (out0, out1)
    assert "localhost slots=2" in out0 and "node 1 reported 1 ranks" in out1, (out0, out1)
    _hello_ok(rc0, out0)


def test_msrun_node_0_fails_when_the_other_nodes_never_report():
    cmd = _msrun("--worker_num=2", "--local_worker_num=1", "--node_rank=0",
                 f"--master_port={_free_port()}", "--cluster_time_out=2", "x.py")
    rc, out, seconds = _run(cmd, 60, _env())
    assert rc != 0 and "1 of 2 ranks reported" in out, out


def test_sync_batch_norm_on_two_ranks_equals_batch_norm_on_the_whole_batch():
    rc, out, _ = mpirun("sync_batch_norm.py")
    assert rc == 0, out
    assert out.count("SYNC-BN-OK") == 2, out
