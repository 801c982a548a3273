"""Shared benchmark helpers: timing (from _timing.py, re-exported), optional peers (PyTorch,
JAX, MindSpore), the machine's fp32 peak."""
import contextlib
import functools
import os
import shutil
import subprocess
import tempfile
import time

from _timing import (  # noqa: F401 - re-exported: the scripts import them from here
    ALL_CPUS,
    BUSY_LOOP,
    PROTOCOL,
    Protocol,
    add_protocol_args,
    bench_time,
    best_time,
    busy_processes,
    check_busy,
    contended_medians,
    contended_time,
    contention_session,
    load_report,
    protocol_header,
    use_protocol,
)

HERE = os.path.dirname(os.path.abspath(__file__))


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

    step.optimizer = opt  # for callers that set it up further (bench_amp's unfused update)
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
