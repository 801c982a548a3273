"""Real-size models (issue #16 point 3): ResNet-18 (224x224, batch 16) and a BERT-base-size
encoder (12 layers, d=768, 12 heads, sequence 128, batch 8), inference and a Momentum training
step, in kiln (PyNative and Graph), PyTorch eager, torch.compile and JAX jit; with the seed
network (MLP 784-512-512-10, batch 64) and the one-block encoder (d=256) of the other benchmarks
as the small end of the scale.

Each (model, framework) runs in its own process, so its peak memory (ru_maxrss) is its own; the
processes draw the same weights and inputs from seeded NumPy (real_size_models.py), and this
driver checks their first three training losses against kiln PyNative's before it reports a time.
Reported: time per call (quiet: best of 7; under --contention: the protocol of _timing.py),
% of the fp32 peak measured right before, compile time (kiln Graph: get_jit_stats; torch.compile:
the first call; JAX: lower + compile), peak memory and its growth over the process after setup.

Run: PYTHONPATH=build/dev/python <peers venv>/bin/python benchmarks/bench_real_size.py --threads 2
     [--models seed,encoder,resnet18,bert] [--frameworks kiln_pynative,kiln_graph,torch,compile,jax]
     [--contention 1]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import real_size_models as models  # noqa: E402

FRAMEWORKS = ("kiln_pynative", "kiln_graph", "torch", "compile", "jax")
LABELS = {"kiln_pynative": "kiln PyNative", "kiln_graph": "kiln Graph", "torch": "PyTorch eager",
          "compile": "torch.compile", "jax": "JAX jit"}
# Calls per timed run (forward, training step): each run lasts about 0.1 s or more.
NUMBER = {"seed": (200, 50), "encoder": (10, 5), "resnet18": (3, 1), "bert": (1, 1)}


def rss_mb():
    """This process's resident memory now, MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---- one framework on one model, in this process ----

def run_kiln(model, graph, bench_time):
    import kiln as ms  # noqa: PLC0415
    from _common import kiln_momentum_step  # noqa: PLC0415

    ms.set_context(mode=ms.GRAPH_MODE if graph else ms.PYNATIVE_MODE)
    x_np, y_np = models.make_inputs(model)
    weights = models.make_weights(model)
    net, loss_fn = models.kiln_model(ms, model, weights)
    x, y = ms.Tensor(x_np), ms.Tensor(y_np)
    setup = rss_mb()
    net.set_train(False)
    forward = net  # the context's mode decides, as in a MindSpore script
    compile_before = ms.get_jit_stats()["compile_seconds"]
    forward(x).asnumpy()
    result = {"compile_forward": ms.get_jit_stats()["compile_seconds"] - compile_before}
    result["forward"] = bench_time(lambda: forward(x).asnumpy(), NUMBER[model][0])
    net.set_train(True)
    step = kiln_momentum_step(ms, net, loss_fn)
    step = ms.jit(step) if graph else step
    compile_before = ms.get_jit_stats()["compile_seconds"]
    result["losses"] = [float(step(x, y).asnumpy()) for _ in range(3)]
    result["compile_step"] = ms.get_jit_stats()["compile_seconds"] - compile_before
    result["step"] = bench_time(lambda: step(x, y).asnumpy(), NUMBER[model][1])
    if not graph:
        result.pop("compile_forward")
        result.pop("compile_step")
    return setup, result


def run_torch(model, compiled, threads, bench_time):
    import torch  # noqa: PLC0415

    from _common import torch_momentum_step, try_torch_compile  # noqa: PLC0415

    torch.set_num_threads(threads)
    x_np, y_np = models.make_inputs(model)
    weights = models.make_weights(model)
    net, loss_fn = models.torch_model(torch, model, weights)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    setup = rss_mb()
    result = {}
    net.eval()
    forward = net
    with torch.no_grad():
        if compiled:  # retried with inductor's pattern matcher off where it fails (_common)
            forward, seconds, note = try_torch_compile(torch, net, x)
            if forward is None:
                raise RuntimeError(f"torch.compile failed: {note}")
            result["compile_forward"] = seconds
        result["forward"] = bench_time(lambda: forward(x), NUMBER[model][0])
    net.train()
    step_forward = net
    if compiled:
        step_forward = torch.compile(net)
    step = torch_momentum_step(torch, net, loss_fn, forward=step_forward)
    start = time.perf_counter()
    result["losses"] = [float(step(x, y))]
    if compiled:
        result["compile_step"] = time.perf_counter() - start
    result["losses"] += [float(step(x, y)) for _ in range(2)]
    result["step"] = bench_time(lambda: step(x, y), NUMBER[model][1])
    return setup, result


