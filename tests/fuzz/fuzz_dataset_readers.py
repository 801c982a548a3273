"""Fuzz target (atheris/libFuzzer) for kiln.dataset's file readers: an idx file (MnistDataset),
a CIFAR-10 batch (Cifar10Dataset) and an image (ImageFolderDataset with decode=True). Whatever
the bytes, reading them ends in rows or a RuntimeError/ValueError: never another exception, a
crash or a hang.

    python tests/fuzz/fuzz_dataset_readers.py [libFuzzer flags] [corpus dirs]

The first byte of an input picks the reader, the rest is the file. Without a corpus directory
the target seeds one with valid files of each kind. `make fuzz-dataset-short` runs it for about
20 seconds.
"""
import os
import shutil
import sys
import tempfile

import atheris
import numpy as np

with atheris.instrument_imports(include=["kiln.dataset"]):
    import cv2

    import kiln.dataset as ds

_SCRATCH = tempfile.mkdtemp(prefix="kiln-fuzz-dataset-",
                            dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
_MNIST = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")


def _idx(magic, array):
    head = magic.to_bytes(4, "big") + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return head + array.astype(np.uint8).tobytes()


def seed_inputs():
    rng = np.random.default_rng(0)
    yield b"\x00" + _idx(0x803, rng.integers(0, 256, (2, 28, 28)))
    yield b"\x01" + rng.integers(0, 256, 2 * 3073, dtype=np.uint8).tobytes()
    for ext in (".png", ".jpg", ".bmp"):
        ok, data = cv2.imencode(ext, rng.integers(0, 256, (6, 5, 3)).astype(np.uint8))
        yield b"\x02" + data.tobytes()


def _reader(kind, payload, folder):
    if kind == 0:  # images file of two rows; a matching labels file
        with open(os.path.join(folder, _MNIST[0]), "wb") as f:
            f.write(payload)
        with open(os.path.join(folder, _MNIST[1]), "wb") as f:
            f.write(_idx(0x801, np.zeros(2)))
        return ds.MnistDataset(folder, usage="train", shuffle=False)
    if kind == 1:
        with open(os.path.join(folder, "test_batch.bin"), "wb") as f:
            f.write(payload)
        return ds.Cifar10Dataset(folder, usage="test", shuffle=False)
    os.makedirs(os.path.join(folder, "c"))
    with open(os.path.join(folder, "c", "x.img"), "wb") as f:
        f.write(payload)
    return ds.ImageFolderDataset(folder, decode=True, shuffle=False, num_parallel_workers=1)


def test_one_input(data):
    if not data:
        return
    folder = tempfile.mkdtemp(dir=_SCRATCH)
    try:
        try:
            dataset = _reader(data[0] % 3, data[1:], folder)
            for _ in dataset.create_tuple_iterator(num_epochs=1, output_numpy=True):
                pass
        except (RuntimeError, ValueError):
            pass
    finally:
        shutil.rmtree(folder)


def main():
    args = sys.argv[:]
    if not [a for a in args[1:] if not a.startswith("-")]:
        corpus = os.path.join(_SCRATCH, "corpus")
        os.makedirs(corpus)
        for i, data in enumerate(seed_inputs()):
            with open(os.path.join(corpus, f"seed{i}"), "wb") as f:
                f.write(data)
        args.append(corpus)
    atheris.Setup(args, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
