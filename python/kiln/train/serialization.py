"""Checkpoints: save_checkpoint, load_checkpoint, load_param_into_net, as MindSpore 2.10's.

Formats (docs/checkpoints.md): "ckpt" is MindSpore's protobuf layout, written by default and
read by MindSpore (parsed by the engine, csrc/engine/checkpoint_file.h); "safetensors" is a real
safetensors file (the safetensors library). Files in kiln's earlier format ("KILNCKPT",
_kiln_ckpt.py) still load with format="ckpt": the first bytes tell the layouts apart. No format
executes code on load; a damaged file raises CheckpointError (a ValueError) naming the file and
the problem.

Saving is atomic: the file is written to a temporary file in the same directory, fsynced and
moved over the target with os.replace, so a failure mid-save leaves the previous file intact.
The temporary file is named ".<target>.<random>.kiln-tmp" and its writer holds an exclusive
flock on it until the rename; a killed writer's lock dies with it, so the next save into the
same directory deletes every such file nobody holds a lock on (see _remove_stale_temps).
"""
import os
import re
import tempfile
import warnings
from collections import OrderedDict

import numpy as np

from kiln import _C
from kiln.common import dtype as mstype
from kiln.common.parameter import Parameter
from kiln.common.tensor import Tensor
from kiln.nn.cell import Cell
from kiln.train import _ckpt_codecs as codecs
from kiln.train import _kiln_ckpt as kiln_format
from kiln.train._kiln_ckpt import CheckpointError

try:
    import fcntl
except ImportError:   # not POSIX: a failed save still removes its temp file, a killed one cannot
    fcntl = None

__all__ = ["save_checkpoint", "load_checkpoint", "load_param_into_net", "CheckpointError"]

_FORMATS = ("ckpt", "safetensors")
# Temp files: "." + target + "." + mkstemp's 8 random characters + suffix.
_TEMP_SUFFIX = ".kiln-tmp"
_TEMP_NAME = re.compile(r"^\..+\.(ckpt|safetensors)\.[A-Za-z0-9_]{8}" + re.escape(_TEMP_SUFFIX)
                        + "$")


class CheckpointMismatchError(ValueError, RuntimeError):
    """A checkpoint value that does not fit the network (shape, dtype). Both a ValueError and the
    RuntimeError MindSpore raises for this case."""


class CheckpointNotFoundError(FileNotFoundError, ValueError):
    """A checkpoint file that does not exist: MindSpore raises ValueError, kiln raised
    FileNotFoundError; this is both."""


# ---- atomic writing ----

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


def _write_file(path, write):
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
            write(f)
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


# ---- saving ----

def _as_tensor(name, value, where):
    if isinstance(value, _C.TensorBase):
        return value
    if isinstance(value, (bool, int, float, np.ndarray, np.generic)):
        return Tensor(value)
    raise TypeError(f"save_checkpoint: the value of '{name}' ({where}) must be a Tensor, "
                    f"Parameter, ndarray or number, got {type(value).__name__}")


def _collect(save_obj, append_dict, choice_func):
    """An ordered name -> Tensor (or str) mapping of everything to save. choice_func filters the
    network's or save_obj's entries; append_dict entries are always saved, as in MindSpore."""
    items = OrderedDict()

    def add(name, value, where, choose=True):
        if not isinstance(name, str) or not name:
            raise TypeError(f"save_checkpoint: names must be non-empty str, got {name!r} "
                            f"({where})")
        if choose and choice_func is not None and not choice_func(name):
            return
        if name in items:
            raise ValueError(f"save_checkpoint: the name '{name}' appears twice ({where}); "
                             f"parameter names must be unique")
        items[name] = value if isinstance(value, str) else _as_tensor(name, value, where)

    if isinstance(save_obj, Cell):
        for path, param in save_obj.parameters_and_names():
            add(param.name, param, f"parameter at '{path}'")
    elif isinstance(save_obj, dict):
        for name, value in save_obj.items():
            add(name, value, "save_obj dict")
    elif isinstance(save_obj, (list, tuple)):
        for entry in save_obj:
            if isinstance(entry, Parameter):
                add(entry.name, entry, "save_obj list")
            elif isinstance(entry, dict) and "name" in entry and "data" in entry:
                add(entry["name"], entry["data"], "save_obj list")
            else:
                raise TypeError("save_checkpoint: a list save_obj must hold Parameters or dicts "
                                "with 'name' and 'data'")
    else:
        raise TypeError(f"save_checkpoint: save_obj must be a Cell, a dict or a list, got "
                        f"{type(save_obj).__name__}")
    for name, value in (append_dict or {}).items():
        if not isinstance(value, (bool, int, float, str, _C.TensorBase)):
            raise TypeError(f"save_checkpoint: append_dict values must be int, float, bool, str, "
                            f"Tensor or Parameter, got {type(value).__name__} for '{name}'")
        add(name, value, "append_dict", choose=False)
    return items


