"""Eager forward of the SPEC section 4 seed network: kiln vs NumPy vs PyTorch, in one process.

Usage: PYTHONPATH=build/<dir>/python python benchmarks/bench_seed_forward.py [--threads N]
       [--contention N [--nice K]]   (beside busy processes, issue #16: see _common.py)

The network is flatten -> dense 784->512 -> relu -> dense 512->512 -> relu -> dense 512->10,
built from kiln.ops functional calls (nn.Cell is not used), with the same weights in each
framework. Reports microseconds per forward at batch 64 and batch 1, and kiln's ratio to each.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln as ms  # noqa: E402
from _common import (  # noqa: E402
    add_protocol_args,
    bench_time,
    contention_session,
    import_torch,
    protocol_header,
    table,
    use_protocol,
)
from kiln import ops  # noqa: E402

LAYERS = [(784, 512), (512, 512), (512, 10)]


def make_weights(rng):
    """nn.Dense-like (out, in) weights and biases, uniform in +-1/sqrt(in)."""
    params = []
    for fan_in, fan_out in LAYERS:
        bound = 1.0 / np.sqrt(fan_in)
        params.append((rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32),
                       rng.uniform(-bound, bound, fan_out).astype(np.float32)))
    return params


def kiln_forward(params):
    weights = [(ms.Tensor(w), ms.Tensor(b)) for w, b in params]

    def forward(x):
        x = ops.flatten(x)
        for i, (w, b) in enumerate(weights):
            x = ops.dense(x, w, b)
            if i + 1 < len(weights):
                x = ops.relu(x)
        return x
    return forward


def numpy_forward(params):
    weights = [(w.T, b) for w, b in params]  # a transposed view, like dense's weight.T

    def forward(x):
        x = x.reshape(x.shape[0], -1)
        for i, (wt, b) in enumerate(weights):
            x = x @ wt + b
            if i + 1 < len(weights):
                x = np.maximum(x, 0)
        return x
    return forward


def torch_forward(torch, params):
    weights = [(torch.from_numpy(w), torch.from_numpy(b)) for w, b in params]
    linear, relu = torch.nn.functional.linear, torch.relu

    def forward(x):
        with torch.no_grad():
            x = torch.flatten(x, 1)
            for i, (w, b) in enumerate(weights):
                x = linear(x, w, b)
                if i + 1 < len(weights):
                    x = relu(x)
            return x
    return forward


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=ms.get_num_threads())
    add_protocol_args(parser)
    args = parser.parse_args()
    use_protocol(args)
    ms.set_num_threads(args.threads)
    torch = import_torch(args.threads)
    params = make_weights(np.random.default_rng(0))
    fk, fn = kiln_forward(params), numpy_forward(params)
    ft = torch_forward(torch, params) if torch else None
    print(f"threads: {args.threads}; NumPy {np.__version__}; "
          f"PyTorch {torch.__version__ if torch else 'not installed'}\n")
    rows = []
    for batch in (64, 1):
        x = np.ones((batch, 1, 28, 28), np.float32)
        kx = ms.Tensor(x)
        tx = torch.from_numpy(x) if torch else None
        expected = fn(x)
        np.testing.assert_allclose(fk(kx).asnumpy(), expected, rtol=1e-4, atol=1e-4)
        number = 200 if batch == 64 else 2000
        tk = bench_time(lambda kx=kx: fk(kx), number) * 1e6
        tn = bench_time(lambda x=x: fn(x), number) * 1e6
        tt = bench_time(lambda tx=tx: ft(tx), number) * 1e6 if torch else None
        rows.append([batch, f"{tk:.1f}", f"{tn:.1f}", "-" if tt is None else f"{tt:.1f}",
                     f"{tk / tn:.2f}", "-" if tt is None else f"{tk / tt:.2f}"])
    for line in protocol_header():
        print(line)
    print(table(["batch", "kiln us", "NumPy us", "PyTorch us", "kiln/NumPy", "kiln/PyTorch"], rows))


if __name__ == "__main__":
    with contention_session():  # busy processes (--contention) stop with main, however it ends
        main()
