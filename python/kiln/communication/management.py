"""kiln.communication's process and group management: init, release, ranks, groups.

init() loads libkiln_comm.so (MPI, csrc/comm/mpi_comm.cc) into the engine when the process was
started by an MPI launcher (mpirun, msrun, python -m kiln.run); anywhere else the process is a
single rank, on which every collective is the identity. The collectives never go through
Python: their kernels call the library the engine loaded.
"""
import atexit
import os
import pathlib
import sys

from kiln import _C, log

__all__ = ["GlobalComm", "init", "release", "get_rank", "get_group_size", "get_local_rank",
           "get_local_rank_size", "get_world_rank_from_group_rank",
           "get_group_rank_from_world_rank", "create_group", "destroy_group", "get_comm_name",
           "get_process_group_ranks", "HCCL_WORLD_COMM_GROUP", "NCCL_WORLD_COMM_GROUP",
           "MCCL_WORLD_COMM_GROUP"]

HCCL_WORLD_COMM_GROUP = "hccl_world_group"
NCCL_WORLD_COMM_GROUP = "nccl_world_group"
MCCL_WORLD_COMM_GROUP = "mccl_world_group"

# Environment variables an MPI launcher sets in each process it starts (OpenMPI, MPICH/PMI).
_LAUNCHER_ENVS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")
DEFAULT_TIMEOUT_S = 60.0


class GlobalComm:
    """World communication facts: BACKEND ("mccl": kiln runs on CPU, as MindSpore's CPU
    backend), WORLD_COMM_GROUP, INITED, CHECK_ENVS."""
    BACKEND = "mccl"
    WORLD_COMM_GROUP = HCCL_WORLD_COMM_GROUP
    INITED = False
    CHECK_ENVS = True


_group_names = {}  # group name -> world ranks, for the groups create_group made


def _library_path():
    """libkiln_comm.so beside the extension: kiln/lib in an installed package and a dev tree."""
    return pathlib.Path(_C.__file__).resolve().parent / "lib" / "libkiln_comm.so"


def _timeout():
    text = os.environ.get("KILN_COMM_TIMEOUT", str(DEFAULT_TIMEOUT_S))
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"init: KILN_COMM_TIMEOUT must be a number of seconds, got "
                         f"{text!r}") from None
    if not value > 0:
        raise ValueError(f"init: KILN_COMM_TIMEOUT must be positive, got {text!r}")
    return value


def _under_launcher():
    return any(name in os.environ for name in _LAUNCHER_ENVS)


def _abort_on_uncaught(hook):
    """An uncaught exception on one rank ends every rank at once (MPI_Abort) instead of leaving
    the others waiting in a collective until their timeout."""
    def excepthook(kind, value, tb):
        hook(kind, value, tb)
        sys.stderr.flush()
        _C.comm_abort(1)
    return excepthook


def _default_threads():
    """Each rank takes its share of the cores (cores / ranks on this node), unless the thread
    count was already set below the cores (kiln.set_num_threads, runtime_num_threads)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if _C.get_num_threads() < cores:
        return
    _C.set_num_threads(max(1, cores // max(1, _C.comm_local_size())))


def init(backend_name=None):
    """Initializes communication. Under an MPI launcher this loads the MPI library; otherwise
    the process is rank 0 of a world of one. backend_name: None, "mccl", "hccl" or "nccl"
    (all run over MPI on CPU)."""
    if backend_name is not None and not isinstance(backend_name, str):
        raise TypeError(f"For 'init', the argument 'backend_name' must be a str, got "
                        f"{type(backend_name).__name__}")
    if backend_name not in (None, "mccl", "hccl", "nccl"):
        raise RuntimeError(f"For 'init', the argument 'backend_name' must be one of 'hccl', "
                           f"'nccl' and 'mccl', but got 'backend_name' : {backend_name}")
    if GlobalComm.INITED:
        return
    if _under_launcher():
        path = _library_path()
        if not path.exists():
            raise RuntimeError(f"init: the communication library {path} is missing; kiln was "
                               f"built without MPI (scripts/bootstrap.sh installs OpenMPI)")
        _C.comm_load(str(path), _timeout())
        # MPI needs its finalize before the process exits (the launcher reports a rank that
        # skipped it as failed); release() there unless the script called it.
        atexit.register(_release_at_exit)
        if _C.comm_size(HCCL_WORLD_COMM_GROUP) > 1:
            sys.excepthook = _abort_on_uncaught(sys.excepthook)
        _default_threads()
    else:
        log.info("kiln.communication.init: not started by an MPI launcher; running as a single "
                 "rank")
    GlobalComm.BACKEND = "mccl"
    GlobalComm.WORLD_COMM_GROUP = MCCL_WORLD_COMM_GROUP
    GlobalComm.INITED = True


def release():
    """Ends communication (MPI_Finalize); the groups are forgotten."""
    _group_names.clear()
    _C.comm_release()
    GlobalComm.INITED = False


def _release_at_exit():
    if _C.comm_loaded():
        release()


def _check_group(group, who):
    if not isinstance(group, str):
        raise TypeError(f"For '{who}', the argument 'group' must be type of string, but got "
                        f"'group' type : {type(group)}.")
    return group


def _require_init(who):
    if not GlobalComm.INITED:
        raise RuntimeError(f"For '{who}', call kiln.communication.init() first")


def get_rank(group=GlobalComm.WORLD_COMM_GROUP):
    """This process's rank in `group`. Before init: the RANK_ID environment variable, or 0."""
    _check_group(group, "get_rank")
    if not GlobalComm.INITED:
        return int(os.environ.get("RANK_ID", "0"))
    return _C.comm_rank(group)


