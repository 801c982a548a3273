"""How the benchmarks time: the quiet best-of-N, and issue #16's contention protocol (busy
processes beside a benchmark, the worst of several one-second medians)."""
import contextlib
import dataclasses
import os
import statistics
import subprocess
import sys
import time

# Every CPU this process may use, read before pin_to_cpus narrows the set: busy processes are
# unpinned, so they get all of them back whatever the benchmark itself was pinned to.
ALL_CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def best_time(fn, number, repeat=7, warmup=3):
    """Seconds per call: the best of `repeat` runs of `number` calls.

    The minimum, not the mean: on a shared machine other work only ever adds time.
    """
    # NumPy's OpenBLAS, PyTorch's OpenMP and kiln's oneTBB each keep their worker threads
    # spinning for a while after a parallel call; on a 2-core machine a spinning idle pool of the
    # previous framework halves the next one's speed. Let them fall asleep first.
    time.sleep(0.1)
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


BUSY_LOOP = "while True: pass"
# Run by each busy process's interpreter, which then execs into the bare busy loop (exec keeps the
# pid, the nice, the affinity and the parent-death signal). Done in the parent's preexec_fn
# instead, it would fork() a process with threads, which JAX warns may deadlock; a plain spawn
# does not fork. argv: nice, the benchmark's pid, the CPUs to run on.
_BUSY_LAUNCH = f"""
import ctypes, os, signal, sys
nice, parent, cpus = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
try:  # absolute, unlike os.nice; a user may not go below their own nice (load_report tells)
    os.setpriority(os.PRIO_PROCESS, 0, nice)
except OSError:
    pass
if cpus:  # unpinned: every CPU, whatever pin_to_cpus did to the benchmark
    os.sched_setaffinity(0, [int(c) for c in cpus.split(",")])
# Ctrl-C reaches the terminal's whole process group, but stopping these is the benchmark's job:
# it kills them on its way out, and should it swallow the interrupt (JAX's gc callback can) and
# go on, they go on with it instead of leaving it timing alone under a "beside N" label.
signal.signal(signal.SIGINT, signal.SIG_IGN)  # kept across exec, and the loop's Python honours it
if sys.platform.startswith("linux"):
    # Dies with the benchmark even when that is killed by SIGKILL (run_all's timeout), which no
    # finally block sees; the check closes the race of a benchmark gone before the prctl.
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        sys.exit(1)
os.execv(sys.executable, [sys.executable, "-c", {BUSY_LOOP!r}])
"""
_BUSY = []  # the busy processes now running, for load_report


