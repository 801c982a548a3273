"""Issue #16's contention sweep: kiln Graph, JAX jit, PyTorch eager, quiet and beside busy loops."""
# Usage: PYTHONPATH=build/<dir>/python python benchmarks/contention_sweep.py [--threads 2]
#            [--seconds 1.0] [--figures 5] [--levels 1,2,3,1@19,2@19]
#            [--frameworks kiln,jax,torch]
#
# Workloads: the seed network's forward (batch 64 and 1) and training step (batch 64), LeNet's
# forward and the encoder block's forward, built by the functions of bench_seed_network.py,
# bench_lenet.py and bench_transformer.py (which also check that the frameworks agree; this
# script only times). Every figure follows the protocol (_common.contended_time: the worst
# of --figures medians over --seconds each); "quiet" is that protocol beside no busy process, and
# each other figure is also given as a ratio to its own framework's quiet one. A level "N" is N
# busy processes at nice 0, "N@K" N at nice K. The busy processes of a level run through all of
# its workloads, and stop (even on Ctrl-C) before the next level starts.
#
# The quiet figure, the worst of its medians, is also a lenient reference on a host whose cores
# slow down by themselves for seconds at a time (a VM whose host is busy): one slow median raises
# it. So the table also gives the fastest quiet median and judges the targets against it too.
import argparse
import functools
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _common import (  # noqa: E402
    busy_processes,
    check_busy,
    contended_medians,
    import_jax,
    import_torch,
    jax_step_runner,
    load_report,
    pin_to_cpus,
    table,
)

FRAMEWORKS = {"kiln": "kiln Graph", "jax": "JAX jit", "torch": "PyTorch eager"}
# Issue #16's targets: beside N busy processes at nice 0, at most this many times quiet.
TARGETS = {1: 2.5, 2: 4.0, 3: 5.0}
QUIET = (0, 0)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=1.0, help="seconds per median")
    parser.add_argument("--figures", type=int, default=5, help="medians per figure (the worst "
                        "is kept)")
    parser.add_argument("--levels", default="1,2,3,1@19,2@19", help="busy-process levels after "
                        "the quiet one: N (at nice 0) or N@NICE, comma-separated")
    parser.add_argument("--frameworks", default="kiln,jax,torch",
                        help="any of kiln, jax, torch (a peer that is not importable is skipped)")
    args = parser.parse_args()
    args.frameworks = [f for f in args.frameworks.split(",") if f]
    unknown = set(args.frameworks) - set(FRAMEWORKS)
    if unknown:
        parser.error(f"unknown framework(s): {', '.join(sorted(unknown))}")
    args.levels = parse_levels(args.levels, parser)
    return args


def parse_levels(text, parser):
    """[(busy processes, nice)] from "1,2,1@19"; the quiet level is always measured first."""
    levels = []
    for item in filter(None, text.split(",")):
        n, _, nice = item.partition("@")
        try:
            level = (int(n), int(nice or 0))
        except ValueError:
            parser.error(f"--levels: {item!r} is not N or N@NICE")
        if level[0] > 0 and level not in levels:
            levels.append(level)
    return levels


def level_name(level):
    n, nice = level
    if n == 0:
        return "quiet"
    return f"{n} busy" + (f", nice {nice}" if nice else "")


def jax_call(f, *args):
    """A callable running the jitted f(*args) to completion (JAX dispatches asynchronously)."""
    return lambda: f(*args).block_until_ready()


def torch_inference(model, x):
    """A callable running model(x) with no autograd graph. Freezing the parameters does that
    without entering a no_grad context in every timed call."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return functools.partial(model, x)


def seed_workloads(ms, jax, torch):
    """The seed network's forward at batch 64 and 1, and its training step at batch 64."""
    import bench_seed_network as seed  # imports kiln, and examples/ for its Network

    rng = np.random.default_rng(0)
    xs = {b: rng.standard_normal((b, 1, 28, 28)).astype(np.float32) for b in (64, 1)}
    y = rng.integers(0, 10, size=64)
    forward = {b: {} for b in xs}
    train = {}
    ms.set_seed(0)
    net = seed.Network()
    for b, x in xs.items():
        forward[b]["kiln"] = functools.partial(net, ms.Tensor(x))
    step = ms.jit(seed.kiln_train_step(seed.Network()))
    train["kiln"] = functools.partial(step, ms.Tensor(xs[64]), ms.Tensor(y))
    if jax is not None:
        jforward, jstep, params, velocity = seed.jax_model(jax, rng)
        for b, x in xs.items():
            forward[b]["jax"] = jax_call(jforward, params, jax.numpy.asarray(x))
        run = jax_step_runner(jstep, params, velocity, jax.numpy.asarray(xs[64]),
                              jax.numpy.asarray(y))
        train["jax"] = lambda: run().block_until_ready()
    if torch is not None:
        for b, x in xs.items():
            forward[b]["torch"] = torch_inference(seed.torch_mlp(torch), torch.from_numpy(x))
        tstep = seed.torch_train_step(torch, seed.torch_mlp(torch))
        train["torch"] = functools.partial(tstep, torch.from_numpy(xs[64]), torch.from_numpy(y))
    return [(f"seed forward, batch {b}", forward[b]) for b in xs] + [
        ("seed train step, batch 64", train)]