def get_group_size(group=GlobalComm.WORLD_COMM_GROUP):
    """The number of ranks in `group`. Before init: the RANK_SIZE environment variable, or 1."""
    _check_group(group, "get_group_size")
    if not GlobalComm.INITED:
        return int(os.environ.get("RANK_SIZE", "1"))
    return _C.comm_size(group)


def get_local_rank(group=GlobalComm.WORLD_COMM_GROUP):
    """This process's rank among the ranks on its node."""
    _check_group(group, "get_local_rank")
    _require_init("get_local_rank")
    return _C.comm_local_rank()


def get_local_rank_size(group=GlobalComm.WORLD_COMM_GROUP):
    """The number of ranks on this node."""
    _check_group(group, "get_local_rank_size")
    _require_init("get_local_rank_size")
    return _C.comm_local_size()


def get_process_group_ranks(group=GlobalComm.WORLD_COMM_GROUP):
    """The world ranks of `group`, in group order."""
    _check_group(group, "get_process_group_ranks")
    _require_init("get_process_group_ranks")
    return list(_C.comm_group_ranks(group))


def get_world_rank_from_group_rank(group, group_rank_id):
    """The world rank of rank `group_rank_id` of `group`."""
    _check_group(group, "get_world_rank_from_group_rank")
    _require_init("get_world_rank_from_group_rank")
    if _C.comm_is_world_group(group):
        raise ValueError("For 'get_world_rank_from_group_rank', the argument 'group' cannot be "
                         "the world group")
    ranks = get_process_group_ranks(group)
    if not 0 <= group_rank_id < len(ranks):
        raise ValueError(f"For 'get_world_rank_from_group_rank', group_rank_id {group_rank_id} "
                         f"is outside group '{group}' of {len(ranks)} ranks")
    return ranks[group_rank_id]


def get_group_rank_from_world_rank(world_rank_id, group):
    """The rank in `group` of world rank `world_rank_id`."""
    _check_group(group, "get_group_rank_from_world_rank")
    _require_init("get_group_rank_from_world_rank")
    if _C.comm_is_world_group(group):
        raise ValueError("For 'get_group_rank_from_world_rank', the argument 'group' cannot be "
                         "the world group")
    ranks = get_process_group_ranks(group)
    if world_rank_id not in ranks:
        raise ValueError(f"For 'get_group_rank_from_world_rank', world rank {world_rank_id} is "
                         f"not in group '{group}'")
    return ranks.index(world_rank_id)


def create_group(group, rank_ids, options=None):
    """Creates `group` of the world ranks `rank_ids`; every member calls it, in the same order
    relative to other group creations (MPI_Comm_create_group)."""
    _check_group(group, "create_group")
    _require_init("create_group")
    if not isinstance(rank_ids, (list, tuple)) or not all(
            isinstance(r, int) and not isinstance(r, bool) for r in rank_ids):
        raise TypeError(f"For 'create_group', the argument 'rank_ids' must be a list of ints, "
                        f"got {rank_ids!r}")
    if len(set(rank_ids)) != len(rank_ids):
        raise ValueError(f"For 'create_group', rank_ids has duplicates: {rank_ids}")
    _C.comm_create_group(group, list(rank_ids))
    _group_names[group] = list(rank_ids)


def destroy_group(group):
    """Destroys a group create_group made."""
    _check_group(group, "destroy_group")
    _require_init("destroy_group")
    _C.comm_destroy_group(group)
    _group_names.pop(group, None)


def get_comm_name(group=GlobalComm.WORLD_COMM_GROUP):
    """The communicator's name: the group's name."""
    _check_group(group, "get_comm_name")
    _require_init("get_comm_name")
    return GlobalComm.WORLD_COMM_GROUP if _C.comm_is_world_group(group) else group
