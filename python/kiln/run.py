"""Launchers for data-parallel jobs, over OpenMPI's mpirun (docs/distributed.md):

    python -m kiln.run --nproc 2 train.py [args...]
    msrun --worker_num=2 --local_worker_num=2 train.py [args...]   (MindSpore's launcher form)
    msrun --worker_num=4 --local_worker_num=2 --master_addr=A --master_port=P --node_rank=K ...
        (MindSpore's per-node form: one per machine; kiln/_msrun.py maps it onto one mpirun)

Both build an mpirun command line and replace this process with it, so mpirun's exit status
(non-zero when any rank fails) is the launcher's. A plain ``mpirun -n 2 python train.py`` works
as well; these add what one machine needs: no core binding (each rank runs cores / ranks
threads, kiln.communication.init), --allow-run-as-root as root, --oversubscribe when there are
more ranks than cores, and the communication timeout passed to the ranks.
"""
import argparse
import os
import shutil
import sys

from kiln import _msrun

__all__ = ["mpirun_command", "main", "msrun_main"]

# Variables every rank needs, passed on to remote nodes too (mpirun -x).
_FORWARDED = ("PYTHONPATH", "KILN_COMM_TIMEOUT", "PATH", "LD_LIBRARY_PATH")


def mpirun_command(nproc, script, args=(), hostfile=None, timeout=None, log_dir=None,
                   python=None):
    """The mpirun argv that starts `nproc` ranks of `python script args`."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise RuntimeError("kiln.run: mpirun was not found; install OpenMPI "
                           "(scripts/bootstrap.sh installs Debian's openmpi-bin)")
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"kiln.run: the number of processes must be a positive int, got "
                         f"{nproc!r}")
    cmd = [mpirun, "-n", str(nproc), "--bind-to", "none"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if hostfile is not None:
        cmd += ["--hostfile", os.fspath(hostfile)]
    elif nproc > (os.cpu_count() or 1):
        cmd.append("--oversubscribe")
    if log_dir is not None:
        cmd += ["--output-filename", os.fspath(log_dir)]
    env = dict(os.environ)
    if timeout is not None:
        if not timeout > 0:
            raise ValueError(f"kiln.run: --timeout must be positive seconds, got {timeout}")
        env["KILN_COMM_TIMEOUT"] = str(timeout)
    for name in _FORWARDED:
        if name in env:
            cmd += ["-x", f"{name}={env[name]}"]
    return cmd + [python or sys.executable, os.fspath(script), *args]


def _exec(cmd):
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(cmd[0], cmd)


def main(argv=None):
    """python -m kiln.run --nproc N [--hostfile F] [--timeout S] [--log_dir D] script [args]."""
    parser = argparse.ArgumentParser(prog="python -m kiln.run",
                                     description="Start a data-parallel kiln job over mpirun.")
    parser.add_argument("--nproc", "--nproc_per_node", "-n", type=int, required=True,
                        help="number of ranks")
    parser.add_argument("--hostfile", help="OpenMPI hostfile for a job over several machines")
    parser.add_argument("--timeout", type=float,
                        help="seconds a rank waits in a collective before failing (default 60)")
    parser.add_argument("--log_dir", help="write each rank's output under this folder")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    _exec(mpirun_command(opts.nproc, opts.script, opts.args, opts.hostfile, opts.timeout,
                         opts.log_dir))


def msrun_main(argv=None):
    """MindSpore's ``msrun --worker_num=N --local_worker_num=M script [args]`` over mpirun: on
    one machine (N == M) it becomes that machine's mpirun; over several, one msrun per machine
    with --master_addr/--master_port/--node_rank, node 0 runs one mpirun for all
    (kiln._msrun)."""
    parser = argparse.ArgumentParser(prog="msrun", description="MindSpore's launcher, over mpirun")
    parser.add_argument("--worker_num", type=int, default=8)
    parser.add_argument("--local_worker_num", type=int, default=8)
    parser.add_argument("--master_addr", default="127.0.0.1")
    parser.add_argument("--master_port", type=int, default=8118)
    parser.add_argument("--node_rank", type=int, default=-1)
    parser.add_argument("--log_dir", default=None)
    parser.add_argument("--join", default=False)
    parser.add_argument("--cluster_time_out", type=int, default=600)
    parser.add_argument("--bind_core", default=False)
    parser.add_argument("--sim_level", type=int, default=-1)
    parser.add_argument("task_script")
    parser.add_argument("task_script_args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    _msrun.check_args(opts, parser.error)
    if opts.worker_num == opts.local_worker_num:
        _exec(mpirun_command(opts.worker_num, opts.task_script, opts.task_script_args,
                             log_dir=opts.log_dir))
    try:
        status = _msrun.run_node(opts, lambda hostfile: mpirun_command(
            opts.worker_num, opts.task_script, opts.task_script_args, hostfile=hostfile,
            log_dir=opts.log_dir))
    except OSError as e:  # TimeoutError, a refused connection, a port in use
        sys.exit(f"msrun: node {opts.node_rank}: {e}")
    sys.exit(status)


if __name__ == "__main__":
    main()