def lenet_workload(ms, jax, torch):
    """LeNet's forward at batch 64, the same weights in every framework."""
    import bench_lenet as lenet

    x = np.random.default_rng(0).standard_normal((lenet.BATCH, 1, 28, 28)).astype(np.float32)
    ms.set_seed(0)
    net = lenet.lenet_class(ms.nn)()
    weights = lenet.kiln_weights(net)
    fns = {"kiln": functools.partial(net, ms.Tensor(x))}
    if jax is not None:
        jforward, _, params, _ = lenet.jax_lenet(jax, weights)
        fns["jax"] = jax_call(jforward, params, jax.numpy.asarray(x))
    if torch is not None:
        fns["torch"] = torch_inference(lenet.torch_lenet(torch, weights), torch.from_numpy(x))
    return [(f"LeNet forward, batch {lenet.BATCH}", fns)]


def encoder_workload(ms, jax, torch):
    """The encoder block's forward (d=256, 4 heads, sequence 128, batch 8)."""
    import bench_transformer as tr

    x = np.random.default_rng(0).standard_normal((tr.BATCH, tr.SEQ, tr.D)).astype(np.float32)
    ms.set_seed(0)
    block = tr.block_class(ms.nn, ms.ops)
    weights = tr.kiln_weights(block())
    net = tr.load_kiln(block(), weights, ms.Tensor)
    fns = {"kiln": functools.partial(net, ms.Tensor(x))}
    if jax is not None:
        jforward, _, params, _ = tr.jax_block(jax, weights)
        fns["jax"] = jax_call(jforward, params, jax.numpy.asarray(x))
    if torch is not None:
        fns["torch"] = torch_inference(tr.torch_block(torch, weights), torch.from_numpy(x))
    return [(f"encoder block forward, batch {tr.BATCH}", fns)]


def build_workloads(ms, jax, torch, frameworks):
    """[(workload, {framework: callable})], keeping only the frameworks asked for."""
    workloads = (seed_workloads(ms, jax, torch) + lenet_workload(ms, jax, torch)
                 + encoder_workload(ms, jax, torch))
    return [(name, {f: fn for f, fn in fns.items() if f in frameworks})
            for name, fns in workloads]


def measure(workloads, levels, args):
    """({(workload, framework, level): [median seconds per call]}, {level: load line}); one set
    of busy processes per level, running through all of that level's workloads."""
    figures, loads = {}, {}
    for level in [QUIET] + levels:
        print(f"contention_sweep: {level_name(level)} ...", file=sys.stderr, flush=True)
        with busy_processes(*level):
            for name, fns in workloads:
                for framework, fn in fns.items():
                    figures[name, framework, level] = contended_medians(fn, args.figures,
                                                                        args.seconds)
            check_busy()
            loads[level] = load_report()  # while they still run
    return figures, loads


def verdict(ratios):
    """Whether issue #16's targets hold, from {level: ratio to quiet}; only nice-0 levels with
    a target count."""
    judged = {n: r for (n, nice), r in ratios.items() if nice == 0 and n in TARGETS}
    if not judged:
        return "-"
    missed = [f"{n} busy {r:.2f}× > {TARGETS[n]:g}×" for n, r in sorted(judged.items())
              if r > TARGETS[n]]
    return "no: " + "; ".join(missed) if missed else "yes"


def result_table(workloads, levels, figures):
    """The Markdown table: each figure the worst of its medians (the protocol's), as a ratio to
    the quiet figure, and the targets judged against the quiet figure and against the fastest
    quiet median."""
    headers = ["workload", "framework", "quiet µs (fastest median)"]
    for level in levels:
        headers += [f"{level_name(level)} µs", f"{level_name(level)} / quiet"]
    headers += ["targets (1/2/3 busy ≤ 2.5/4/5× quiet)", "targets against the fastest quiet median"]
    rows = []
    for name, fns in workloads:
        for framework in fns:
            quiet_medians = figures[name, framework, QUIET]
            quiet, fastest = max(quiet_medians), min(quiet_medians)
            worst = {level: max(figures[name, framework, level]) for level in levels}
            row = [name, FRAMEWORKS[framework], f"{quiet * 1e6:.1f} ({fastest * 1e6:.1f})"]
            for level in levels:
                row += [f"{worst[level] * 1e6:.1f}", f"{worst[level] / quiet:.2f}×"]
            row.append(verdict({level: worst[level] / quiet for level in levels}))
            row.append(verdict({level: worst[level] / fastest for level in levels}))
            rows.append(row)
    return table(headers, rows)


def main():
    args = parse_args()
    pinned = pin_to_cpus(args.threads)  # before JAX starts its thread pools
    jax = import_jax(args.threads) if "jax" in args.frameworks else None
    import kiln as ms  # always: it makes the weights every framework starts from

    ms.set_num_threads(args.threads)
    ms.set_context(mode=ms.GRAPH_MODE)
    torch = import_torch(args.threads) if "torch" in args.frameworks else None
    missing = [f for f, m in (("jax", jax), ("torch", torch)) if f in args.frameworks and not m]
    frameworks = [f for f in args.frameworks if f not in missing]
    workloads = build_workloads(ms, jax, torch, frameworks)
    figures, loads = measure(workloads, args.levels, args)
    seconds = "one-second" if args.seconds == 1.0 else f"{args.seconds:g}-second"
    print(f"Contention sweep (issue #16): {args.threads} thread(s); each figure the worst of "
          f"{args.figures} {seconds} medians of per-call times; a busy process is "
          f"`{sys.executable} -c \"while True: pass\"`, unpinned. kiln from "
          f"{os.path.dirname(ms.__file__)}; JAX {jax.__version__ if jax else '-'}; PyTorch "
          f"{torch.__version__ if torch else '-'}.")
    for note in ([pinned] if pinned else []) + [f"{FRAMEWORKS[f]}: not importable, left out"
                                                for f in missing]:
        print(note)
    print()
    print(result_table(workloads, args.levels, figures))
    print()
    for level, line in loads.items():
        print(f"- {level_name(level)}: {line}")


if __name__ == "__main__":
    main()
