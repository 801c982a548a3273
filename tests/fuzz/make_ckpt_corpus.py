"""Writes the kiln-made seeds of the .ckpt fuzzer (tests/fuzz/corpus_ckpt/kiln_*.ckpt): tensors
split into small slices, a string, scalars, empty tensors and a CRC trailer. The other seeds
are files MindSpore 2.10 wrote (tools/make_mindspore_ckpt_fixtures.py).

    PYTHONPATH=build/dev/python python tests/fuzz/make_ckpt_corpus.py
"""
import pathlib
import zlib

import numpy as np

from kiln import _C

OUT = pathlib.Path(__file__).parent / "corpus_ckpt"


def entry(name, type_name, arr, slice_bytes=1 << 20):
    return _C.ckpt_serialize_entry(name, type_name, list(arr.shape), arr.tobytes(), slice_bytes)


def main():
    sliced = entry("fc.weight", "Float32", np.arange(12, dtype=np.float32).reshape(3, 4), 10)
    text = np.array("kiln", dtype="<U4").tobytes()
    mixed = (entry("step", "Int32", np.array(3, np.int32))
             + entry("mask", "Bool", np.array([True, False]))
             + entry("empty", "Float16", np.zeros((0, 2), np.float16))
             + entry("bf", "BFloat16", np.array([0x3F80, 0x4000], np.uint16))
             + _C.ckpt_serialize_entry("note", "str", [0], text))
    crc = entry("w", "Float64", np.ones((2, 2)))
    crc += b"crc_num" + zlib.crc32(crc).to_bytes(10, "big")
    for name, blob in [("kiln_sliced", sliced), ("kiln_mixed", mixed), ("kiln_crc", crc)]:
        (OUT / f"{name}.ckpt").write_bytes(blob)
        print(f"{name}.ckpt: {len(blob)} bytes")


if __name__ == "__main__":
    main()
