"""Writes the model-file fuzzer's seeds (tests/fuzz/corpus_model): kiln.export of tiny networks
covering dense and convolution layers, control-flow regions, nested outputs, a dynamic batch and
low-precision weights. Each file stays under the fuzzer's max_len (8 KB).

    PYTHONPATH=build/dev/python python tests/fuzz/make_model_corpus.py
"""
import pathlib

import numpy as np

import kiln as ms
from kiln import nn, ops

OUT = pathlib.Path(__file__).parent / "corpus_model"


class Small(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(3, 2)

    def construct(self, x):
        return ops.relu(self.fc(x))


class TinyConv(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, pad_mode="same", has_bias=True)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.fc = nn.Dense(8, 2)

    def construct(self, x):
        return self.fc(ops.reshape(self.pool(ops.relu(self.conv(x))), (x.shape[0], -1)))


class Loop(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(2, 2)

    def construct(self, x, n):
        acc = ops.zeros_like(x)
        i = 0
        while i < n:
            if acc.sum() > 1.0:
                acc = acc - self.fc(x)
            else:
                acc = acc + ops.sigmoid(self.fc(x))
            i += 1
        return acc, {"n": n, "tag": "loop", "none": None}, [acc * 2.0]


class Norm(nn.Cell):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm((4,), begin_norm_axis=-1, begin_params_axis=-1)

    def construct(self, x):
        return ops.softmax(self.ln(x), -1), ops.gelu(x, approximate="none").mean()


def main():
    OUT.mkdir(exist_ok=True)
    ms.set_seed(0)
    x = ms.Tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    seeds = {
        "dense": (Small(), (x,)),
        "dense_dynamic": (Small(), (ms.Tensor(shape=[None, 3], dtype=ms.float32),)),
        "conv": (TinyConv(), (ms.Tensor(np.ones((1, 1, 4, 4), np.float32)),)),
        "loop": (Loop(), (ms.Tensor(np.ones((1, 2), np.float32)), ms.Tensor(3))),
        "norm": (Norm(), (ms.Tensor(np.ones((2, 4), np.float32)),)),
    }
    half = Small()
    half.fc.weight = ms.Parameter(half.fc.weight.astype(ms.float16), name="fc.weight")
    half.fc.bias = ms.Parameter(half.fc.bias.astype(ms.float16), name="fc.bias")
    seeds["dense_fp16"] = (half, (x.astype(ms.float16),))
    for name, (net, inputs) in seeds.items():
        ms.export(net, *inputs, file_name=str(OUT / name))
        size = (OUT / f"{name}.mindir").stat().st_size
        assert size <= 6144, f"{name}: {size} bytes is over the fuzzer's seed budget"
        print(f"{name}.mindir: {size} bytes")


if __name__ == "__main__":
    main()
