"""kiln's earlier checkpoint format ("KILNCKPT", version 1): still read by load_checkpoint.

Files saved by earlier kiln versions use it; save_checkpoint now writes MindSpore's layout. The
writer below stays for tests and fuzzing seeds (files of this format).

File layout (little-endian), version 1:

    header   magic b"KILNCKPT" | u32 version | u32 record count | u64 total file length
    record   u32 name length | name (UTF-8) | u8 dtype-name length | kiln dtype name (ASCII)
             | u32 ndim | u64 dims[ndim] | u64 data length | raw C-order data
    footer   u32 CRC32 (zlib) of every byte before it | b"KEND"

Loading never executes code and reads the file incrementally: the magic, version and total
length are checked first (a large file that is not a checkpoint costs a 24-byte read), every
length is checked against the bytes that remain before anything is allocated, names must be
unique, and the checksum is verified before anything is returned. Every problem with the
file's contents raises CheckpointError (a ValueError) naming the file and what is wrong.
"""
import os
import struct
import zlib

import numpy as np

MAGIC = b"KILNCKPT"
END_MAGIC = b"KEND"
VERSION = 1
_HEADER = struct.Struct("<8sIIQ")
_FOOTER = struct.Struct("<I4s")

# kiln dtype name -> NumPy storage dtype (bfloat16 is stored as its exact float32 values).
# A dtype added later only adds a name, so files from older versions still load.
_STORAGE = {
    "bool": "|b1", "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
    "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8", "float16": "<f2",
    "bfloat16": "<f4", "float32": "<f4", "float64": "<f8",
}


class CheckpointError(ValueError):
    """A checkpoint file that is damaged, truncated, not a checkpoint, of an unknown version or
    holding what kiln cannot load; the message names the file and the problem."""



def _dtype_name(t):
    name = str(t.dtype).lower()
    if name not in _STORAGE:
        raise TypeError(f"save_checkpoint: dtype {t.dtype} cannot be saved")
    return name


def _encode_record(name, tensor):
    dtype_name = _dtype_name(tensor)
    data = np.ascontiguousarray(tensor._read_numpy(), dtype=np.dtype(_STORAGE[dtype_name]))
    name_b = name.encode("utf-8")
    dims = tuple(int(d) for d in tensor.shape)
    head = struct.pack(f"<I{len(name_b)}sB{len(dtype_name)}sI{len(dims)}QQ", len(name_b), name_b,
                       len(dtype_name), dtype_name.encode("ascii"), len(dims), *dims,
                       data.nbytes)
    return head, data


def _write_records(f, items):
    records = [_encode_record(name, t) for name, t in items.items()]
    total = _HEADER.size + _FOOTER.size + sum(len(h) + d.nbytes for h, d in records)
    header = _HEADER.pack(MAGIC, VERSION, len(records), total)
    crc = zlib.crc32(header)
    f.write(header)
    for head, data in records:
        body = memoryview(data).cast("B") if data.nbytes else b""
        f.write(head)
        f.write(body)
        crc = zlib.crc32(body, zlib.crc32(head, crc))
    f.write(_FOOTER.pack(crc & 0xFFFFFFFF, END_MAGIC))
    f.flush()
    os.fsync(f.fileno())


_MIN_RECORD = 4 + 1 + 4 + 8        # a record with a 0-byte name, dtype, shape and data
_MAX_BYTES = 1 << 62               # beyond this a shape cannot describe a real tensor
_CHUNK = 1 << 20                   # bytes read at a time for records that are skipped


