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


def test_msrun_refuses_several_machines():
    cmd = [sys.executable, "-c", "from kiln.run import msrun_main; msrun_main()",
           "--worker_num=4", "--local_worker_num=2", "x.py"]
    rc, out, _ = _run(cmd, 60, _env())
    assert rc != 0 and "--hostfile" in out, out


def test_sync_batch_norm_on_two_ranks_equals_batch_norm_on_the_whole_batch():
    rc, out, _ = mpirun("sync_batch_norm.py")
    assert rc == 0, out
    assert out.count("SYNC-BN-OK") == 2, out
