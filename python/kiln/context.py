"""kiln.context -- execution settings: PyNative or Graph mode, syntax level, graph dumps."""
import os

from kiln import _C, _graph_state
from kiln._auto_parallel import (  # noqa: F401
    ParallelMode,
    get_auto_parallel_context,
    reset_auto_parallel_context,
    set_auto_parallel_context,
)

__all__ = ["GRAPH_MODE", "PYNATIVE_MODE", "STRICT", "COMPATIBLE", "LAX", "set_context",
           "get_context", "reset_context", "set_device", "ParallelMode",
           "set_auto_parallel_context", "get_auto_parallel_context", "reset_auto_parallel_context"]

GRAPH_MODE = 0
PYNATIVE_MODE = 1
STRICT = 0
COMPATIBLE = 1
LAX = 2


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _check_mode(v):
    if not _is_int(v):
        raise TypeError(f"set_context: mode must be GRAPH_MODE (0) or PYNATIVE_MODE (1), got {v!r}")
    if v not in (GRAPH_MODE, PYNATIVE_MODE):
        raise ValueError(f"set_context: mode must be GRAPH_MODE (0) or PYNATIVE_MODE (1), got {v}")
    return v


def _check_syntax_level(v):
    if not _is_int(v):
        raise TypeError(f"set_context: jit_syntax_level must be STRICT or LAX, got {v!r}")
    if v not in (STRICT, COMPATIBLE, LAX):
        raise ValueError(f"set_context: jit_syntax_level must be STRICT (0), COMPATIBLE (1) or "
                         f"LAX (2), got {v}")
    return v


def _check_bool(name):
    def check(v):
        if not isinstance(v, bool) and v not in (0, 1):
            raise TypeError(f"set_context: {name} must be a bool, got {v!r}")
        return bool(v)
    return check


def _check_path(v):
    if not isinstance(v, (str, os.PathLike)):
        raise TypeError(f"set_context: save_graphs_path must be a path, got {v!r}")
    return os.fspath(v)


def _check_device(v):
    if not isinstance(v, str):
        raise TypeError(f"set_context: device_target must be a string, got {v!r}")
    if v.upper() != "CPU":
        raise ValueError(f"set_context: device_target {v!r} is not available; kiln runs on 'CPU'")
    return "CPU"


_JIT_LEVELS = ("O0", "O1", "O2")
# jit_config keys MindSpore's set_context takes: jit_level sets the default level; infer_boost
# ("on"/"off", an Ascend inference switch) is accepted and has no effect on kiln's CPU backend
_JIT_CONFIG_KEYS = ("jit_level", "infer_boost")


def _check_jit_level(v):
    if not isinstance(v, str):
        raise TypeError(f"set_context: jit_level must be 'O0', 'O1' or 'O2', got {v!r}")
    if v not in _JIT_LEVELS:
        raise ValueError(f"set_context: jit_level must be 'O0', 'O1' or 'O2', got {v!r}")
    return v


def _check_jit_config(v):
    if not isinstance(v, dict):
        raise TypeError(f"set_context: jit_config must be a dict, got {type(v).__name__}")
    unknown = sorted(set(v) - set(_JIT_CONFIG_KEYS))
    if unknown:
        raise ValueError(f"set_context: unknown jit_config keys {unknown}; known keys: "
                         f"{', '.join(_JIT_CONFIG_KEYS)}")
    if "jit_level" in v:
        _check_jit_level(v["jit_level"])
    if v.get("infer_boost", "off") not in ("on", "off"):
        raise ValueError(f"set_context: jit_config infer_boost must be 'on' or 'off', got "
                         f"{v['infer_boost']!r}")
    return dict(v)


def _check_nonnegative_int(name):
    def check(v):
        if not _is_int(v) or v < 0:
            raise TypeError(f"set_context: {name} must be a non-negative int, got {v!r}")
        return v
    return check


def _check_cache_limit(v):
    if not _is_int(v):
        raise TypeError(f"set_context: jit_cache_limit must be a positive int, got {v!r}")
    if v < 1:
        raise ValueError(f"set_context: jit_cache_limit must be at least 1, got {v}")
    return v


def _set_threads(v):
    if not _is_int(v) or v < 1:
        raise TypeError(f"set_context: runtime_num_threads must be a positive int, got {v!r}")
    _C.set_num_threads(v)
    return v


# key -> (default, validator). Keys MindSpore accepts that have no effect on a CPU-only
# framework (device_id, max_device_memory, ...) are accepted and stored so programs run as is.
_SCHEMA = {
    "mode": (PYNATIVE_MODE, _check_mode),
    "jit_syntax_level": (LAX, _check_syntax_level),
    "save_graphs": (False, _check_bool("save_graphs")),
    "save_graphs_path": (".", _check_path),
    "device_target": ("CPU", _check_device),
    "device_id": (0, _check_nonnegative_int("device_id")),
    "max_call_depth": (1000, _check_nonnegative_int("max_call_depth")),
    # compiled variants kept per jitted function (per instance for a method); past it, calls
    # that need a new variant run in PyNative, with one warning
    "jit_cache_limit": (64, _check_cache_limit),
    "pynative_synchronize": (False, _check_bool("pynative_synchronize")),
    "runtime_num_threads": (None, _set_threads),
    "deterministic": ("OFF", lambda v: v),
    "max_device_memory": ("1024GB", lambda v: v),
    # the level of graphs compiled without an explicit jit_level (ms.jit(), Graph-mode Cells)
    "jit_level": ("O1", _check_jit_level),
    "jit_config": ({}, _check_jit_config),
}

_settings = {key: default for key, (default, _) in _SCHEMA.items()}


def set_context(**kwargs):
    """Sets execution options; an unknown key raises ValueError, a bad value TypeError or
    ValueError."""
    checked = {}
    for key, value in kwargs.items():
        if key not in _SCHEMA:
            raise ValueError(f"set_context: unknown option {key!r}; known options: "
                             f"{', '.join(sorted(_SCHEMA))}")
        checked[key] = _SCHEMA[key][1](value)
    if "jit_level" in checked.get("jit_config", {}):  # jit_config={"jit_level": ...} sets it too
        checked.setdefault("jit_level", checked["jit_config"]["jit_level"])
    if "jit_level" in checked:
        _graph_state.bump_cell_epoch()  # armed fast calls ran graphs of the old level
    _settings.update(checked)


def get_context(key):
    """The current value of an option set by set_context (ValueError for an unknown key)."""
    if key not in _SCHEMA:
        raise ValueError(f"get_context: unknown option {key!r}; known options: "
                         f"{', '.join(sorted(_SCHEMA))}")
    if key == "runtime_num_threads":
        return _C.get_num_threads()
    return _settings[key]


def set_device(device_target, device_id=None):
    """MindSpore's set_device: the backend to run on. kiln runs on "CPU"; any other target is a
    ValueError naming it."""
    options = {"device_target": device_target}
    if device_id is not None:
        options["device_id"] = device_id
    set_context(**options)


def reset_context():
    """Restores every option to its default."""
    _settings.update({key: default for key, (default, _) in _SCHEMA.items()})
