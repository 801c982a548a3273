"""Checkpoints: save_checkpoint, load_checkpoint, load_param_into_net in a code-free binary format.

File layout (little-endian), version 1:

    header   magic b"KILNCKPT" | u32 version | u32 record count | u64 total file length
    record   u32 name length | name (UTF-8) | u8 dtype-name length | kiln dtype name (ASCII)
             | u32 ndim | u64 dims[ndim] | u64 data length | raw C-order data
    footer   u32 CRC32 (zlib) of every byte before it | b"KEND"

Loading never executes code: only whitelisted dtypes are accepted, every length is checked
against the bytes that remain, and the checksum is verified before any record is parsed.
Saving is atomic: the file is written to a temporary file in the same directory, fsynced and
moved over the target with os.replace, so a failure mid-save leaves the previous file intact.
"""
import os
import struct
import tempfile
import warnings
import zlib
from collections import OrderedDict

import numpy as np

from kiln import _C
from kiln.common import dtype as mstype
from kiln.common.parameter import Parameter
from kiln.common.tensor import Tensor

__all__ = ["save_checkpoint", "load_checkpoint", "load_param_into_net", "CheckpointError"]

MAGIC = b"KILNCKPT"
END_MAGIC = b"KEND"
VERSION = 1
_HEADER = struct.Struct("<8sIIQ")
_FOOTER = struct.Struct("<I4s")

# kiln dtype name -> NumPy storage dtype (bfloat16 is stored as its exact float32 values).
_STORAGE = {
    "bool": "|b1", "uint8": "|u1", "int8": "|i1", "int16": "<i2", "int32": "<i4",
    "int64": "<i8", "float16": "<f2", "bfloat16": "<f4", "float32": "<f4", "float64": "<f8",
}


class CheckpointError(ValueError):
    """A checkpoint file that is not kiln's, truncated, corrupted or of an unknown version."""


class CheckpointMismatchError(ValueError, RuntimeError):
    """A checkpoint value that does not fit the network (shape). Both a ValueError and the
    RuntimeError MindSpore raises for this case."""


def _dtype_name(t):
    name = str(t.dtype).lower()
    if name not in _STORAGE:
        raise TypeError(f"save_checkpoint: dtype {t.dtype} cannot be saved")
    return name


# ---- saving ----

def _collect(save_obj, append_dict, choice_func):
    """An ordered name -> Tensor mapping of everything to save."""
    from kiln.nn.cell import Cell  # noqa: PLC0415 - nn imports this package's siblings

    items = OrderedDict()

    def add(name, value, where):
        if not isinstance(name, str) or not name:
            raise TypeError(f"save_checkpoint: names must be non-empty str, got {name!r} "
                            f"({where})")
        if name in items:
            raise ValueError(f"save_checkpoint: the name '{name}' appears twice ({where}); "
                             f"parameter names must be unique")
        if isinstance(value, _C.TensorBase):
            tensor = value
        elif isinstance(value, (bool, int, float, np.ndarray, np.generic)):
            tensor = Tensor(value)
        else:
            raise TypeError(f"save_checkpoint: the value of '{name}' must be a Tensor, "
                            f"Parameter, ndarray or number, got {type(value).__name__}")
        if choice_func is None or choice_func(name):
            items[name] = tensor

    if isinstance(save_obj, Cell):
        for path, param in save_obj.parameters_and_names():
            add(param.name, param, f"parameter at '{path}'")
    elif isinstance(save_obj, dict):
        for name, value in save_obj.items():
            add(name, value, "save_obj dict")
    elif isinstance(save_obj, (list, tuple)):
        for entry in save_obj:
            if not isinstance(entry, dict) or "name" not in entry or "data" not in entry:
                raise TypeError("save_checkpoint: a list save_obj must hold dicts with 'name' "
                                "and 'data'")
            add(entry["name"], entry["data"], "save_obj list")
    else:
        raise TypeError(f"save_checkpoint: save_obj must be a Cell, a dict or a list of "
                        f"{{'name', 'data'}} dicts, got {type(save_obj).__name__}")
    for name, value in (append_dict or {}).items():
        add(name, value, "append_dict")
    return items


def _encode_record(name, tensor):
    dtype_name = _dtype_name(tensor)
    data = np.ascontiguousarray(tensor._read_numpy(), dtype=np.dtype(_STORAGE[dtype_name]))
    name_b = name.encode("utf-8")
    dims = tuple(int(d) for d in tensor.shape)
    head = struct.pack(f"<I{len(name_b)}sB{len(dtype_name)}sI{len(dims)}QQ", len(name_b), name_b,
                       len(dtype_name), dtype_name.encode("ascii"), len(dims), *dims,
                       data.nbytes)
    return head, data


