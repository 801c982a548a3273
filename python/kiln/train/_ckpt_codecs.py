"""MindSpore's .ckpt layout and safetensors files: kiln values <-> checkpoint entries.

An entry is (name, tensor_type, dims, raw little-endian bytes), tensor_type being MindSpore's
name of the dtype ("Float32", "BFloat16", ..., "str" for a string value). The .ckpt protobuf is
parsed and written by the engine (csrc/engine/checkpoint_file.h, fuzzed); safetensors files by
the safetensors library, whose raw-bytes API carries bfloat16 without a NumPy bfloat16 type.
"""
import json
import struct
import zlib

import numpy as np

from kiln import _C
from kiln.common import dtype as mstype
from kiln.common.parameter import Parameter
from kiln.common.tensor import Tensor
from kiln.train._kiln_ckpt import CheckpointError

try:
    import safetensors
except ImportError:   # a dependency of kiln; only format="safetensors" needs it
    safetensors = None

# tensor_type -> NumPy storage; bfloat16 travels as its 16 raw bits.
_NUMPY = {
    "Bool": "|b1", "Int8": "|i1", "UInt8": "|u1", "Int16": "<i2", "UInt16": "<u2",
    "Int32": "<i4", "UInt32": "<u4", "Int64": "<i8", "UInt64": "<u8", "Float16": "<f2",
    "BFloat16": "<u2", "Float32": "<f4", "Float64": "<f8",
}
# tensor_type <-> the dtype names of safetensors' header (read) and TensorSpec (write).
_ST_HEADER = {
    "Bool": "BOOL", "Int8": "I8", "UInt8": "U8", "Int16": "I16", "UInt16": "U16", "Int32": "I32",
    "UInt32": "U32", "Int64": "I64", "UInt64": "U64", "Float16": "F16", "BFloat16": "BF16",
    "Float32": "F32", "Float64": "F64",
}
_FROM_ST_HEADER = {v: k for k, v in _ST_HEADER.items()}
_CRC_MARKER = b"crc_num"


def entry_of(name, value):
    """The entry of a Tensor/Parameter or a str (MindSpore saves strings appended to a file)."""
    if isinstance(value, str):
        text = np.array(value, dtype=f"<U{max(len(value), 1)}")
        return name, "str", (0,), text.tobytes()
    type_name = str(value.dtype)
    if type_name not in _NUMPY:
        raise TypeError(f"save_checkpoint: '{name}' has dtype {value.dtype}, which a checkpoint "
                        f"cannot hold")
    arr = value._read_numpy()
    if type_name == "BFloat16":  # exact: every value is a bfloat16, its low 16 bits are zero
        arr = (np.ascontiguousarray(arr, np.float32).view("<u4") >> 16).astype("<u2")
    data = np.ascontiguousarray(arr, dtype=np.dtype(_NUMPY[type_name])).tobytes()
    return name, type_name, tuple(int(d) for d in value.shape), data


def value_of(entry, path):
    """A Parameter named after the entry (or the str it holds)."""
    name, type_name, dims, data = entry
    if type_name == "str":   # UTF-32 code units, NUL-padded at the end as NumPy writes them
        try:
            return data.decode("utf-32-le").rstrip("\x00")
        except UnicodeDecodeError:
            raise CheckpointError(f"load_checkpoint: {path!r} is damaged: the str entry "
                                  f"'{name}' is not valid UTF-32") from None
    if type_name not in _NUMPY:
        raise CheckpointError(f"load_checkpoint: {path!r}: entry '{name}' has tensor type "
                              f"{type_name!r}, which kiln does not load")
    arr = np.frombuffer(data, np.dtype(_NUMPY[type_name])).reshape(dims)
    if type_name == "Bool":     # any nonzero byte is True, as a C++ bool read would not promise
        arr = arr.view(np.uint8) != 0
    if type_name == "BFloat16":
        tensor = Tensor((arr.astype("<u4") << 16).view("<f4"), mstype.bfloat16)
    else:
        tensor = Tensor(arr.copy())
    return Parameter(tensor, name=name)


# ---- MindSpore's .ckpt ----

def write_ckpt(f, entries, crc_check):
    """Writes entries as MindSpore does, with its "crc_num" trailer when crc_check."""
    crc = 0
    for name, type_name, dims, data in entries:
        chunk = _C.ckpt_serialize_entry(name, type_name, list(dims), data)
        f.write(chunk)
        if crc_check:
            crc = zlib.crc32(chunk, crc)
    if crc_check:
        f.write(_CRC_MARKER + (crc & 0xFFFFFFFF).to_bytes(10, "big"))


