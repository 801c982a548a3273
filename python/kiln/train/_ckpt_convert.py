"""ckpt_to_safetensors and safetensors_to_ckpt, as MindSpore 2.10's: one file, or every file in
the rank* folders of a directory (MindSpore's layout of per-device checkpoints)."""
import os
import re

from kiln.train import serialization

__all__ = ["ckpt_to_safetensors", "safetensors_to_ckpt"]

_SUFFIX = {"ckpt": ".ckpt", "safetensors": ".safetensors"}


def _convert_one(src, dst_dir, name_map, src_format, dst_format):
    params = serialization.load_checkpoint(src, format=src_format)
    if name_map is not None:
        params = {name_map.get(k, k): v for k, v in params.items()}
    name = os.path.basename(src).replace(_SUFFIX[src_format], _SUFFIX[dst_format])
    serialization.save_checkpoint(params, os.path.join(dst_dir, name), format=dst_format)


def _tasks(file_path, save_path, file_name_regex, who, src_format):
    """(source file, destination folder) of every matching file in file_path's rank* folders."""
    ranks = sorted(d for d in os.listdir(file_path)
                   if d.startswith("rank") and os.path.isdir(os.path.join(file_path, d)))
    if not ranks:
        raise ValueError(f"For '{who}', no directories starting with 'rank' found in "
                         f"{file_path}.")
    tasks = []
    for rank in ranks:
        src_dir = os.path.join(file_path, rank)
        dst_dir = os.path.join(save_path, rank) if save_path is not None else src_dir
        os.makedirs(dst_dir, exist_ok=True)
        for name in sorted(os.listdir(src_dir)):
            if name.endswith(_SUFFIX[src_format]) and (
                    file_name_regex is None or re.search(file_name_regex, name)):
                tasks.append((os.path.join(src_dir, name), dst_dir))
    return tasks


def _convert(file_path, save_path, name_map, file_name_regex, processes_num, src_format,
             dst_format, who):
    if not isinstance(file_path, (str, os.PathLike)):
        raise TypeError(f"For {who}, file_path must be a str, got {type(file_path).__name__}")
    file_path = os.fspath(file_path)
    if not os.path.isdir(file_path) and not os.path.isfile(file_path):
        raise ValueError(f"For {who}, the input path must be a valid path or file, but got "
                         f"{file_path}")
    if save_path and os.path.splitext(save_path)[1]:
        raise ValueError(f"For {who}, the save_path must be a directory, but got '{save_path}'")
    if name_map is not None and not isinstance(name_map, dict):
        raise ValueError(f"For {who}, name_map must be a dict, got {type(name_map).__name__}")
    if isinstance(processes_num, bool) or not isinstance(processes_num, int) or processes_num < 1:
        raise ValueError(f"For {who}, processes_num must be a positive int, got "
                         f"{processes_num!r}")
    if os.path.isdir(file_path):
        # One process: the files are converted one after another (processes_num is accepted).
        for src, dst_dir in _tasks(file_path, save_path, file_name_regex, who, src_format):
            _convert_one(src, dst_dir, name_map, src_format, dst_format)
        return
    if not file_path.endswith(_SUFFIX[src_format]):
        raise ValueError(f"For {who}, the input file must be a {_SUFFIX[src_format]} file, but "
                         f"got {file_path}")
    if file_name_regex is not None and not re.findall(file_name_regex, file_path):
        raise ValueError(f"For {who}, the input file does not match the regular expression.")
    if save_path:
        os.makedirs(save_path, exist_ok=True)
    _convert_one(file_path, save_path or os.path.dirname(os.path.abspath(file_path)), name_map,
                 src_format, dst_format)


def ckpt_to_safetensors(file_path, save_path=None, name_map=None, file_name_regex=None,
                        processes_num=1):
    """Converts a .ckpt file (or those in file_path's rank* folders) to safetensors, in
    save_path (default: beside each file), renaming parameters by name_map."""
    _convert(file_path, save_path, name_map, file_name_regex, processes_num, "ckpt",
             "safetensors", "ckpt_to_safetensors")


def safetensors_to_ckpt(file_path, save_path=None, name_map=None, file_name_regex=None,
                        processes_num=1):
    """Converts a .safetensors file (or those in file_path's rank* folders) to MindSpore's
    .ckpt layout, in save_path (default: beside each file), renaming parameters by name_map."""
    _convert(file_path, save_path, name_map, file_name_regex, processes_num, "safetensors",
             "ckpt", "safetensors_to_ckpt")
