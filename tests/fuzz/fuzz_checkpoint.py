"""Fuzz target (atheris/libFuzzer) for kiln's checkpoint loader: no input may escape as anything
but CheckpointError, and whatever loads must save and load back to the same values. Seeds are in
both layouts load_checkpoint reads: MindSpore's .ckpt (parsed in C++; tests/fuzz/fuzz_ckpt.cc
fuzzes that parser alone, much faster) and kiln's earlier "KILNCKPT" format.

    python tests/fuzz/fuzz_checkpoint.py [libFuzzer flags] [corpus dirs]

Without a corpus directory the target seeds a fresh one with checkpoints saved by kiln itself
(every dtype, scalars, empty tensors, a small network). `make fuzz-checkpoint-short` runs it
for about 25 seconds.
"""
import os
import struct
import sys
import tempfile
import zlib

import atheris
import numpy as np

# Coverage feedback from all of kiln's Python: the loader, and the Tensor and Parameter
# construction that turns what it read into values.
with atheris.instrument_imports(include=["kiln"]):
    import kiln as ms
    from kiln.train import _kiln_ckpt, serialization

HEADER_SIZE, FOOTER_SIZE = 24, 8

# A file in memory-backed storage when there is some: the loader is exercised through its
# public entry point, which opens a path.
_SCRATCH = tempfile.mkdtemp(prefix="kiln-fuzz-",
                            dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
_INPUT = os.path.join(_SCRATCH, "input.ckpt")
_RESAVED = os.path.join(_SCRATCH, "resaved.ckpt")


def _seed_objects():
    """What real checkpoints hold: every dtype, scalars, empty and multi-dim tensors."""
    ms.set_seed(0)
    yield ms.nn.Dense(3, 2)
    yield {"scalar": ms.Tensor(np.float32(1.5)), "empty": ms.Tensor(np.zeros((0, 3), np.int32))}
    for dtype in ("bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32",
                  "int64", "float16", "bfloat16", "float32", "float64"):
        values = np.arange(6).reshape(2, 3) % 3
        yield {f"t.{dtype}": ms.Tensor(values, getattr(ms, dtype))}
    yield [{"name": "ünïcode.name", "data": ms.Tensor(np.ones((1, 1, 2), np.float32))}]


def write_seed_corpus(directory):
    for i, obj in enumerate(_seed_objects()):
        path = os.path.join(directory, f"seed{i}.ckpt")
        ms.save_checkpoint(obj, path, append_dict={"note": "text"})
        loaded = ms.load_checkpoint(path)
        with open(os.path.join(directory, f"seed{i}_kiln.ckpt"), "wb") as f:
            _kiln_ckpt._write_records(f, {k: v for k, v in loaded.items() if k != "note"})


def _same(a, b):
    if list(a) != list(b):
        return False
    for k in a:
        if isinstance(a[k], str) or isinstance(b[k], str):   # a str value MindSpore appended
            if a[k] != b[k]:
                return False
        elif (a[k].dtype != b[k].dtype or a[k].shape != b[k].shape
              or not np.array_equal(a[k].asnumpy(), b[k].asnumpy(), equal_nan=True)):
            return False
    return True


def with_valid_length_and_checksum(data):
    """`data` (kiln's earlier format) with its header's total length and its footer's CRC32
    made to match, so that mutations of the records reach the parser and the tensor
    construction behind it."""
    if len(data) < HEADER_SIZE + FOOTER_SIZE or not data.startswith(_kiln_ckpt.MAGIC):
        return data
    body = data[:8 + 8] + struct.pack("<Q", len(data)) + data[HEADER_SIZE:-FOOTER_SIZE]
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF) + data[-4:]


def load_and_check(data):
    with open(_INPUT, "wb") as f:
        f.write(data)
    try:
        loaded = ms.load_checkpoint(_INPUT)
    except serialization.CheckpointError:
        return
    ms.save_checkpoint(loaded, _RESAVED)
    if not _same(loaded, ms.load_checkpoint(_RESAVED)):
        raise AssertionError("a loaded checkpoint did not survive save + load unchanged")


def test_one_input(data):
    load_and_check(data)
    repaired = with_valid_length_and_checksum(data)
    if repaired != data:
        load_and_check(repaired)


def main():
    args = sys.argv[:]
    if not [a for a in args[1:] if not a.startswith("-")]:
        corpus = os.path.join(_SCRATCH, "corpus")
        os.makedirs(corpus)
        write_seed_corpus(corpus)
        args.append(corpus)
    atheris.Setup(args, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