def run_jax(model, bench_time):
    import jax  # noqa: PLC0415 - XLA_FLAGS and the affinity are set before this import

    from _common import jax_momentum_step  # noqa: PLC0415

    x_np, y_np = models.make_inputs(model)
    weights = models.make_weights(model)
    params = {k: jax.numpy.asarray(v) for k, v in weights.items()}
    x, y = jax.numpy.asarray(x_np), jax.numpy.asarray(y_np)
    forward, loss = models.jax_model(jax, model)
    setup = rss_mb()
    result = {}
    start = time.perf_counter()
    infer = jax.jit(lambda p, v: forward(p, v, False)).lower(params, x).compile()
    result["compile_forward"] = time.perf_counter() - start
    result["forward"] = bench_time(lambda: infer(params, x).block_until_ready(),
                                   NUMBER[model][0])
    step = jax_momentum_step(jax, loss)
    velocity = jax.tree_util.tree_map(jax.numpy.zeros_like, params)
    start = time.perf_counter()
    step = step.lower(params, velocity, x, y).compile()
    result["compile_step"] = time.perf_counter() - start
    state = {"p": params, "v": velocity}
    losses = []
    for _ in range(3):
        state["p"], state["v"], value = step(state["p"], state["v"], x, y)
        losses.append(float(value))
    result["losses"] = losses

    def one_step():
        state["p"], state["v"], value = step(state["p"], state["v"], x, y)
        value.block_until_ready()

    result["step"] = bench_time(one_step, NUMBER[model][1])
    return setup, result


def worker(args):
    """Runs one (model, framework) and writes its JSON to args.out."""
    from _common import bench_time, contention_session, import_jax, pin_to_cpus, use_protocol  # noqa: PLC0415

    use_protocol(args)
    pin_to_cpus(args.threads)
    if args.framework == "jax":
        import_jax(args.threads)
    with contention_session():
        if args.framework.startswith("kiln"):
            import kiln  # noqa: PLC0415

            kiln.set_num_threads(args.threads)
            setup, result = run_kiln(args.model, args.framework == "kiln_graph", bench_time)
        elif args.framework in ("torch", "compile"):
            setup, result = run_torch(args.model, args.framework == "compile", args.threads,
                                      bench_time)
        else:
            setup, result = run_jax(args.model, bench_time)
    result.update(setup_mb=setup, peak_mb=peak_mb())
    with open(args.out, "w") as f:
        json.dump(result, f)


# ---- the driver ----

def run_one(args, model, framework):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        command = [sys.executable, __file__, "--worker", "--model", model, "--framework",
                   framework, "--threads", str(args.threads), "--out", out]
        if args.contention is not None:
            command += ["--contention", str(args.contention), "--nice", str(args.nice)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return {"error": " / ".join(tail)}
        with open(out) as f:
            return json.load(f)


def check_losses(results, model):
    """Marks a framework whose first three losses disagree with kiln PyNative's (or kiln
    Graph's, when PyNative was not run) beyond float32 reordering."""
    reference = next((results[f]["losses"] for f in ("kiln_pynative", "kiln_graph")
                      if "losses" in results.get(f, {})), None)
    for result in results.values():
        if reference is None or "losses" not in result:
            continue
        if not np.allclose(result["losses"], reference, rtol=2e-3, atol=1e-4):
            result["error"] = (f"losses {result['losses']} disagree with kiln's {reference} "
                               f"on {model}")


def fmt_ms(seconds):
    return f"{seconds * 1e3:.1f}" if seconds is not None else "-"


def report(model, results, peak_gflops):
    fwd_flops, step_flops = models.flops(model)
    print(f"\n### {model}: forward {fwd_flops / 1e9:.1f} GFLOP, training step "
          f"{step_flops / 1e9:.1f} GFLOP")
    print("| framework | forward ms | % of peak | step ms | % of peak | compile forward ms | "
          "compile step ms | setup MiB | peak MiB | peak - setup MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for framework, r in results.items():
        if "error" in r:
            print(f"| {LABELS[framework]} | {r['error']} |||||||||")
            continue

        def pct(flops, seconds):
            return f"{100 * flops / seconds / 1e9 / peak_gflops:.0f}%" if peak_gflops else "-"

        print(f"| {LABELS[framework]} | {fmt_ms(r['forward'])} | {pct(fwd_flops, r['forward'])}"
              f" | {fmt_ms(r['step'])} | {pct(step_flops, r['step'])}"
              f" | {fmt_ms(r.get('compile_forward'))} | {fmt_ms(r.get('compile_step'))}"
              f" | {r['setup_mb']:.0f} | {r['peak_mb']:.0f} | {r['peak_mb'] - r['setup_mb']:.0f} |")
    graph = results.get("kiln_graph", {})
    if "forward" in graph:
        ratios = [f"{LABELS[f]} {graph['forward'] / r['forward']:.2f} / "
                  f"{graph['step'] / r['step']:.2f}"
                  for f, r in results.items() if f != "kiln_graph" and "forward" in r]
        print("kiln Graph time / other's (forward / step): " + ", ".join(ratios))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--models", default=",".join(models.MODELS))
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--framework", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    from _common import add_protocol_args, load_report, measure_peak_gflops  # noqa: PLC0415

    add_protocol_args(parser)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    print(f"load before: {load_report()}")
    for model in args.models.split(","):
        peak = measure_peak_gflops(args.threads)
        print(f"\nfp32 peak right before {model}: {peak:.0f} GFLOP/s at {args.threads} threads")
        results = {f: run_one(args, model, f) for f in args.frameworks.split(",")}
        check_losses(results, model)
        report(model, results, peak)
    print(f"\nload after: {load_report()}")


if __name__ == "__main__":
    main()
