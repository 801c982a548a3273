"""kiln.dataset.config: the pipeline's process-wide settings (mindspore.dataset.config)."""
import os
import random

import numpy as np

# MindSpore reports this seed while none is set, and then seeds each pipeline at random.
_DEFAULT_SEED = 5489

_state = {
    "seed": None,
    "num_parallel_workers": max(1, min(8, os.cpu_count() or 1)),
    "prefetch_size": 16,
}


def _check_int(name, value, low, high=2**31 - 1):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name}: {value} is not within [{low}, {high}]")


def set_seed(seed):
    """Makes every pipeline built afterwards reproducible: shuffles, samplers and random
    transforms draw from generators derived from this seed and each row's place, never from
    the thread that ran them. Seeds Python's and NumPy's global generators too, as MindSpore
    does."""
    _check_int("set_seed", seed, 0, 2**32 - 1)
    _state["seed"] = seed
    random.seed(seed)
    np.random.seed(seed)


def get_seed():
    return _DEFAULT_SEED if _state["seed"] is None else _state["seed"]


def _pipeline_seed():
    """The base seed of a pipeline being built: the set seed, or a fresh random one."""
    if _state["seed"] is None:
        return int(np.random.SeedSequence().entropy % 2**32)
    return _state["seed"]


def set_num_parallel_workers(num):
    _check_int("set_num_parallel_workers", num, 1, 512)
    _state["num_parallel_workers"] = num


def get_num_parallel_workers():
    return _state["num_parallel_workers"]


def set_prefetch_size(size):
    """Rows each stage's output queue holds: how far loading runs ahead of the consumer."""
    _check_int("set_prefetch_size", size, 1)
    _state["prefetch_size"] = size


def get_prefetch_size():
    return _state["prefetch_size"]