def read_ckpt(f, path):
    """Every entry of an open .ckpt file (read whole; the engine checks it). A file whose first
    byte starts no checkpoint value is refused before the rest is read."""
    first = f.read(1)
    if not first:
        raise CheckpointError(f"load_checkpoint: {path!r} is empty (0 bytes)")
    if first != b"\x0a":
        hint = "; pass format='safetensors'" if str(path).endswith(".safetensors") else ""
        raise CheckpointError(f"load_checkpoint: {path!r} is not a checkpoint (neither "
                              f"MindSpore's .ckpt layout nor kiln's earlier format){hint}")
    data = first + f.read()
    try:
        return _C.ckpt_parse(np.frombuffer(data, np.uint8))
    except ValueError as e:
        raise CheckpointError(f"load_checkpoint: {path!r} is not a checkpoint kiln can read: "
                              f"{e}") from None


def has_crc(f):
    """Whether an open .ckpt file ends with MindSpore's CRC trailer (it is checked on parse)."""
    f.seek(0, 2)
    if f.tell() < len(_CRC_MARKER) + 10:
        return False
    f.seek(-(len(_CRC_MARKER) + 10), 2)
    found = f.read(len(_CRC_MARKER)) == _CRC_MARKER
    f.seek(0)
    return found


# ---- safetensors ----

def _safetensors():
    if safetensors is None:
        raise ImportError("format='safetensors' needs the safetensors package (pip install "
                          "'safetensors>=0.8'; kiln's requirements include it)")
    if not hasattr(safetensors, "TensorSpec"):
        raise ImportError(f"format='safetensors' needs safetensors 0.8 or newer, found "
                          f"{safetensors.__version__}")
    return safetensors


def _crc_of(entries):
    """MindSpore's safetensors crc_num: CRC32 over each name and its bytes, in name order."""
    crc = 0
    for name, _, _, data in sorted(entries, key=lambda e: e[0]):
        crc = zlib.crc32(data, zlib.crc32(name.encode("utf-8"), crc))
    return crc & 0xFFFFFFFF


def write_safetensors(f, entries, crc_check):
    """Writes entries as a safetensors file with MindSpore's metadata."""
    st = _safetensors()
    specs, keep = {}, []
    for name, type_name, dims, data in entries:
        if type_name == "str":
            raise TypeError(f"save_checkpoint: '{name}' is a str; format='safetensors' holds "
                            f"tensors only")
        buf = np.frombuffer(data, np.uint8) if data else np.zeros(1, np.uint8)
        keep.append(buf)  # TensorSpec holds a raw pointer: the buffer must outlive serialize
        specs[name] = st.TensorSpec(dtype=type_name.lower(),
                                    shape=list(dims), data_ptr=buf.ctypes.data,
                                    data_len=len(data))
    metadata = {"format": "ms"}
    if crc_check:
        metadata["crc_num"] = str(_crc_of(entries))
    f.write(bytes(st.serialize(specs, metadata=metadata)))
    del keep


def _reject_duplicate_names(data, path):
    """safetensors keeps one of two tensors with the same name; kiln refuses the file. Only the
    JSON header (its length checked by the library first) is read here."""
    (length,) = struct.unpack("<Q", data[:8])

    def pairs(items):
        names = [k for k, _ in items]
        for k in names:
            if names.count(k) > 1:
                raise CheckpointError(f"load_checkpoint: {path!r} is damaged: the name '{k}' "
                                      f"appears twice")
        return dict(items)

    json.loads(data[8:8 + length], object_pairs_hook=pairs)


def read_safetensors(f, path, crc_check):
    """Every entry of an open safetensors file, in name order, and its metadata."""
    st = _safetensors()
    data = f.read()
    try:
        raw = st.deserialize(data)
    except Exception as e:   # SafetensorError is not a ValueError; its message says what
        raise CheckpointError(f"load_checkpoint: {path!r} is not a safetensors file kiln can "
                              f"read: {e}") from None
    _reject_duplicate_names(data, path)
    metadata = _metadata(data)
    entries = []
    for name, info in sorted(raw, key=lambda item: item[0]):
        if info["dtype"] not in _FROM_ST_HEADER or metadata.get(name) == "Int4":
            raise CheckpointError(f"load_checkpoint: {path!r}: tensor '{name}' has dtype "
                                  f"{metadata.get(name, info['dtype'])}, which kiln does not "
                                  f"load")
        entries.append((name, _FROM_ST_HEADER[info["dtype"]], tuple(info["shape"]),
                        bytes(info["data"])))
    if crc_check and "crc_num" in metadata and str(_crc_of(entries)) != metadata["crc_num"]:
        raise CheckpointError(f"load_checkpoint: {path!r} is damaged: its CRC32 does not match "
                              f"the crc_num in its metadata")
    return entries, metadata


def _metadata(data):
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + length]).get("__metadata__") or {}
