"""set_auto_parallel_context / get_auto_parallel_context / reset_auto_parallel_context and
ParallelMode (MindSpore's, in kiln.context and kiln).

kiln runs data parallelism: in ParallelMode.DATA_PARALLEL (or HYBRID_PARALLEL, which MindSpore
trains the same way when no operator is sharded) TrainOneStepCell and Model.train all-reduce
the gradients across the ranks (nn.DistributedGradReducer). Operator-sharding modes
(SEMI_AUTO_PARALLEL, AUTO_PARALLEL) need a sharding planner kiln does not have: they are
refused rather than run as something else.
"""
from kiln import _C

__all__ = ["ParallelMode", "set_auto_parallel_context", "get_auto_parallel_context",
           "reset_auto_parallel_context"]


class ParallelMode:
    STAND_ALONE = "stand_alone"
    DATA_PARALLEL = "data_parallel"
    HYBRID_PARALLEL = "hybrid_parallel"
    SEMI_AUTO_PARALLEL = "semi_auto_parallel"
    AUTO_PARALLEL = "auto_parallel"

    MODE_LIST = [STAND_ALONE, DATA_PARALLEL, HYBRID_PARALLEL, SEMI_AUTO_PARALLEL, AUTO_PARALLEL]


def _check_mode(v):
    if not isinstance(v, str):
        raise TypeError(f"set_auto_parallel_context: parallel_mode must be a str, got {v!r}")
    if v not in ParallelMode.MODE_LIST:
        raise ValueError(f"set_auto_parallel_context: parallel_mode must be one of "
                         f"{ParallelMode.MODE_LIST}, got {v!r}")
    if v in (ParallelMode.SEMI_AUTO_PARALLEL, ParallelMode.AUTO_PARALLEL):
        raise NotImplementedError(f"set_auto_parallel_context: parallel_mode {v!r} shards "
                                  f"operators, which kiln does not do; use 'data_parallel'")
    return v


def _check_bool(name):
    def check(v):
        if not isinstance(v, bool):
            raise TypeError(f"set_auto_parallel_context: {name} must be a bool, got {v!r}")
        return v
    return check


def _check_int(name, low):
    def check(v):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"set_auto_parallel_context: {name} must be an int, got {v!r}")
        if v < low:
            raise ValueError(f"set_auto_parallel_context: {name} must be >= {low}, got {v}")
        return v
    return check


def _any(v):
    return v


# key -> (default, validator). Keys for operator sharding and pipelines are stored so MindSpore
# scripts that set them run; kiln's data parallelism reads parallel_mode, gradients_mean,
# device_num, global_rank and parameter_broadcast.
_SCHEMA = {
    "parallel_mode": (ParallelMode.STAND_ALONE, _check_mode),
    "gradients_mean": (False, _check_bool("gradients_mean")),
    "device_num": (1, _check_int("device_num", 1)),
    "global_rank": (0, _check_int("global_rank", 0)),
    "parameter_broadcast": (False, _check_bool("parameter_broadcast")),
    "gradient_fp32_sync": (True, _check_bool("gradient_fp32_sync")),
    "full_batch": (False, _check_bool("full_batch")),
    "enable_parallel_optimizer": (False, _check_bool("enable_parallel_optimizer")),
    "search_mode": ("recursive_programming", _any),
    "auto_parallel_search_mode": ("recursive_programming", _any),
    "strategy_ckpt_load_file": ("", _any),
    "strategy_ckpt_save_file": ("", _any),
    "strategy_ckpt_config": ({}, _any),
    "dataset_strategy": ("data_parallel", _any),
    "all_reduce_fusion_config": ([], _any),
    "pipeline_stages": (1, _check_int("pipeline_stages", 1)),
    "pipeline_result_broadcast": (False, _any),
    "parallel_optimizer_config": ({}, _any),
    "pipeline_config": ({}, _any),
    "comm_fusion": ({}, _any),
    "enable_alltoall": (False, _any),
    "group_ckpt_save_file": ("", _any),
    "auto_pipeline": (False, _any),
}

_settings = {key: default for key, (default, _) in _SCHEMA.items()}
_explicit = set()  # keys the user set (device_num unset follows the group size)


def set_auto_parallel_context(**kwargs):
    """Sets auto-parallel keys (MindSpore's names); ValueError for an unknown key."""
    checked = {}
    for key, value in kwargs.items():
        if key not in _SCHEMA:
            raise ValueError(f"set_auto_parallel_context: unknown key {key!r}; known: "
                             f"{sorted(_SCHEMA)}")
        checked[key] = _SCHEMA[key][1](value)
    _settings.update(checked)
    _explicit.update(checked)


def get_auto_parallel_context(attr_key):
    """The value of `attr_key`; device_num and global_rank follow the communication world
    until set."""
    if attr_key not in _SCHEMA:
        raise ValueError(f"get_auto_parallel_context: unknown key {attr_key!r}")
    if attr_key == "device_num" and attr_key not in _explicit:
        return _C.comm_size("hccl_world_group")
    if attr_key == "global_rank" and attr_key not in _explicit:
        return _C.comm_rank("hccl_world_group")
    return _settings[attr_key]


def reset_auto_parallel_context():
    """Every key back to its default."""
    _settings.update({key: default for key, (default, _) in _SCHEMA.items()})
    _explicit.clear()


def data_parallel():
    """True when training reduces gradients across ranks."""
    return _settings["parallel_mode"] in (ParallelMode.DATA_PARALLEL,
                                          ParallelMode.HYBRID_PARALLEL)
