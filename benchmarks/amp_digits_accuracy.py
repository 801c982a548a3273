"""Does bf16 mixed precision cost accuracy? The digits demo's MLP and LeNet (examples/demo.py)
trained in float32 and in bfloat16 (kiln.amp level O2: float32 master weights, Adam on them),
each over 3 seeds (initial weights and shuffling) on one fixed train/test split, Graph mode.
Issue #14's target: the bf16 mean test accuracy within 0.5 points of float32's.

Run: PYTHONPATH=build/rel/python python benchmarks/amp_digits_accuracy.py [--epochs 20]
Exits with status 1 when a model misses the target.
"""
import argparse
import contextlib
import io
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))
import kiln as ms  # noqa: E402
from demo import MLP, LeNet, load_digits_split, train  # noqa: E402
from kiln import amp  # noqa: E402

SPLIT_SEED = 0  # the one train/test split every run uses
TARGET_POINTS = 0.5


def run(cls, data, seed, bf16, epochs):
    ms.set_seed(seed)
    net = cls()
    if bf16:
        net = amp.auto_mixed_precision(net, "O2", dtype=ms.bfloat16)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        acc, _ = train(cls.__name__, net, data, epochs, 32, 3e-3, seed, graph=True)
    return acc * 100


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    ms.set_num_threads(1)
    data = load_digits_split(SPLIT_SEED)
    print(f"digits: {len(data[0][1])} training / {len(data[1][1])} test images (split seed "
          f"{SPLIT_SEED}), {args.epochs} epochs, seeds {args.seeds}")
    print("| model | float32 accuracy (mean of seeds) | bfloat16 O2 | difference (points) |")
    print("|---|---|---|---|")
    failed = []
    for cls in (MLP, LeNet):
        f32 = [run(cls, data, s, False, args.epochs) for s in args.seeds]
        b16 = [run(cls, data, s, True, args.epochs) for s in args.seeds]
        diff = np.mean(b16) - np.mean(f32)
        runs = lambda accs: ", ".join(f"{a:.2f}" for a in accs)  # noqa: E731
        print(f"| {cls.__name__} | {np.mean(f32):.2f}% ({runs(f32)}) | {np.mean(b16):.2f}% "
              f"({runs(b16)}) | {diff:+.2f} |")
        if diff < -TARGET_POINTS:
            failed.append(cls.__name__)
    if failed:
        print(f"more than {TARGET_POINTS} points below float32: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
