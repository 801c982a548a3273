"""Runs every benchmark at 1 and 2 threads, collects their tables into benchmarks/results.md and
draws docs/benchmarks.png (kiln Graph's time relative to PyTorch eager and to JAX jit per
workload). `make bench` calls this.

Usage: PYTHONPATH=build/<dir>/python python benchmarks/run_all.py [--threads 1,2] [--no-compile]
       [--contention 0,1,2 [--nice K] [--figures 5] [--seconds 1.0]]

With --contention, each script runs once per level, beside that many busy processes, under issue
#16's protocol (worst of 5 one-second medians; see _common.py), and each section says which.

Each script runs in its own process (thread pools and XLA flags are per process). A script that
fails is reported in results.md with the end of its output, and the others still run; the exit
status is then 1.
"""
import argparse
import datetime
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCRIPTS = ["bench_ops.py", "bench_seed_network.py", "bench_lenet.py", "bench_transformer.py"]
TAKES_NO_COMPILE = {"bench_lenet.py", "bench_transformer.py", "bench_seed_network.py"}
# Prefixes that make a script's workload names unambiguous in the plot.
PREFIX = {"bench_seed_network.py": "seed network "}


def run_script(script, threads, level, args):
    """Runs one script at `threads` threads beside `level` busy processes (None: the quiet best of
    7); returns (exit status or "timeout", stdout, stderr, seconds)."""
    cmd = [sys.executable, os.path.join(HERE, script), "--threads", str(threads)]
    if args.no_compile and script in TAKES_NO_COMPILE:
        cmd.append("--no-compile")
    if level is not None:
        cmd += ["--contention", str(level), "--nice", str(args.nice), "--figures",
                str(args.figures), "--seconds", str(args.seconds)]
    timeout = args.timeout
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = f"killed after {timeout} s"
    return rc, out, err, time.perf_counter() - start


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def tables(text):
    """Each Markdown table in text as (headers, rows of cells)."""
    found, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            current.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif current:
            if len(current) > 2:
                found.append((current[0], current[2:]))
            current = []
    return found


def graph_ratios(text):
    """(workload, Graph/PyTorch eager, Graph/JAX) from the tables that have both columns."""
    out = []
    for headers, rows in tables(text):
        torch_col = next((i for i, h in enumerate(headers)
                          if h in ("Graph / PyTorch", "Graph / PyTorch eager")), None)
        jax_col = next((i for i, h in enumerate(headers) if h.startswith("Graph / JAX")), None)
        if torch_col is None and jax_col is None:
            continue
        for row in rows:
            def num(col, row=row):
                try:
                    return float(row[col]) if col is not None else None
                except (ValueError, IndexError):
                    return None
            out.append((row[0], num(torch_col), num(jax_col)))
    return out


def summarize(out):
    """The script's output without its agreement-check lines, plus a count of them."""
    checks = [line for line in out.splitlines() if line.startswith("check:")]
    kept = "\n".join(line for line in out.splitlines() if not line.startswith("check:"))
    if checks:
        kept = (f"All {len(checks)} agreement checks passed (each names what it compares: kiln "
                f"Graph vs PyNative, frameworks with copied weights, torch.compile vs PyTorch "
                f"eager).\n\n" + kept.strip())
    return kept.strip()


def setting(threads, level, nice):
    """How a section was run, for its heading and the plot's legend."""
    text = f"{threads} thread{'s' if threads > 1 else ''}"
    if level is None:
        return text
    if level == 0:
        return text + ", no busy process (contention 0)"
    return text + f", beside {level} busy process{'es' if level > 1 else ''} (nice {nice})"


