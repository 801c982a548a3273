"""Checkpoints: save_checkpoint, load_checkpoint, load_param_into_net in a code-free binary format.

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

Saving is atomic: the file is written to a temporary file in the same directory, fsynced and
moved over the target with os.replace, so a failure mid-save leaves the previous file intact.
The temporary file is named ".<target>.<random>.kiln-tmp" and its writer holds an exclusive
flock on it until the rename; a killed writer's lock dies with it, so the next save into the
same directory deletes every such file nobody holds a lock on (see _remove_stale_temps).
"""
import os
import re
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
from kiln.nn.cell import Cell

try:
    import fcntl
except ImportError:   # not POSIX: a failed save still removes its temp file, a killed one cannot
    fcntl = None

__all__ = ["save_checkpoint", "load_checkpoint", "load_param_into_net", "CheckpointError"]

MAGIC = b"KILNCKPT"
END_MAGIC = b"KEND"
VERSION = 1
_HEADER = struct.Struct("<8sIIQ")
_FOOTER = struct.Struct("<I4s")
# Temp files: "." + target (always "*.ckpt") + "." + mkstemp's 8 random characters + suffix.
_TEMP_SUFFIX = ".kiln-tmp"
_TEMP_NAME = re.compile(r"^\..+\.ckpt\.[A-Za-z0-9_]{8}" + re.escape(_TEMP_SUFFIX) + "$")

# kiln dtype name -> NumPy storage dtype (bfloat16 is stored as its exact float32 values).
# A dtype added later only adds a name, so files from older versions still load.
_STORAGE = {
    "bool": "|b1", "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
    "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8", "float16": "<f2",
    "bfloat16": "<f4", "float32": "<f4", "float64": "<f8",
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


def _create_locked_temp(directory, target):
    """A new temp file for `target` in `directory`, flocked by this process until it closes
    the descriptor. Retried when a cleaner deleted the file between creation and locking."""
    while True:
        fd, tmp = tempfile.mkstemp(prefix=f".{target}.", suffix=_TEMP_SUFFIX, dir=directory)
        if fcntl is None:
            return fd, tmp
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:   # no locks on this filesystem: cleaners cannot lock it either
            return fd, tmp
        if os.fstat(fd).st_nlink > 0:
            return fd, tmp
        os.close(fd)


def _remove_stale_temps(directory):
    """Deletes the temp files of saves into `directory` whose process died mid-save: a live
    writer holds its file's lock until the rename, and the kernel drops a dead one's lock."""
    if fcntl is None:
        return
    try:
        names = [n for n in os.listdir(directory) if _TEMP_NAME.match(n)]
    except OSError:
        return
    for name in names:
        tmp = os.path.join(directory, name)
        try:
            fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.path.samestat(os.fstat(fd), os.lstat(tmp)):
                os.unlink(tmp)
        except OSError:   # held by a live save, already gone, or not lockable here
            pass
        finally:
            os.close(fd)


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


def _write_file(path, items):
    """Writes the checkpoint to a locked temp file next to `path`, then os.replace()s it over;
    first removes temp files that saves killed earlier left in the directory."""
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"save_checkpoint: directory {directory!r} does not exist")
    _remove_stale_temps(directory)
    lock_fd, tmp = _create_locked_temp(directory, os.path.basename(path))
    try:
        # A second descriptor for writing: the lock lives on lock_fd until after the rename.
        with os.fdopen(os.dup(lock_fd), "wb") as f:
            _write_records(f, items)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        os.close(lock_fd)
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
    def keep(name):
        if filters and name.startswith(filters):
            return False
        if specify and not name.startswith(specify):
            return False
        return choice_func is None or bool(choice_func(name))

    params = OrderedDict()
    for name, dtype_name, arr in _read_checkpoint(path, keep):
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
