"""Writes the MindSpore-made fixtures of kiln's MindIR import test (tests/fixtures/mindspore):
MindIR files that MindSpore 2.10 exports, with an input and the output MindSpore computes.

Runs under MindSpore, never kiln (a side venv: pip install mindspore==2.10.0 "numpy<2"):

    /path/to/ms-venv/bin/python tools/make_mindspore_fixtures.py [OUT_DIR] [--seed-network]

--seed-network also writes the full seed network (2.6 MB: checked by hand, not committed).
"""
import pathlib
import sys

import mindspore as ms
import numpy as np
from _networks import lenet_class, mlp_class  # tools/_networks.py
from mindspore import nn, ops

Mlp, LeNet = mlp_class(nn), lenet_class(nn)


class Ops(nn.Cell):
    """Elementwise primitives with constant operands, softmax, reshape and transpose."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(6, 6)

    def construct(self, x):
        y = ops.sigmoid(self.fc(x)) * 2.0 - ops.tanh(x) + ops.exp(x * 0.1)
        y = ops.transpose(ops.reshape(y, (2, 3, 2)), (0, 2, 1))
        return ops.softmax(ops.reshape(y, (2, 6)), -1)


def write(net, x, out, name):
    ms.export(net, ms.Tensor(x), file_name=str(out / name), file_format="MINDIR")
    y = net(ms.Tensor(x)).asnumpy()
    np.savez(out / f"{name}_io.npz", x=x, y=y)
    print(f"{name}.mindir: {(out / f'{name}.mindir').stat().st_size} bytes")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out = pathlib.Path(args[0] if args else pathlib.Path(__file__).parent.parent /
                       "tests/fixtures/mindspore")
    out.mkdir(parents=True, exist_ok=True)
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)
    rng = np.random.default_rng(0)
    write(Mlp(32), rng.standard_normal((3, 1, 28, 28)).astype(np.float32), out, "mlp")
    write(LeNet(), rng.standard_normal((2, 1, 28, 28)).astype(np.float32), out, "lenet")
    write(Ops(), rng.standard_normal((2, 6)).astype(np.float32), out, "ops")
    if "--seed-network" in sys.argv:
        write(Mlp(512), rng.standard_normal((4, 1, 28, 28)).astype(np.float32), out, "seed")


if __name__ == "__main__":
    main()