def _checkpoint_path(ckpt_file_name, who):
    if not isinstance(ckpt_file_name, (str, os.PathLike)):
        raise TypeError(f"{who}: ckpt_file_name must be a str or path, got "
                        f"{type(ckpt_file_name).__name__}")
    return os.path.abspath(os.fspath(ckpt_file_name))


def _check_format(format, who):
    if format not in _FORMATS:
        raise ValueError(f"{who}: format must be 'ckpt' or 'safetensors', got {format!r}")


def _check_type(value, types, name, who):
    if not isinstance(value, types):
        raise TypeError(f"{who}: {name} must be {' or '.join(t.__name__ for t in types)}, got "
                        f"{type(value).__name__}")


def save_checkpoint(save_obj, ckpt_file_name, integrated_save=True, async_save=False,
                    append_dict=None, enc_key=None, enc_mode="AES-GCM", choice_func=None,
                    crc_check=False, format="ckpt", **kwargs):
    """Saves a Cell's parameters (by Parameter.name), a name -> value dict, or a list of
    Parameters or {'name', 'data'} dicts to ckpt_file_name (".<format>" appended when the name
    does not end with it, as MindSpore does), in MindSpore's .ckpt layout or as safetensors.
    append_dict adds name -> number/str/Tensor entries (not filtered by choice_func); crc_check
    adds MindSpore's CRC32. The write is atomic; async_save saves before returning."""
    who = "save_checkpoint"
    _check_format(format, who)
    _check_type(integrated_save, (bool,), "integrated_save", who)
    _check_type(crc_check, (bool,), "crc_check", who)
    if not isinstance(async_save, bool) and async_save not in ("process", "thread"):
        raise ValueError(f"{who}: async_save must be a bool, 'process' or 'thread', got "
                         f"{async_save!r}")
    _check_type(enc_key, (type(None), bytes), "enc_key", who)
    if enc_key is not None:
        raise ValueError(f"{who}: encrypted checkpoints (enc_key) are not supported by kiln")
    if append_dict is not None and not isinstance(append_dict, dict):
        raise TypeError(f"{who}: append_dict must be a dict, got {type(append_dict).__name__}")
    unknown = set(kwargs) - {"incremental", "global_step_num", "remove_redundancy"}
    if unknown:
        warnings.warn(f"{who}: ignoring unknown arguments {sorted(unknown)}", stacklevel=2)
    path = _checkpoint_path(ckpt_file_name, who)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{who}: {path!r} is a directory, it must be a file name")
    if not path.endswith(format):
        path += f".{format}"
    entries = [codecs.entry_of(name, value)
               for name, value in _collect(save_obj, append_dict, choice_func).items()]
    write = codecs.write_ckpt if format == "ckpt" else codecs.write_safetensors
    _write_file(path, lambda f: write(f, entries, crc_check))


# ---- loading ----

