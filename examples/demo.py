"""kiln's main demo: an MLP and a LeNet-style conv net learn scikit-learn's 8x8 handwritten digits.

Run: python examples/demo.py [--epochs N] [--batch-size B] [--seed S] [--threads T]
It is plain MindSpore code (only the import line differs): batches from kiln.dataset
(NumpySlicesDataset, shuffle, batch), nn.Cell models, CrossEntropyLoss, Adam, and the
``value_and_grad(forward_fn, None, optimizer.parameters)`` training idiom. It reports the time
the loop waited for data next to the time of a step.
Exits with status 1 if a model stays below 97% test accuracy.
"""
import argparse
import sys
import time

import numpy as np

import kiln as ms
import kiln.dataset as ds
from kiln import Tensor, nn

TARGET_ACCURACY = 0.97


def load_digits_split(seed, test_fraction=0.2):
    """scikit-learn's 1797 digit images (8x8, values 0..16), standardised, split train/test."""
    try:
        from sklearn.datasets import load_digits  # noqa: PLC0415 - optional dependency
    except ImportError:
        sys.exit("demo.py needs scikit-learn (pip install scikit-learn) for its digits data set")
    digits = load_digits()
    images = digits.images.astype(np.float32)[:, None, :, :]      # (N, 1, 8, 8)
    labels = digits.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(labels))
    n_test = int(len(labels) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    mean, std = images[train].mean(), images[train].std()
    images = (images - mean) / std
    return (images[train], labels[train]), (images[test], labels[test])


class MLP(nn.Cell):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.layers = nn.SequentialCell(
            nn.Dense(64, 128), nn.ReLU(),
            nn.Dense(128, 64), nn.ReLU(),
            nn.Dense(64, 10))

    def construct(self, x):
        return self.layers(self.flatten(x))


class LeNet(nn.Cell):
    """LeNet-style: two conv + max-pool stages, then a small classifier (8x8 -> 4x4 -> 2x2)."""

    def __init__(self):
        super().__init__()
        self.features = nn.SequentialCell(
            nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(kernel_size=2, stride=2))
        self.flatten = nn.Flatten()
        self.classifier = nn.SequentialCell(nn.Dense(32 * 2 * 2, 64), nn.ReLU(), nn.Dense(64, 10))

    def construct(self, x):
        return self.classifier(self.flatten(self.features(x)))


class ProgressBar:
    """A one-line progress bar on stderr showing the running loss (one line per epoch when
    stderr is not a terminal, so logs stay readable)."""

    def __init__(self, name, total, width=24):
        self.name, self.total, self.width = name, total, width
        self.tty = sys.stderr.isatty()

    def update(self, epoch, epochs, done, loss):
        if not self.tty and done < self.total:
            return
        filled = self.width * done // self.total
        bar = "#" * filled + "-" * (self.width - filled)
        line = (f"{self.name:6s} epoch {epoch:2d}/{epochs} [{bar}] {done:3d}/{self.total} "
                f"loss {loss:.4f}")
        sys.stderr.write(("\r" + line) if self.tty else line + "\n")
        if self.tty and done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


class TimedIterator:
    """Wraps a dataset iterator, adding up the time the loop spends waiting for a batch."""

    def __init__(self, iterator):
        self.iterator, self.seconds = iterator, 0.0

    def __iter__(self):
        return self

    def __next__(self):
        start = time.perf_counter()
        try:
            return next(self.iterator)
        finally:
            self.seconds += time.perf_counter() - start


def accuracy(net, images, labels):
    net.set_train(False)
    logits = net(Tensor(images)).asnumpy()
    return float((logits.argmax(axis=1) == labels).mean())


def train(name, net, data, epochs, batch_size, learning_rate, seed, graph=False):
    """Trains net; with graph=True the whole step (forward, gradients, Adam) is one compiled
    graph (ms.jit), otherwise it runs op by op (PyNative)."""
    (x_train, y_train), (x_test, y_test) = data
    loss_fn = nn.CrossEntropyLoss()
    optimizer = nn.Adam(net.trainable_params(), learning_rate=learning_rate)

    def forward_fn(images, labels):
        logits = net(images)
        return loss_fn(logits, labels), logits

    grad_fn = ms.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=True)

    def train_step(images, labels):
        (loss, _), grads = grad_fn(images, labels)
        optimizer(grads)
        return loss

    if graph:
        train_step = ms.jit(train_step)
    ds.config.set_seed(seed)
    train_set = ds.NumpySlicesDataset({"image": x_train, "label": y_train}, shuffle=True)
    train_set = train_set.batch(batch_size)
    batches = TimedIterator(train_set.create_tuple_iterator(num_epochs=epochs))
    steps_per_epoch = train_set.get_dataset_size()
    bar = ProgressBar(name, steps_per_epoch)
    step_seconds, steps = 0.0, 0
    for epoch in range(1, epochs + 1):
        net.set_train()
        running = 0.0
        for i, (images, labels) in enumerate(batches):
            start = time.perf_counter()
            loss = train_step(images, labels)
            step_seconds += time.perf_counter() - start
            steps += 1
            loss_value = float(loss.asnumpy())
            running = loss_value if i == 0 else 0.9 * running + 0.1 * loss_value
            bar.update(epoch, epochs, i + 1, running)
    acc = accuracy(net, x_test, y_test)
    n_params = sum(p.size for p in net.trainable_params())
    print(f"{name}: {n_params} parameters, test accuracy {acc * 100:.2f}% "
          f"({len(y_test)} images), {step_seconds / steps * 1000:.2f} ms per training step "
          f"(batch {batch_size}, {steps} steps, {step_seconds:.1f} s); waited for data "
          f"{batches.seconds / steps * 1000:.3f} ms per step "
          f"({batches.seconds / step_seconds * 100:.1f}% of step time)")
    return acc, step_seconds / steps


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    # The digits models are tiny (a 32x128 matmul at most): handing such ops to other threads
    # costs more than the work, and far more when the cores are shared. One thread by default.
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--mode", choices=("both", "pynative", "graph"), default="both")
    args = parser.parse_args(argv)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_num_threads(args.threads)
    ms.set_seed(args.seed)
    data = load_digits_split(args.seed)
    print(f"kiln {ms.__version__}: digits 8x8, {len(data[0][1])} training / {len(data[1][1])} "
          f"test images")
    start = time.perf_counter()
    modes = {"both": ("PyNative", "Graph"), "pynative": ("PyNative",), "graph": ("Graph",)}
    results = {}
    for mode in modes[args.mode]:
        for name, cls in (("MLP", MLP), ("LeNet", LeNet)):
            ms.set_seed(args.seed)  # the same initial weights in both modes
            results[(name, mode)] = train(f"{name} {mode}", cls(), data, args.epochs,
                                          args.batch_size, 3e-3, args.seed, mode == "Graph")
    print(f"\n{'model':8s} {'mode':9s} {'test accuracy':>14s} {'ms / step':>10s}")
    for (name, mode), (acc, seconds) in results.items():
        print(f"{name:8s} {mode:9s} {acc * 100:13.2f}% {seconds * 1000:10.2f}")
    print(f"total time {time.perf_counter() - start:.1f} s, graphs compiled: "
          f"{ms.get_jit_stats()['compiles']}")
    failed = [f"{name} ({mode})" for (name, mode), (acc, _) in results.items()
              if acc < TARGET_ACCURACY]
    if failed:
        print(f"below the {TARGET_ACCURACY:.0%} target: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