@contextlib.contextmanager
def busy_processes(n, nice=0):
    """Runs n busy processes (`python -c "while True: pass"`, each its own process at `nice`,
    unpinned) for the body of the with-statement; they are killed and reaped on the way out,
    exceptions and Ctrl-C included. n=0 starts nothing."""
    cpus = ",".join(map(str, ALL_CPUS or []))
    procs = []
    try:
        for _ in range(n):
            procs.append(subprocess.Popen(
                [sys.executable, "-c", _BUSY_LAUNCH, str(nice), str(os.getpid()), cpus],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
            _BUSY.append(procs[-1])
        if procs:
            time.sleep(0.3)  # past the interpreter's start-up and the exec, into the loop
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
            _BUSY.remove(p)


def check_busy():
    """Raises RuntimeError when a busy process has died: the figures just taken were not taken
    beside as many as their label says."""
    dead = [p.pid for p in _BUSY if p.poll() is not None]
    if dead:
        raise RuntimeError(f"busy process(es) {dead} died while timing")


def contended_time(fn, figures=5, seconds=1.0, warmup=3, inner=1):
    """Seconds per call under the protocol: the worst (largest) of `figures` medians, each the
    median of per-call times collected for at least `seconds`. With inner > 1 a sample is the mean
    of that many back-to-back calls, for calls so short that perf_counter's own cost would show."""
    return max(contended_medians(fn, figures, seconds, warmup, inner))


def contended_medians(fn, figures=5, seconds=1.0, warmup=3, inner=1):
    """The `figures` medians contended_time takes the worst of, in the order measured."""
    time.sleep(0.1)  # as in best_time: let the previous framework's idle pools fall asleep
    for _ in range(warmup):
        fn()
    return [_median_call(fn, seconds, inner) for _ in range(figures)]


def _median_call(fn, seconds, inner):
    clock, samples = time.perf_counter, []
    end = clock() + seconds
    while True:
        start = clock()
        for _ in range(inner):
            fn()
        stop = clock()
        samples.append((stop - start) / inner)
        if stop >= end:
            return statistics.median(samples)


def _nice_of(pid):
    with contextlib.suppress(OSError):
        return os.getpriority(os.PRIO_PROCESS, pid)
    return None


def load_report():
    """One line: the 1/5/15-minute load average, the busy processes running now and their nice
    (as read back from the kernel), and this process's nice."""
    try:
        with open("/proc/loadavg") as f:
            load = " / ".join(f.read().split()[:3])
    except OSError:
        load = "unknown"
    live = [p for p in _BUSY if p.poll() is None]
    nices = sorted({n for n in map(_nice_of, (p.pid for p in live)) if n is not None})
    busy = (f"{len(live)} busy process{'es' if len(live) != 1 else ''}"
            + (f" at nice {', '.join(map(str, nices))}" if nices else ""))
    return (f"load average {load} (1/5/15 min); {busy}; "
            f"the benchmark at nice {_nice_of(0)}")


@dataclasses.dataclass
class Protocol:
    """How the scripts time: contention None is the quiet best-of-7 (best_time) of the existing
    tables; a number N (0 included: the quiet baseline under the same rules) is contended_time
    beside N busy processes at `nice`."""
    contention: int | None = None
    nice: int = 0
    figures: int = 5
    seconds: float = 1.0

    def label(self):
        if self.contention is None:
            return "best of 7 repeats, no busy process"
        n = self.contention
        beside = (f"beside {n} busy process{'es' if n != 1 else ''} (nice {self.nice})" if n
                  else "beside no busy process (quiet baseline)")
        length = "one-second" if self.seconds == 1.0 else f"{self.seconds:g}-second"
        return f"{beside}, worst of {self.figures} {length} medians"


PROTOCOL = Protocol()
_SESSION = {"stack": None, "started": False}


def add_protocol_args(parser):
    """--contention, --nice, --figures, --seconds on a script's argparse parser."""
    g = parser.add_argument_group("contention (issue #16)")
    g.add_argument("--contention", type=int, default=None, metavar="N",
                   help="time beside N busy processes, started at the first timed call (setup "
                        "and the first compilations stay quiet; later ones, e.g. "
                        "torch.compile's, run beside them), as the worst of --figures medians "
                        "over --seconds each; 0 is the quiet baseline under the same rules. "
                        "Default: the quiet best of 7")
    g.add_argument("--nice", type=int, default=0, help="nice of the busy processes (default 0)")
    g.add_argument("--figures", type=int, default=5, help="medians per figure (default 5)")
    g.add_argument("--seconds", type=float, default=1.0,
                   help="seconds of calls per median (default 1.0)")


def use_protocol(args):
    """Makes bench_time follow the parsed --contention, --nice, --figures and --seconds."""
    if args.contention is not None and args.contention < 0:
        raise SystemExit("--contention must be 0 or more")
    PROTOCOL.contention, PROTOCOL.nice = args.contention, args.nice
    PROTOCOL.figures, PROTOCOL.seconds = args.figures, args.seconds


@contextlib.contextmanager
def contention_session():
    """Wraps a script's main(): bench_time starts the busy processes inside it, at its first
    timed call, and they stop when it ends (also on an exception or Ctrl-C)."""
    with contextlib.ExitStack() as stack:
        _SESSION.update(stack=stack, started=False)
        try:
            yield
        finally:
            _SESSION.update(stack=None, started=False)


def bench_time(fn, number, inner=1):
    """Seconds per call of fn: best_time(fn, number) for a quiet run, and under --contention
    contended_time (inner: see there), with the busy processes running."""
    if PROTOCOL.contention is None:
        return best_time(fn, number)
    if _SESSION["stack"] is None:
        raise RuntimeError("bench_time under --contention needs the script's main() inside "
                           "contention_session()")
    if not _SESSION["started"]:
        _SESSION["stack"].enter_context(busy_processes(PROTOCOL.contention, PROTOCOL.nice))
        _SESSION["started"] = True
    seconds = contended_time(fn, PROTOCOL.figures, PROTOCOL.seconds, inner=inner)
    check_busy()
    return seconds


def protocol_header():
    """The lines to print above a table under --contention (how it was timed, and the load);
    none for a quiet run, whose output stays as it was."""
    if PROTOCOL.contention is None:
        return []
    return [f"timing: {PROTOCOL.label()}", f"load: {load_report()}"]