def _check_prefix(value, name):
    if value is None:
        return ()
    if not isinstance(value, (str, list, tuple)):
        raise TypeError(f"load_checkpoint: {name} must be a str, list or tuple of str, got "
                        f"{type(value).__name__}")
    values = (value,) if isinstance(value, str) else tuple(value)
    if not values:
        raise ValueError(f"load_checkpoint: {name} cannot be an empty list or tuple")
    for v in values:
        if not isinstance(v, str):
            raise TypeError(f"load_checkpoint: every {name} must be a str, got "
                            f"{type(v).__name__}")
        if not v:
            raise ValueError(f"load_checkpoint: {name} cannot include ''")
    return values


def _resolve(ckpt_file_name, format):
    path = _checkpoint_path(ckpt_file_name, "load_checkpoint")
    if not os.path.isfile(path) and os.path.isfile(f"{path}.{format}"):
        path = f"{path}.{format}"  # save_checkpoint appends the suffix; accept the name without
    if not os.path.isfile(path):
        raise CheckpointNotFoundError(f"load_checkpoint: checkpoint file {path!r} does not exist")
    return path


def _read_entries(path, format, keep, crc_check):
    """name -> Parameter (or str) of every entry `keep` accepts."""
    out = OrderedDict()
    with open(path, "rb") as f:
        if format == "safetensors":
            entries, metadata = codecs.read_safetensors(f, path, crc_check)
            if crc_check and "crc_num" not in metadata:
                warnings.warn(f"load_checkpoint: {path!r} holds no crc_num to check", stacklevel=3)
        elif f.read(len(kiln_format.MAGIC)) == kiln_format.MAGIC:
            for name, dtype_name, arr in kiln_format._read_checkpoint(path, keep):
                dtype = mstype.to_dtype(dtype_name)
                tensor = Tensor(arr, dtype) if dtype is mstype.bfloat16 else Tensor(arr)
                out[name] = Parameter(tensor, name=name)
            return out
        else:
            f.seek(0)
            if crc_check and not codecs.has_crc(f):
                warnings.warn(f"load_checkpoint: {path!r} holds no crc_num to check", stacklevel=3)
            entries = codecs.read_ckpt(f, path)
    for entry in entries:
        if keep(entry[0]):
            out[entry[0]] = codecs.value_of(entry, path)
    return out


def load_checkpoint(ckpt_file_name, net=None, strict_load=False, filter_prefix=None,
                    dec_key=None, dec_mode="AES-GCM", specify_prefix=None, choice_func=None,
                    crc_check=False, remove_redundancy=False, format="ckpt"):
    """Reads a checkpoint (MindSpore's .ckpt, kiln's earlier format, or safetensors) into a dict
    of name -> Parameter (str values as str), loaded into `net` too when given. filter_prefix
    drops names with those prefixes, specify_prefix keeps only those; choice_func(name) filters
    when neither is given. crc_check verifies MindSpore's CRC32 (a .ckpt trailer, when present,
    is always verified). remove_redundancy has nothing to restore on one device."""
    who = "load_checkpoint"
    _check_format(format, who)
    filters = _check_prefix(filter_prefix, "filter_prefix")
    specify = _check_prefix(specify_prefix, "specify_prefix")
    _check_type(crc_check, (bool,), "crc_check", who)
    _check_type(remove_redundancy, (bool,), "remove_redundancy", who)
    _check_type(dec_key, (type(None), bytes), "dec_key", who)
    if dec_key is not None:
        raise ValueError(f"{who}: encrypted checkpoints (dec_key) are not supported by kiln")
    path = _resolve(ckpt_file_name, format)
    use_choice = not filters and not specify and choice_func is not None

    def keep(name):
        if filters and name.startswith(filters):
            return False
        if specify and not name.startswith(specify):
            return False
        return not use_choice or bool(choice_func(name))

    params = _read_entries(path, format, keep, crc_check)
    if not params:   # MindSpore's ValueError (CheckpointError is one)
        raise CheckpointError(f"{who}: the parameters loaded from {path!r} are empty after "
                              f"filtering; check filter_prefix, specify_prefix and choice_func")
    if net is not None:
        load_param_into_net(net, params, strict_load=strict_load)
    return params


# ---- into a network ----

