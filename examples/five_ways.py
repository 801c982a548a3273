"""The seed network (SPEC §4) run, unchanged, in each of the five ways users enable a mode.

Run: .venv/bin/python examples/five_ways.py
"""

import numpy as np

import kiln as ms
from kiln import Tensor, nn


class Network(nn.Cell):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.dense_relu_sequential = nn.SequentialCell(
            nn.Dense(28 * 28, 512), nn.ReLU(), nn.Dense(512, 512), nn.ReLU(), nn.Dense(512, 10)
        )

    def construct(self, x):
        x = self.flatten(x)
        return self.dense_relu_sequential(x)


class JitConstructNetwork(Network):
    @ms.jit
    def construct(self, x):
        x = self.flatten(x)
        return self.dense_relu_sequential(x)


def build(cls=Network):
    ms.set_seed(0)  # the same weights every way, so the results can be compared
    return cls()


def run(x):
    net = build()
    return net(x)


def five_ways(x):
    """Returns {way: logits} for the five ways."""
    results = {}
    ms.set_context(mode=ms.PYNATIVE_MODE)
    results["1. PYNATIVE_MODE"] = build()(x)
    ms.set_context(mode=ms.GRAPH_MODE)
    results["2. GRAPH_MODE"] = build()(x)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    results["3. @jit function building Network()"] = ms.jit(run)(x)
    run_with_jit = ms.jit(run)
    results["4. ms.jit(run) transform"] = run_with_jit(x)
    results["5. @jit on construct"] = build(JitConstructNetwork)(x)
    return results


def main():
    x = Tensor(np.ones([64, 1, 28, 28]).astype(np.float32))
    results = five_ways(x)
    reference = results["1. PYNATIVE_MODE"].asnumpy()
    for way, logits in results.items():
        diff = np.abs(logits.asnumpy() - reference).max()
        print(f"{way:40s} logits {logits.shape}  max |diff| vs PyNative = {diff:.2e}")
    print("plain run(x) still runs eagerly:", run(x).shape)
    print("jit stats:", ms.get_jit_stats())


if __name__ == "__main__":
    main()
