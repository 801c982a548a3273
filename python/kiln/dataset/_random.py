"""Random numbers for transforms: per row inside a pipeline, global outside one."""
import threading

import numpy as np

from kiln.dataset import config

_local = threading.local()
_global = {"rng": None, "seed": None}


class _RowKey:
    """The place of a row: (pipeline seed, stage, epoch, row). Its generator is made on first
    use, so rows that draw nothing cost nothing."""

    __slots__ = ("key", "rng")

    def __init__(self, key):
        self.key = key
        self.rng = None


def enter_row(key):
    """Makes `key` this thread's row (a map worker calls this per row); returns the previous
    one for leave_row."""
    previous = getattr(_local, "row", None)
    _local.row = _RowKey(key)
    return previous


def leave_row(previous):
    _local.row = previous


def generator():
    """The generator a random transform draws from: the current row's inside a pipeline (so
    results never depend on which worker ran the row), else one seeded by config.set_seed."""
    row = getattr(_local, "row", None)
    if row is not None:
        if row.rng is None:
            row.rng = np.random.default_rng(row.key)
        return row.rng
    seed = config.get_seed()
    if _global["rng"] is None or _global["seed"] != seed:
        _global["rng"] = np.random.default_rng(seed)
        _global["seed"] = seed
    return _global["rng"]