def _write_file(path, items):
    """Writes the checkpoint to a temp file next to `path`, then os.replace()s it over."""
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"save_checkpoint: directory {directory!r} does not exist")
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            records = [_encode_record(name, t) for name, t in items.items()]
            total = _HEADER.size + _FOOTER.size + sum(len(h) + d.nbytes for h, d in records)
            header = _HEADER.pack(MAGIC, VERSION, len(records), total)
            crc = zlib.crc32(header)
            f.write(header)
            for head, data in records:
                f.write(head)
                f.write(memoryview(data).cast("B") if data.nbytes else b"")
                crc = zlib.crc32(head, crc)
                crc = zlib.crc32(memoryview(data).cast("B") if data.nbytes else b"", crc)
            f.write(_FOOTER.pack(crc & 0xFFFFFFFF, END_MAGIC))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable; not every platform can fsync a directory
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def _checkpoint_path(ckpt_file_name, who):
    if not isinstance(ckpt_file_name, (str, os.PathLike)):
        raise TypeError(f"{who}: ckpt_file_name must be a str or path, got "
                        f"{type(ckpt_file_name).__name__}")
    return os.path.abspath(os.fspath(ckpt_file_name))


def save_checkpoint(save_obj, ckpt_file_name, integrated_save=True, async_save=False,
                    append_dict=None, enc_key=None, enc_mode="AES-GCM", choice_func=None,
                    **kwargs):
    """Saves a Cell's parameters (by Parameter.name), a name -> Tensor dict, or a list of
    {'name', 'data'} dicts to ckpt_file_name (".ckpt" is appended when missing, as MindSpore
    does). append_dict adds extra name -> number/Tensor entries; choice_func(name) filters.
    The write is atomic. async_save is accepted and saves synchronously."""
    if enc_key is not None:
        raise ValueError("save_checkpoint: encrypted checkpoints (enc_key) are not supported")
    if append_dict is not None and not isinstance(append_dict, dict):
        raise TypeError(f"save_checkpoint: append_dict must be a dict, got "
                        f"{type(append_dict).__name__}")
    path = _checkpoint_path(ckpt_file_name, "save_checkpoint")
    if not path.endswith(".ckpt"):
        path += ".ckpt"
    _write_file(path, _collect(save_obj, append_dict, choice_func))


# ---- loading ----

def _parse(blob, path):
    """Validates and decodes a checkpoint's bytes into an ordered name -> ndarray/dtype list."""
    def bad(why):
        return CheckpointError(f"load_checkpoint: {path!r} is {why}")

    n = len(blob)
    if n < len(MAGIC) or blob[:len(MAGIC)] != MAGIC:
        raise bad("not a kiln checkpoint (bad magic number)")
    if n < _HEADER.size + _FOOTER.size:
        raise bad(f"truncated: {n} bytes is shorter than a header and footer")
    _, version, count, total = _HEADER.unpack_from(blob, 0)
    if version != VERSION:
        raise bad(f"format version {version}; this kiln reads version {VERSION}")
    if n < total:
        raise bad(f"truncated: {n} of {total} bytes present")
    if n > total:
        raise bad(f"corrupted: {n - total} unexpected bytes after the end ({total} expected)")
    crc, end = _FOOTER.unpack_from(blob, n - _FOOTER.size)
    if end != END_MAGIC:
        raise bad("corrupted: the end marker is missing")
    if zlib.crc32(memoryview(blob)[:n - _FOOTER.size]) & 0xFFFFFFFF != crc:
        raise bad("corrupted: the CRC32 checksum does not match the contents")
    limit = n - _FOOTER.size
    pos = _HEADER.size
    out = []

    def take(size, what):
        nonlocal pos
        if size < 0 or pos + size > limit:
            raise bad(f"corrupted: record {len(out)}'s {what} ({size} bytes) runs past the end")
        start = pos
        pos += size
        return start

    for _ in range(count):
        (name_len,) = struct.unpack_from("<I", blob, take(4, "name length"))
        name = bytes(blob[take(name_len, "name"):pos]).decode("utf-8", errors="strict")
        (dt_len,) = struct.unpack_from("<B", blob, take(1, "dtype length"))
        dtype_name = bytes(blob[take(dt_len, "dtype"):pos]).decode("ascii", errors="replace")
        if dtype_name not in _STORAGE:
            raise bad(f"corrupted: record '{name}' has unknown dtype {dtype_name!r}")
        (ndim,) = struct.unpack_from("<I", blob, take(4, "rank"))
        if ndim > 64:
            raise bad(f"corrupted: record '{name}' claims {ndim} dimensions")
        dims = struct.unpack_from(f"<{ndim}Q", blob, take(8 * ndim, "shape"))
        (nbytes,) = struct.unpack_from("<Q", blob, take(8, "data length"))
        storage = np.dtype(_STORAGE[dtype_name])
        expected = int(np.prod(dims, dtype=np.float64)) * storage.itemsize if dims else \
            storage.itemsize
        if nbytes != expected:
            raise bad(f"corrupted: record '{name}' has {nbytes} data bytes; shape {dims} of "
                      f"{dtype_name} needs {expected}")
        start = take(nbytes, "data")
        arr = np.frombuffer(blob, dtype=storage, count=nbytes // storage.itemsize,
                            offset=start).reshape(dims).copy()
        out.append((name, dtype_name, arr))
    if pos != limit:
        raise bad("corrupted: the records do not fill the file")
    return out