class _Reader:
    """Reads a checkpoint front to back: every length is checked against the bytes that remain
    before anything is allocated, and a running CRC32 covers every byte read."""

    def __init__(self, f, path, limit):
        self.f, self.path, self.limit = f, path, limit
        self.pos, self.crc = 0, 0

    def error(self, why):
        return CheckpointError(f"load_checkpoint: {self.path!r} is {why}")

    def _check_room(self, size, what):
        if size > self.limit - self.pos:
            raise self.error(f"corrupted: {what} ({size} bytes) runs past the end of the "
                             f"records ({self.limit - self.pos} bytes left)")

    def read(self, size, what):
        self._check_room(size, what)
        data = self.f.read(size)
        self._consumed(data, what, size)
        return data

    def unpack(self, fmt, what):
        return struct.unpack(fmt, self.read(struct.calcsize(fmt), what))

    def read_array(self, storage, dims, nbytes, what):
        """A fresh array of `dims` filled from the next `nbytes` bytes."""
        self._check_room(nbytes, what)
        arr = np.empty(nbytes // storage.itemsize, dtype=storage)
        view = memoryview(arr).cast("B")
        got = self.f.readinto(view) if nbytes else 0
        self._consumed(view[:got], what, nbytes)
        return arr.reshape(dims)

    def skip(self, nbytes, what):
        """Reads past `nbytes` bytes (for the checksum) without keeping them."""
        self._check_room(nbytes, what)
        while nbytes:
            step = min(nbytes, _CHUNK)
            self._consumed(self.f.read(step), what, step)
            nbytes -= step

    def _consumed(self, data, what, size):
        if len(data) != size:   # the file shrank while it was being read
            raise self.error(f"truncated: {what} ended after {len(data)} of {size} bytes")
        self.crc = zlib.crc32(data, self.crc)
        self.pos += size


def _read_header(f, path, file_size):
    """Checks magic, version and length before anything else is read; returns the count."""
    def bad(why):
        return CheckpointError(f"load_checkpoint: {path!r} is {why}")

    head = f.read(_HEADER.size)
    if head[:len(MAGIC)] != MAGIC:
        raise bad("not a kiln checkpoint (bad magic number)")
    if len(head) < _HEADER.size or file_size < _HEADER.size + _FOOTER.size:
        raise bad(f"truncated: {file_size} bytes is shorter than a header and footer")
    _, version, count, total = _HEADER.unpack(head)
    if version != VERSION:
        raise bad(f"format version {version}; this kiln reads version {VERSION}")
    if file_size < total:
        raise bad(f"truncated: {file_size} of {total} bytes present")
    if file_size > total:
        raise bad(f"corrupted: {file_size - total} unexpected bytes after the end "
                  f"({total} expected)")
    if count * _MIN_RECORD > total - _HEADER.size - _FOOTER.size:
        raise bad(f"corrupted: {count} records cannot fit in {total} bytes")
    return head, count


def _record_shape(reader, index, name, dtype_name):
    """A record's dims and the data length they imply, after checking both are sane."""
    (ndim,) = reader.unpack("<I", f"record {index}'s rank")
    if ndim > 64:
        raise reader.error(f"corrupted: record '{name}' claims {ndim} dimensions")
    dims = reader.unpack(f"<{ndim}Q", f"record {index}'s shape")
    itemsize = np.dtype(_STORAGE[dtype_name]).itemsize
    span = itemsize   # the bytes the shape would span with its zero dimensions taken as 1
    for d in dims:
        span *= max(d, 1)
    if span > _MAX_BYTES:
        raise reader.error(f"corrupted: record '{name}' has an impossible shape {dims}")
    (nbytes,) = reader.unpack("<Q", f"record {index}'s data length")
    expected = int(np.prod(dims, dtype=object)) * itemsize
    if nbytes != expected:
        raise reader.error(f"corrupted: record '{name}' has {nbytes} data bytes; shape {dims} "
                           f"of {dtype_name} needs {expected}")
    return dims, nbytes


def _read_record(reader, index):
    """One record's name, dtype name, shape and data length, leaving the data unread."""
    (name_len,) = reader.unpack("<I", f"record {index}'s name length")
    try:
        name = reader.read(name_len, f"record {index}'s name").decode("utf-8")
    except UnicodeDecodeError:
        raise reader.error(f"corrupted: record {index}'s name is not valid UTF-8") from None
    if not name:
        raise reader.error(f"corrupted: record {index} has an empty name")
    (dt_len,) = reader.unpack("<B", f"record {index}'s dtype length")
    dtype_name = reader.read(dt_len, f"record {index}'s dtype").decode("ascii", "replace")
    if dtype_name not in _STORAGE:
        raise reader.error(f"corrupted: record '{name}' has unknown dtype {dtype_name!r}")
    return (name, dtype_name) + _record_shape(reader, index, name, dtype_name)


def _read_checkpoint(path, keep):
    """Validates and decodes a checkpoint file into an ordered list of (name, dtype name,
    ndarray) for the names `keep` accepts, reading it incrementally: the header is checked
    before anything else is read and no allocation exceeds the bytes the file still holds."""
    with open(path, "rb") as f:
        file_size = os.fstat(f.fileno()).st_size
        head, count = _read_header(f, path, file_size)
        reader = _Reader(f, path, file_size - _FOOTER.size)
        reader.pos, reader.crc = len(head), zlib.crc32(head)
        out, seen = [], set()
        for index in range(count):
            name, dtype_name, dims, nbytes = _read_record(reader, index)
            if name in seen:
                raise reader.error(f"corrupted: the name '{name}' appears twice")
            seen.add(name)
            if keep(name):
                storage = np.dtype(_STORAGE[dtype_name])
                out.append((name, dtype_name,
                            reader.read_array(storage, dims, nbytes, f"record '{name}'s data")))
            else:
                reader.skip(nbytes, f"record '{name}'s data")
        if reader.pos != reader.limit:
            raise reader.error("corrupted: the records do not fill the file")
        footer = f.read(_FOOTER.size)
    if len(footer) != _FOOTER.size:
        raise reader.error("truncated: the footer is missing")
    crc, end = _FOOTER.unpack(footer)
    if end != END_MAGIC:
        raise reader.error("corrupted: the end marker is missing")
    if reader.crc & 0xFFFFFFFF != crc:
        raise reader.error("corrupted: the CRC32 checksum does not match the contents")
    return out


