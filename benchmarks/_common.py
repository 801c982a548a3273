"""Shared benchmark helpers: best-of timing, the contention protocol of issue #16 (busy
processes, worst-of-medians timing), optional peers (PyTorch, JAX, MindSpore), the machine's fp32
peak."""
import contextlib
import dataclasses
import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Every CPU this process may use, read before pin_to_cpus narrows the set: busy processes are
# unpinned, so they get all of them back whatever the benchmark itself was pinned to.
ALL_CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def best_time(fn, number, repeat=7, warmup=3):
    """Seconds per call: the best of `repeat` runs of `number` calls.

    The minimum, not the mean: on a shared machine other work only ever adds time.
    """
    # NumPy's OpenBLAS, PyTorch's and kiln's OpenMP each keep their worker threads spinning for
    # a while after a parallel call; on a 2-core machine a spinning idle pool of the previous
    # framework halves the next one's speed. Let them fall asleep first.
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


# ---- Issue #16's contention protocol: "A figure is the median per-call time over at least 1 s;
# the target must hold for the worst of 5 such figures; a busy process is a plain Python busy
# loop started as its own process at nice 0, unpinned." ----

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
    time.sleep(0.1)  # as in best_time: let the previous framework's idle pools fall asleep
    for _ in range(warmup):
        fn()
    return max(_median_call(fn, seconds, inner) for _ in range(figures))


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


def import_torch(threads):
    """PyTorch (for comparison only, never a kiln dependency) on `threads` threads, or None."""
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        return None
    torch.set_num_threads(threads)
    return torch


def import_mindspore(threads):
    """MindSpore (for comparison only, never a kiln dependency) on the CPU with `threads` kernel
    threads, or None when it is not importable (absent or a broken install: never an error).

    Its peers install from benchmarks/requirements-peers.txt. MindSpore >= 2.5 takes the CPU
    kernel thread count once per process, before its first op (a second setting raises, and is
    ignored here); older 2.x took it as set_context(runtime_num_threads=...). Its dispatch
    (actor) threads keep their default.
    """
    try:
        import mindspore  # noqa: PLC0415
    except Exception:  # noqa: BLE001 - ImportError, or OSError from a missing shared library
        return None
    if hasattr(mindspore, "set_device"):
        mindspore.set_device("CPU")
        with contextlib.suppress(RuntimeError):
            mindspore.device_context.cpu.op_tuning.threads_num(threads)
    else:
        mindspore.set_context(device_target="CPU", runtime_num_threads=threads)
    return mindspore


def measure_peak_gflops(threads):
    """fp32 FMA peak on `threads` threads, built from benchmarks/cpp/fp32_peak.cc; None if no
    compiler is available."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "fp32_peak")
        subprocess.run([compiler, "-O3", "-march=native", "-fopenmp",
                        os.path.join(HERE, "cpp", "fp32_peak.cc"), "-o", exe], check=True)
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        out = subprocess.run([exe], check=True, capture_output=True, text=True, env=env)
        return float(out.stdout.strip())


def table(headers, rows):
    """A Markdown table, so results paste straight into docs/benchmarks.md."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def pin_to_cpus(threads):
    """Restricts this process to `threads` of its CPUs and returns a note saying so ("" when
    nothing changed). XLA sizes its CPU thread pools from the CPUs the process may run on and
    ignores thread-count flags, so this is how JAX is held to the thread count of the others."""
    if not hasattr(os, "sched_setaffinity"):
        return ""
    cpus = sorted(os.sched_getaffinity(0))
    if threads >= len(cpus):
        return ""
    os.sched_setaffinity(0, cpus[:threads])
    return f"process pinned to CPU(s) {cpus[:threads]} (so that JAX uses {threads} thread(s))"


def import_jax(threads):
    """JAX (for comparison only) asked for `threads` threads, or None. Must run before anything
    else imports jax: XLA reads XLA_FLAGS once."""
    if threads == 1:  # XLA's CPU client otherwise uses every core whatever the others do
        os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                                           "intra_op_parallelism_threads=1")
    try:
        import jax  # noqa: PLC0415
    except ImportError:
        return None
    return jax


