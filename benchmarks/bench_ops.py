"""Eager per-op dispatch overhead and matmul throughput: kiln vs NumPy vs PyTorch.

Usage: PYTHONPATH=build/<dir>/python python benchmarks/bench_ops.py [--threads N] [--peak GFLOPS]
       [--contention N [--nice K]]   (beside busy processes, issue #16: see _common.py)

Prints Markdown tables. Dispatch overhead is the time of an op on 1-element inputs, where the
arithmetic is nothing and the Python -> C++ -> kernel path is everything. Matmul throughput uses
the seed network's layer shapes in dense's layout (x @ W.T, W stored (out, in)) and is shown as
a share of the fp32 FMA peak measured on this machine with the same thread count.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln as ms  # noqa: E402
from _common import (  # noqa: E402
    PROTOCOL,
    add_protocol_args,
    bench_time,
    contention_session,
    import_torch,
    measure_peak_gflops,
    protocol_header,
    table,
    use_protocol,
)

# Under --contention a sample is this many back-to-back 1-element ops: one takes about a
# microsecond, of which perf_counter's own cost would otherwise be a visible part.
DISPATCH_INNER = 100
from kiln import ops  # noqa: E402

SEED_SHAPES = [(64, 784, 512), (64, 512, 512), (64, 512, 10), (1, 784, 512), (1, 512, 512),
               (1, 512, 10)]


def dispatch_overhead(torch):
    one = np.ones(1, np.float32)
    k, t = ms.Tensor(one), (torch.from_numpy(one.copy()) if torch else None)
    k2, n2 = ms.Tensor(np.ones((1, 1), np.float32)), np.ones((1, 1), np.float32)
    t2 = torch.from_numpy(n2.copy()) if torch else None
    cases = [
        ("add", lambda: ops.add(k, k), lambda: np.add(one, one), lambda: torch.add(t, t)),
        ("mul", lambda: ops.mul(k, k), lambda: np.multiply(one, one), lambda: torch.mul(t, t)),
        ("add scalar", lambda: ops.add(k, 1.0), lambda: np.add(one, 1.0),
         lambda: torch.add(t, 1.0)),
        ("relu", lambda: ops.relu(k), lambda: np.maximum(one, 0), lambda: torch.relu(t)),
        ("exp", lambda: ops.exp(k), lambda: np.exp(one), lambda: torch.exp(t)),
        ("operator +", lambda: k + k, lambda: one + one, lambda: t + t),
        ("matmul 1x1", lambda: ops.matmul(k2, k2), lambda: np.matmul(n2, n2),
         lambda: torch.matmul(t2, t2)),
    ]
    rows = []
    for name, fk, fn, ft in cases:
        tk = bench_time(fk, 20000, DISPATCH_INNER) * 1e6
        tn = bench_time(fn, 20000, DISPATCH_INNER) * 1e6
        tt = bench_time(ft, 20000, DISPATCH_INNER) * 1e6 if torch else None
        rows.append([name, f"{tk:.2f}", f"{tn:.2f}", "-" if tt is None else f"{tt:.2f}",
                     f"{tk / tn:.2f}", "-" if tt is None else f"{tk / tt:.2f}"])
    return table(["op (1 element)", "kiln us", "NumPy us", "PyTorch us", "kiln/NumPy",
                  "kiln/PyTorch"], rows)


def matmul_throughput(torch, peak):
    rng = np.random.default_rng(0)
    rows = []
    for m, k, n in SEED_SHAPES:
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        kx, kw = ms.Tensor(x), ms.Tensor(w)
        number = max(20, int(2e8 / (2 * m * k * n)))
        flops = 2.0 * m * k * n
        gk = flops / bench_time(lambda kx=kx, kw=kw: ops.dense(kx, kw), number) / 1e9
        gn = flops / bench_time(lambda x=x, w=w: x @ w.T, number) / 1e9
        gt = None
        if torch:
            tx, tw = torch.from_numpy(x), torch.from_numpy(w)
            t_linear = bench_time(lambda tx=tx, tw=tw: torch.nn.functional.linear(tx, tw), number)
            gt = flops / t_linear / 1e9
        pct = "-" if peak is None else f"{100 * gk / peak:.0f}%"
        rows.append([f"{m}x{k}x{n}", f"{gk:.1f}", pct, f"{gn:.1f}",
                     "-" if gt is None else f"{gt:.1f}"])
    return table(["m x k x n (x @ W.T)", "kiln GFLOP/s", "kiln % of peak", "NumPy GFLOP/s",
                  "PyTorch GFLOP/s"], rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=ms.get_num_threads())
    parser.add_argument("--peak", type=float, default=None,
                        help="fp32 peak GFLOP/s "
                             "(default: measure with benchmarks/cpp/fp32_peak.cc)")
    add_protocol_args(parser)
    args = parser.parse_args()
    use_protocol(args)
    ms.set_num_threads(args.threads)
    torch = import_torch(args.threads)
    peak = args.peak if args.peak else measure_peak_gflops(args.threads)
    print(f"threads: {args.threads}; NumPy {np.__version__}; "
          f"PyTorch {torch.__version__ if torch else 'not installed'}; "
          f"fp32 peak: {'unknown' if peak is None else f'{peak:.1f} GFLOP/s'}\n")
    how = ("best of 7 x 20000 calls" if PROTOCOL.contention is None
           else f"a sample is the mean of {DISPATCH_INNER} calls")
    print(f"Eager dispatch overhead ({how}):\n")
    timed = dispatch_overhead(torch)  # before the header: its load line is read after timing
    print("\n".join(protocol_header() + [timed]))
    print("\nMatmul throughput, seed network layer shapes:\n")
    timed = matmul_throughput(torch, peak)
    print("\n".join(protocol_header() + [timed]))


if __name__ == "__main__":
    with contention_session():  # busy processes (--contention) stop with main, however it ends
        main()