def _prefix_list(value, who, name):
    if value is None:
        return ()
    values = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(v, str) and v for v in values):
        raise TypeError(f"{who}: {name} must be a str or a list of non-empty str, got {value!r}")
    return values


def load_checkpoint(ckpt_file_name, net=None, strict_load=False, filter_prefix=None,
                    dec_key=None, dec_mode="AES-GCM", specify_prefix=None, choice_func=None):
    """Reads a checkpoint into an ordered dict of name -> Parameter (loaded into `net` too when
    given). filter_prefix drops names with those prefixes; specify_prefix keeps only those."""
    if dec_key is not None:
        raise ValueError("load_checkpoint: encrypted checkpoints (dec_key) are not supported")
    path = _checkpoint_path(ckpt_file_name, "load_checkpoint")
    if not os.path.isfile(path) and os.path.isfile(path + ".ckpt"):
        path += ".ckpt"  # save_checkpoint appends the suffix; accept the name without it
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load_checkpoint: checkpoint file {path!r} does not exist")
    filters = _prefix_list(filter_prefix, "load_checkpoint", "filter_prefix")
    specify = _prefix_list(specify_prefix, "load_checkpoint", "specify_prefix")
    with open(path, "rb") as f:
        blob = f.read()
    params = OrderedDict()
    for name, dtype_name, arr in _parse(blob, path):
        if filters and name.startswith(filters):
            continue
        if specify and not name.startswith(specify):
            continue
        if choice_func is not None and not choice_func(name):
            continue
        dtype = mstype.to_dtype(dtype_name)
        tensor = Tensor(arr, dtype) if dtype is mstype.bfloat16 else Tensor(arr)
        params[name] = Parameter(tensor, name=name)
    if net is not None:
        load_param_into_net(net, params, strict_load=strict_load)
    return params


def _find(name, parameter_dict, strict_load):
    """The checkpoint key for a network parameter name (suffix match unless strict)."""
    if name in parameter_dict:
        return name
    if strict_load:
        return None
    matches = [k for k in parameter_dict
               if k.endswith("." + name) or name.endswith("." + k)]
    return matches[0] if len(matches) == 1 else None


def load_param_into_net(net, parameter_dict, strict_load=False):
    """Copies checkpoint values into net's parameters (in place, by Parameter.name).

    Returns (param_not_load, ckpt_not_load): the network parameters that got no value and the
    checkpoint entries that were not used. A shape mismatch raises; so does any missing
    parameter when strict_load=True (otherwise a warning names them). With strict_load=False
    a name that is missing exactly may match a unique checkpoint name by dotted suffix.
    """
    from kiln.nn.cell import Cell  # noqa: PLC0415

    if not isinstance(net, Cell):
        raise TypeError(f"load_param_into_net: net must be a Cell, got {type(net).__name__}")
    if not isinstance(parameter_dict, dict):
        raise TypeError(f"load_param_into_net: parameter_dict must be a dict, got "
                        f"{type(parameter_dict).__name__}")
    param_not_load, used = [], set()
    for _, param in net.parameters_and_names():
        key = _find(param.name, parameter_dict, strict_load)
        if key is None:
            param_not_load.append(param.name)
            continue
        value = parameter_dict[key]
        if not isinstance(value, _C.TensorBase):
            value = Tensor(np.asarray(value))
        if tuple(value.shape) != tuple(param.shape):
            raise CheckpointMismatchError(
                f"load_param_into_net: parameter '{param.name}' has shape "
                f"{tuple(param.shape)} in the network but shape {tuple(value.shape)} in the "
                f"checkpoint (entry '{key}')")
        if value.dtype != param.dtype:
            if strict_load and value.dtype.is_floating_point != param.dtype.is_floating_point:
                raise CheckpointMismatchError(
                    f"load_param_into_net: parameter '{param.name}' is {param.dtype} in the "
                    f"network but {value.dtype} in the checkpoint")
            value = value.astype(param.dtype)
        param.set_data(value)
        used.add(key)
    ckpt_not_load = [k for k in parameter_dict if k not in used]
    if param_not_load:
        message = (f"load_param_into_net: {len(param_not_load)} network parameter(s) were not "
                   f"in the checkpoint: {param_not_load}")
        if strict_load:
            raise ValueError(message)
        warnings.warn(message, stacklevel=2)
    return param_not_load, ckpt_not_load
