"""Depthwise convolutions (groups == channels) at MobileNetV2's and ConvNeXt's shapes, batch 16:
forward, input gradient and weight gradient, kiln against PyTorch, each checked against the other.

Usage: PYTHONPATH=build/<dir>/python python benchmarks/bench_depthwise.py [--threads N]
       [--contention N [--nice K]]   (beside busy processes, issue #16: see _common.py)

kiln's gradients are timed as its two gradient ops (conv2d_backward_input/_weight), PyTorch's as
aten.convolution_backward asked for one gradient at a time. Prints a Markdown table of ms per call
(best of the protocol's figures) and kiln's time over PyTorch's.
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
from kiln import Tensor, ops  # noqa: E402
from kiln.ops._core import call  # noqa: E402

# (channels, height = width, stride, kernel): MobileNetV2's depthwise layers, then ConvNeXt's 7x7.
SHAPES = [(32, 112, 1, 3), (96, 112, 2, 3), (144, 56, 1, 3), (144, 56, 2, 3), (192, 28, 1, 3),
          (576, 14, 1, 3), (960, 7, 1, 3), (96, 56, 1, 7), (384, 14, 1, 7)]
BATCH = 16


def kiln_calls(x, w, dy, stride, pad, groups):
    attrs = ((stride, stride), (pad,) * 4, (1, 1), groups)
    kx, kw, kdy = Tensor(x), Tensor(w), Tensor(dy)
    return [
        lambda: ops.conv2d(kx, kw, None, stride=stride, pad_mode="pad", padding=pad,
                           groups=groups),
        lambda: call("conv2d_backward_input", (kdy, kw), (x.shape,) + attrs),
        lambda: call("conv2d_backward_weight", (kdy, kx), (w.shape,) + attrs),
    ]


def torch_calls(torch, x, w, dy, stride, pad, groups):
    tx, tw, tdy = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(dy)
    geometry = ([stride] * 2, [pad] * 2, [1, 1], False, [0, 0], groups)
    backward = torch.ops.aten.convolution_backward
    return [
        lambda: torch.nn.functional.conv2d(tx, tw, None, stride, pad, 1, groups),
        lambda: backward(tdy, tx, tw, None, *geometry, [True, False, False])[0],
        lambda: backward(tdy, tx, tw, None, *geometry, [False, True, False])[1],
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=ms.get_num_threads())
    add_protocol_args(parser)
    args = parser.parse_args()
    use_protocol(args)
    ms.set_num_threads(args.threads)
    torch = import_torch(args.threads)
    rng = np.random.default_rng(0)
    rows = []
    for channels, size, stride, k in SHAPES:
        pad = k // 2
        x = rng.standard_normal((BATCH, channels, size, size), dtype=np.float32)
        w = rng.standard_normal((channels, 1, k, k), dtype=np.float32)
        out = (size + 2 * pad - k) // stride + 1
        dy = rng.standard_normal((BATCH, channels, out, out), dtype=np.float32)
        mine = kiln_calls(x, w, dy, stride, pad, channels)
        theirs = torch_calls(torch, x, w, dy, stride, pad, channels) if torch else [None] * 3
        row = [f"{BATCH}x{channels}x{size}², {k}x{k}, stride {stride}"]
        for fk, ft in zip(mine, theirs):
            tk = bench_time(lambda f=fk: f().asnumpy(), 10) * 1e3
            if ft is None:
                row += [f"{tk:.2f}", "-", "-"]
                continue
            np.testing.assert_allclose(fk().asnumpy(), ft().numpy(), rtol=2e-3, atol=2e-2)
            tt = bench_time(ft, 10) * 1e3
            row += [f"{tk:.2f}", f"{tt:.2f}", f"{tk / tt:.2f}"]
        rows.append(row)
    headers = ["shape"]
    for what in ("forward", "input grad", "weight grad"):
        headers += [f"{what} kiln", "PyTorch", "ratio"]
    print(f"threads: {args.threads}; PyTorch {torch.__version__ if torch else 'not installed'}\n")
    print("\n".join(protocol_header() + [table(headers, rows)]))


if __name__ == "__main__":
    with contention_session():  # busy processes (--contention) stop with main, however it ends
        main()