_FLOATS = ("Float16", "Float32", "Float64", "BFloat16")
_INTS = ("Int8", "Int16", "Int32", "Int64")


def _update_param(param, value, strict_load):
    """Sets param from a checkpoint value as MindSpore does: trailing 1-dims may be dropped,
    dtypes convert within floats or within signed ints unless strict_load."""
    if not isinstance(value, _C.TensorBase):
        value = Tensor(np.asarray(value))
    shape, new_shape = tuple(param.shape), tuple(value.shape)
    if shape != new_shape:
        if (len(new_shape) > len(shape) and new_shape[:len(shape)] == shape
                and all(d == 1 for d in new_shape[len(shape):])):
            value = value.reshape(shape)
        else:
            raise CheckpointMismatchError(
                f"load_param_into_net: parameter '{param.name}' has shape {shape} in the "
                f"network but shape {new_shape} in the checkpoint")
    if value.dtype != param.dtype:
        pair = (str(value.dtype), str(param.dtype))
        if strict_load or not (all(t in _FLOATS for t in pair) or all(t in _INTS for t in pair)):
            raise CheckpointMismatchError(
                f"load_param_into_net: parameter '{param.name}' is {param.dtype} in the network "
                f"but {value.dtype} in the checkpoint")
        value = value.astype(param.dtype)
    param.set_data(value)


def _load_by_prefix(net, parameter_dict, param_not_load, ckpt_not_load, strict_load):
    """MindSpore's fallback when not strict: find the prefix that checkpoint names carry over
    the network's (e.g. "network.") and load every missing parameter under it."""
    tried = set()
    while param_not_load:
        prefix = next((k[:-len(n)] for n in param_not_load for k, v in parameter_dict.items()
                       if k.endswith(n) and k[:-len(n)] not in tried and not isinstance(v, str)),
                      None)
        if prefix is None:
            return
        tried.add(prefix)
        for _, param in net.parameters_and_names():
            key = prefix + param.name
            if (param.name in param_not_load and key in parameter_dict
                    and not isinstance(parameter_dict[key], str)):
                _update_param(param, parameter_dict[key], strict_load)
                param_not_load.remove(param.name)
                if key in ckpt_not_load:
                    ckpt_not_load.remove(key)


def load_param_into_net(net, parameter_dict, strict_load=False, remove_redundancy=False):
    """Copies checkpoint values into net's parameters (in place, by Parameter.name).

    Returns (param_not_load, ckpt_not_load): the network parameters that got no value and the
    checkpoint entries that were not used; a warning names the former. A shape or dtype that
    cannot be converted raises (RuntimeError, also a ValueError). With strict_load=False,
    names missing exactly are looked up under a common prefix of the checkpoint's names.
    """
    if not isinstance(net, Cell):
        raise TypeError(f"load_param_into_net: net must be a Cell, got {type(net).__name__}")
    if not isinstance(parameter_dict, dict):
        raise TypeError(f"load_param_into_net: parameter_dict must be a dict, got "
                        f"{type(parameter_dict).__name__}")
    _check_type(strict_load, (bool,), "strict_load", "load_param_into_net")
    _check_type(remove_redundancy, (bool,), "remove_redundancy", "load_param_into_net")
    param_not_load, ckpt_not_load = [], list(parameter_dict)
    for _, param in net.parameters_and_names():
        if param.name in parameter_dict:
            value = parameter_dict[param.name]
            if isinstance(value, str):   # an appended string: nothing a parameter can hold
                continue
            _update_param(param, value, strict_load)
            ckpt_not_load.remove(param.name)
        elif not param.name.startswith("accu_grads"):
            param_not_load.append(param.name)
    if param_not_load and not strict_load:
        _load_by_prefix(net, parameter_dict, param_not_load, ckpt_not_load, strict_load)
    if param_not_load:
        warnings.warn(f"load_param_into_net: {len(param_not_load)} network parameter(s) were "
                      f"not in the checkpoint: {param_not_load}", stacklevel=2)
    return param_not_load, ckpt_not_load