def reason(e):
    """An exception's type and the first two lines of its message, for a note."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {' '.join(lines[:2])}"[:400]


def try_torch_compile(torch, fn, *example_args):
    """(compiled fn, compile seconds, note) after one call on example_args.

    When the default torch.compile fails, the reason goes into the note and compiling is retried
    once with inductor's pattern matcher off (it rewrites softmax(q @ k) @ v into fused
    attention, which is what fails for the encoder block on PyTorch 2.13); the setting then
    stays off for the rest of the process. (None, None, note) when that fails too.
    """
    def attempt():
        start = time.perf_counter()
        try:
            compiled = torch.compile(fn)
            compiled(*example_args)
        except Exception as e:  # noqa: BLE001 - any failure is reported, never fatal
            return None, None, reason(e)
        return compiled, time.perf_counter() - start, None

    compiled, seconds, error = attempt()
    if compiled is not None:
        return compiled, seconds, None
    import torch._inductor.config as inductor_config  # noqa: PLC0415

    if not inductor_config.pattern_matcher:
        return None, None, f"torch.compile failed: {error}"
    inductor_config.pattern_matcher = False
    torch._dynamo.reset()
    compiled, seconds, error2 = attempt()
    if compiled is None:
        return None, None, (f"torch.compile failed: {error}; and with "
                            f"torch._inductor.config.pattern_matcher=False: {error2}")
    return compiled, seconds, (f"torch.compile failed by default ({error}); measured with "
                               "torch._inductor.config.pattern_matcher=False")


def check_close(what, got, want, rtol, atol):
    """Raises AssertionError (the benchmark stops) when two results disagree."""
    import numpy as np  # noqa: PLC0415

    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shapes differ, {got.shape} vs {want.shape}")
    err = np.abs(got - want)
    bad = err > atol + rtol * np.abs(want)
    if bad.any():
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} values disagree; max abs "
                             f"error {err.max():.3g} (rtol {rtol}, atol {atol})")
    print(f"check: {what}: max abs error {err.max():.2e}")


def pct(flops, seconds, peak):
    """'GFLOP/s (x% of peak)' for a timing, or '-'."""
    if seconds is None or flops is None:
        return "-"
    gflops = flops / seconds / 1e9
    return f"{gflops:.1f} ({100 * gflops / peak:.0f}%)" if peak else f"{gflops:.1f}"


FRAMEWORKS = [("pynative", "kiln PyNative µs"), ("graph", "kiln Graph µs"),
              ("torch", "PyTorch eager µs"), ("compile", "torch.compile µs"),
              ("jax", "JAX jit µs"), ("ms_pynative", "MindSpore PyNative µs"),
              ("ms_graph", "MindSpore Graph µs")]


def report(threads, peak, results):
    """Prints the timing table (µs and Graph's ratios to the others) and the GFLOP/s table.

    results: list of (workload, flops or None, {framework key: seconds or None}) with the keys
    of FRAMEWORKS; a framework whose value is None everywhere gets no column.
    """
    present = [(k, h) for k, h in FRAMEWORKS if any(r[2].get(k) is not None for r in results)]
    ratios = [(k, f"Graph / {h.rsplit(' ', 1)[0]}") for k, h in present
              if k in ("torch", "compile", "jax", "ms_graph")]
    headers = ["workload"] + [h for _, h in present] + [h for _, h in ratios]
    rows = []
    for name, _, t in results:
        row = [name] + ["-" if t.get(k) is None else f"{t[k] * 1e6:.1f}" for k, _ in present]
        g = t.get("graph")
        row += ["-" if g is None or t.get(k) is None else f"{g / t[k]:.2f}" for k, _ in ratios]
        rows.append(row)
    for line in protocol_header():
        print(line)
    print(f"threads: {threads}" + (f", fp32 peak {peak:.1f} GFLOP/s" if peak else ""))
    print()
    print(table(headers, rows))
    counted = [r for r in results if r[1]]
    if counted:
        print()
        print("GFLOP/s (% of the measured fp32 peak), counting matmul/conv FLOPs only:")
        print()
        headers = ["workload", "MFLOP"] + [h.replace(" µs", "") for _, h in present]
        print(table(headers, [[name, f"{flops / 1e6:.1f}"] + [pct(flops, t.get(k), peak)
                                                              for k, _ in present]
                              for name, flops, t in counted]))


def kiln_momentum_step(ms, net, loss_fn):
    """kiln's training step: value_and_grad of loss_fn(net(x), y), then Momentum (lr 0.01,
    momentum 0.9) — the MindSpore idiom, compiled as a whole when wrapped in ms.jit."""
    from kiln import nn  # noqa: PLC0415 - kiln is imported by the scripts after sys.path setup

    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)

    def forward(x, y):
        return loss_fn(net(x), y)

    grad_fn = ms.value_and_grad(forward, None, opt.parameters)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss

    return step


def torch_momentum_step(torch, model, loss_fn, forward=None):
    """The same update in PyTorch: SGD with momentum 0.9 and lr 0.01 (buffer = grad on the first
    step, as kiln's Momentum). `forward` is the (possibly compiled) callable running the model."""
    forward = model if forward is None else forward
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(forward(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


# ---- MindSpore (PyNative and Graph), timed after every other framework: once used, its runtime
# threads keep spinning and would slow whatever ran next on a small machine ----

MS_MODES = (("ms_pynative", "PYNATIVE_MODE"), ("ms_graph", "GRAPH_MODE"))


@functools.cache
def mindspore_prime(mindspore):
    """Gets MindSpore's one failing first use over with, on a throwaway op. Its C++ part was built
    against the NumPy 1.x C API (benchmarks/requirements-peers.txt): under NumPy 2 the first op
    that parses a Python tuple or scalar prints the "compiled using NumPy 1.x" traceback, and a
    reshape then raises SystemError ("returned a result with an exception set"); every later call
    works. Starts MindSpore's runtime, so only once MindSpore's turn has come."""
    with contextlib.suppress(Exception):
        mindspore.ops.reshape(mindspore.Tensor([[0.0, 0.0]]), (2, 1)).asnumpy()


def mindspore_load(mindspore, mnet, kiln_net):
    """mnet, a MindSpore nn.Cell built with the same attribute names as kiln_net (hence the same
    parameter names), with kiln_net's trainable parameters copied in."""
    weights = {p.name: p.asnumpy() for p in kiln_net.trainable_params()}
    for p in mnet.trainable_params():
        w = weights.pop(p.name, None)
        if w is None or tuple(w.shape) != tuple(p.shape):
            raise AssertionError(f"MindSpore parameter {p.name} {tuple(p.shape)}: kiln has "
                                 f"{'none' if w is None else tuple(w.shape)}")
        p.set_data(mindspore.Tensor(w.copy()))
    if weights:
        raise AssertionError(f"kiln parameters MindSpore lacks: {sorted(weights)}")
    return mnet


def mindspore_train_step(mindspore, net, loss_fn, cell=False):
    """kiln_momentum_step written in MindSpore: value_and_grad of loss_fn(net(x), y) + nn.Momentum
    (lr 0.01, momentum 0.9). cell=True: the same step as one nn.TrainOneStepCell, for GRAPH_MODE.
    (mindspore.jit on the function, called from PyNative, runs through PyNative's dispatch
    queue, whose thread spins: 15-25 ms a seed-network step on 2 cores, against 2 ms for the
    cell.)"""
    mnn = mindspore.nn
    opt = mnn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    if cell:
        return mnn.TrainOneStepCell(mnn.WithLossCell(net, loss_fn), opt)

    def forward(x, y):
        return loss_fn(net(x), y)

    grad_fn = mindspore.value_and_grad(forward, None, opt.parameters)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss

    return step


def mindspore_forward_times(mindspore, make_net, inputs, want, what, number, notes,
                            rtol=1e-3, atol=1e-4):
    """{framework key: seconds} of MindSpore's forward in PyNative, then Graph mode, of one
    make_net() (a cell holding kiln's weights) on the NumPy `inputs`. Each mode's output is first
    checked against kiln's (`want`); Graph's first call (it compiles) is not timed, nor are
    bench_time's warm-up calls. Each timed call ends in asnumpy(): PyNative ops run asynchronously.
    A mode that fails or disagrees gets no time and a line in notes."""
    mindspore_prime(mindspore)
    t, net = {}, None
    args = [mindspore.Tensor(a) for a in inputs]
    for key, mode in MS_MODES:
        mindspore.set_context(mode=getattr(mindspore, mode))
        try:
            net = make_net() if net is None else net
            start = time.perf_counter()
            out = net(*args).asnumpy()
            if key == "ms_graph":
                print(f"MindSpore Graph {what}, first call (compiles): "
                      f"{(time.perf_counter() - start) * 1e3:.0f} ms")
            check_close(f"{what}, MindSpore {mode} vs kiln", out, want, rtol, atol)
            t[key] = bench_time(lambda n=net: n(*args).asnumpy(), number)
        except Exception as e:  # noqa: BLE001 - a peer's failure costs its column, nothing more
            notes.append(f"note: MindSpore {mode} {what}: left out ({reason(e)})")
    mindspore.set_context(mode=mindspore.PYNATIVE_MODE)
    return t


def mindspore_train_times(mindspore, make_net, make_loss, inputs, kiln_losses, what, number,
                          notes, rtol=1e-3, atol=1e-4):
    """{framework key: seconds} of MindSpore's training step (mindspore_train_step) in PyNative,
    then Graph mode, each from a fresh make_net() (kiln's initial weights) and make_loss(), on
    the NumPy `inputs` (x, y). Each mode's first three losses are checked against kiln PyNative's
    (kiln_losses) and are not timed (Graph compiles in the first). A mode that fails or
    disagrees gets no time and a line in notes."""
    mindspore_prime(mindspore)
    t = {}
    args = [mindspore.Tensor(a) for a in inputs]
    for key, mode in MS_MODES:
        mindspore.set_context(mode=getattr(mindspore, mode))
        try:
            step = mindspore_train_step(mindspore, make_net(), make_loss(),
                                        cell=key == "ms_graph")
            start = time.perf_counter()
            losses = [float(step(*args).asnumpy()) for _ in range(3)]
            print(f"MindSpore {mode} {what}, first 3 steps: {time.perf_counter() - start:.1f} s")
            check_close(f"{what} losses (3 steps), MindSpore {mode} vs kiln PyNative", losses,
                        kiln_losses, rtol, atol)
            t[key] = bench_time(lambda s=step: s(*args).asnumpy(), number)
        except Exception as e:  # noqa: BLE001 - a peer's failure costs its column, nothing more
            notes.append(f"note: MindSpore {mode} {what}: left out ({reason(e)})")
    mindspore.set_context(mode=mindspore.PYNATIVE_MODE)
    return t


def torch_compiled_step_time(torch, make_model, loss_fn, xt, yt, torch_losses, number, notes):
    """torch.compile's training step on a fresh model from `make_model()`: compiled, warmed up
    (compiling is not timed), checked against PyTorch eager's first three losses, then timed.
    None when compiling fails (the reason goes into notes)."""
    cmodel = make_model()
    compiled, seconds, note = try_torch_compile(torch, cmodel, xt)
    notes += [f"train step: {note}"] if note else []
    if compiled is None:
        return None
    cstep = torch_momentum_step(torch, cmodel, loss_fn, compiled)
    start = time.perf_counter()
    closs = [float(cstep(xt, yt)) for _ in range(3)]
    print(f"torch.compile train step compile (first step): "
          f"{seconds + time.perf_counter() - start:.1f} s")
    check_close("train step losses (3 steps), torch.compile vs PyTorch eager", closs,
                torch_losses, 1e-3, 1e-4)
    return bench_time(lambda: cstep(xt, yt), number)


def jax_step_time(jstep, params, velocity, xj, yj, kiln_losses, number):
    """The jitted JAX training step: its first three losses checked against kiln PyNative's,
    then timed to completion (block_until_ready) with the state carried between calls."""
    run = jax_step_runner(jstep, params, velocity, xj, yj)
    jax_losses = [float(run()) for _ in range(3)]
    check_close("train step losses (3 steps), JAX vs kiln PyNative", jax_losses, kiln_losses,
                1e-3, 1e-4)
    return bench_time(lambda: run().block_until_ready(), number)


def jax_step_runner(jstep, params, velocity, xj, yj):
    """A callable doing one jitted JAX training step on (xj, yj) and returning its loss, with
    the parameters and velocity carried from call to call, as the other frameworks' steps."""
    state = [params, velocity]

    def run():
        state[0], state[1], value = jstep(state[0], state[1], xj, yj)
        return value

    return run


def jax_momentum_step(jax, loss):
    """The jitted JAX training step every benchmark uses: value_and_grad of loss(params, x, y),
    then SGD with momentum 0.9 and lr 0.01, as kiln's and PyTorch's steps."""
    tree_map = jax.tree_util.tree_map

    @jax.jit
    def step(params, velocity, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        velocity = tree_map(lambda v, g: 0.9 * v + g, velocity, grads)
        params = tree_map(lambda p, v: p - 0.01 * v, params, velocity)
        return params, velocity, value

    return step


def benchmark_setup():
    """Parses the scripts' common options (--threads, --peak, --no-compile and
    add_protocol_args'), pins the process at 1 thread, imports the peers in the order they need
    (JAX before anything else: XLA reads its flags once) and sets kiln's thread count. Returns
    (args, pinned note, jax, torch, mindspore, fp32 peak GFLOP/s); a peer that is not installed
    is None."""
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--peak", type=float, default=None, help="fp32 peak GFLOP/s to use "
                        "instead of measuring it")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    add_protocol_args(parser)
    args = parser.parse_args()
    use_protocol(args)
    pinned = pin_to_cpus(args.threads)  # before JAX starts its thread pools
    jax = import_jax(args.threads)
    import kiln  # noqa: PLC0415

    kiln.set_num_threads(args.threads)
    torch = import_torch(args.threads)
    mindspore = import_mindspore(args.threads)
    peak = args.peak or measure_peak_gflops(args.threads)
    return args, pinned, jax, torch, mindspore, peak
