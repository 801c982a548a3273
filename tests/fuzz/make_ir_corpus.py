"""Writes the IR fuzzer's seed corpus: IR printed from compiled graphs (tests/fuzz/corpus_ir).

Run after building: PYTHONPATH=build/dev/python python tests/fuzz/make_ir_corpus.py
Small shapes on purpose: the fuzz target only runs modules whose values are small.
"""

import pathlib

import numpy as np

import kiln as ms
from kiln import Tensor, nn, ops

OUT = pathlib.Path(__file__).resolve().parent / "corpus_ir"


class LeNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.features = nn.SequentialCell(
            nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(kernel_size=2, stride=2))
        self.classifier = nn.SequentialCell(nn.Flatten(), nn.Dense(4 * 4 * 4, 8), nn.ReLU(),
                                            nn.Dense(8, 3))

    def construct(self, x):
        return self.classifier(self.features(x))


class Block(nn.Cell):
    """A small transformer-style block: layer norm, attention scores, softmax, residual."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm((8,))
        self.qkv = nn.Dense(8, 24)
        self.out = nn.Dense(8, 8)

    def construct(self, x):
        h = self.norm(x)
        q, k, v = ops.split(self.qkv(h), 8, axis=-1)
        scores = ops.softmax(ops.matmul(q, k.swapaxes(-1, -2)) / 8 ** 0.5, axis=-1)
        return x + self.out(ops.matmul(scores, v))


def control_flow(x, n):
    i = ms.Tensor(0, ms.int32)
    while i < n:
        if x.sum() > 0:
            x = x * 0.5
        else:
            x = x - 1.0
        i = i + 1
    return x


def save(name, fn, *args):
    fn(*args)
    for stage in ("frontend", "optimized"):
        text = fn.graph_text(stage).replace(str(pathlib.Path(__file__).resolve()), "corpus.py")
        (OUT / f"{name}_{stage}.ir").write_text(text)


def training_step(net, loss_fn, x, y):
    optimizer = nn.Adam(net.trainable_params(), learning_rate=1e-3)
    grad_fn = ms.value_and_grad(lambda a, b: loss_fn(net(a), b), None, optimizer.parameters)

    @ms.jit
    def step(a, b):
        loss, grads = grad_fn(a, b)
        optimizer(grads)
        return loss

    return step


def main():
    OUT.mkdir(exist_ok=True)
    ms.set_seed(0)
    x = Tensor(np.random.default_rng(0).standard_normal((2, 1, 8, 8)).astype(np.float32))
    y = Tensor(np.array([0, 2], np.int32))
    lenet = LeNet()
    save("lenet_forward", ms.jit(lambda a: lenet(a)), x)
    save("lenet_train", training_step(lenet, nn.CrossEntropyLoss(), x, y), x, y)
    tokens = Tensor(np.random.default_rng(1).standard_normal((2, 4, 8)).astype(np.float32))
    block = Block()
    save("block_forward", ms.jit(lambda a: block(a)), tokens)
    save("control_flow", ms.jit(control_flow), Tensor(np.ones(3, np.float32)),
         Tensor(3, ms.int32))


if __name__ == "__main__":
    main()