def plot(ratios, path, how):
    """Grouped bars: one group per workload, a bar per (reference, setting); `how` says how the
    times were taken."""
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print("run_all: matplotlib is not installed; no plot written (pip install matplotlib)")
        return False
    workloads = list(dict.fromkeys(w for (_, w, _, _) in ratios))
    series = []
    for where in dict.fromkeys(r[0] for r in ratios):
        for ref, idx in (("PyTorch eager", 2), ("JAX jit", 3)):
            values = {w: r[idx] for r in ratios if r[0] == where for w in [r[1]]}
            series.append((f"Graph / {ref}, {where}", [values.get(w) for w in workloads]))
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(workloads)), 5))
    width = 0.8 / max(1, len(series))
    for k, (label, values) in enumerate(series):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(workloads))]
        ax.bar([x for x, v in zip(xs, values) if v is not None],
               [v for v in values if v is not None], width, label=label)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels([w.replace(", batch", "\nbatch").replace(" (", "\n(")
                        for w in workloads], fontsize=8)
    ax.set_ylabel("kiln Graph time / other framework's time (lower is better)")
    ax.set_title(f"kiln Graph mode relative to PyTorch eager and JAX jit (CPU, {how}; "
                 "shared, noisy machine)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def run_section(script, threads, level, args):
    """Runs one script and returns (its results.md lines, its (setting, workload, Graph/PyTorch,
    Graph/JAX) ratios, whether it succeeded)."""
    where = setting(threads, level, args.nice)
    print(f"run_all: {script}, {where} ...", flush=True)
    rc, out, err, seconds = run_script(script, threads, level, args)
    lines = [f"## {script}, {where}", ""]
    if rc != 0:
        tail = "\n".join((out + "\n" + err).strip().splitlines()[-30:])
        print(f"run_all: {script}, {where}: FAILED ({rc})\n{tail}")
        return lines + [f"**FAILED** (exit status {rc}, {seconds:.0f} s). End of its output:",
                        "", "```", tail, "```", ""], [], False
    lines += [summarize(out), "", f"({seconds:.0f} s)", ""]
    return lines, [(where, PREFIX.get(script, "") + w, rt, rj)
                   for w, rt, rj in graph_ratios(out)], True


def header_lines(args, how):
    """results.md's title and the paragraph saying where, on what and how it was measured."""
    beside = (" repeats" if args.contention is None else
              ", beside the busy processes each section names (issue #16's protocol)")
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=ROOT).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, cwd=ROOT).stdout.strip()
    except OSError:
        commit, dirty = "unknown", ""
    kiln_at = subprocess.run([sys.executable, "-c", "import os, kiln; "
                              "print(os.path.dirname(os.path.abspath(kiln._C.__file__)))"],
                             capture_output=True, text=True, cwd=ROOT).stdout.strip()
    return ["# Benchmark results", "",
            f"Written by `benchmarks/run_all.py` on {datetime.datetime.now():%Y-%m-%d %H:%M}, "
            f"commit {commit}{' (with uncommitted changes)' if dirty else ''}, "
            f"{cpu_model()}, {os.cpu_count()} CPUs; kiln imported from "
            f"`{kiln_at or 'nowhere (import failed)'}`. "
            f"Times are the {how}{beside}; on a shared machine they are noisy (see "
            "docs/benchmarks.md). Plot of the Graph-mode ratios: "
            f"`{os.path.relpath(args.plot, ROOT)}`.", ""]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--no-compile", action="store_true",
                        help="skip torch.compile (it takes about a minute per workload)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per script")
    parser.add_argument("--contention", default=None, help="comma-separated numbers of busy "
                        "processes to run each script beside (e.g. 0,1,2; 0 is the quiet "
                        "baseline under the same protocol); default: the quiet best of 7")
    parser.add_argument("--nice", type=int, default=0, help="nice of the busy processes")
    parser.add_argument("--figures", type=int, default=5, help="medians per figure")
    parser.add_argument("--seconds", type=float, default=1.0, help="seconds per median")
    parser.add_argument("--results", default=os.path.join(HERE, "results.md"))
    parser.add_argument("--plot", default=os.path.join(ROOT, "docs", "benchmarks.png"))
    args = parser.parse_args()
    thread_counts = [int(t) for t in args.threads.split(",")]
    levels = [None] if args.contention is None else [int(n) for n in args.contention.split(",")]
    length = "one" if args.seconds == 1.0 else f"{args.seconds:g}"
    how = ("best of 7" if args.contention is None else
           f"worst of {args.figures} {length}-second medians")
    lines = header_lines(args, how)
    ratios, failed = [], []
    for threads in thread_counts:
        for level in levels:
            for script in SCRIPTS:
                section, found, ok = run_section(script, threads, level, args)
                lines += section
                ratios += found
                failed += [] if ok else [f"{script}, {setting(threads, level, args.nice)}"]
    with open(args.results, "w") as f:
        f.write("\n".join(lines).rstrip() + "\n")
    print(f"run_all: wrote {os.path.relpath(args.results, ROOT)}")
    if ratios and plot(ratios, args.plot, how):
        print(f"run_all: wrote {os.path.relpath(args.plot, ROOT)}")
    if failed:
        print("run_all: failed: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
