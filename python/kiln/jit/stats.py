"""Graph mode's counters for this process (get_jit_stats) and the warnings that cite the user's
own call site."""

import sys
import threading

from kiln import _C
from kiln.jit import lax
from kiln.jit.errors import is_kiln_frame

_STATS = {"compiles": 0, "cache_hits": 0, "eager_fallbacks": 0, "compile_seconds": 0.0,
          "recompile_reasons": [], "interpreter_nodes": []}
_STATS_LOCK = threading.Lock()  # `+=` on a shared counter is not atomic across threads


def get_jit_stats():
    """Counters for this process: graphs compiled, cache hits, calls run in PyNative because
    their function reached jit_cache_limit, seconds spent compiling, and why each recompilation
    of an already-compiled function happened; `interpreter_nodes`: where compiled graphs run
    Python code when they run (LAX run-time interpreter nodes), one dict per node with its
    function, file, line and why."""
    with _STATS_LOCK:
        return {
            "compiles": _STATS["compiles"],
            "cache_hits": _STATS["cache_hits"] + _C.fast_call_hits(),
            "eager_fallbacks": _STATS["eager_fallbacks"],
            "compile_seconds": _STATS["compile_seconds"],
            "recompile_reasons": list(_STATS["recompile_reasons"]),
            "interpreter_nodes": [dict(n) for n in _STATS["interpreter_nodes"]],
        }


def count(name, amount=1):
    with _STATS_LOCK:
        _STATS[name] += amount


def note_interpreted(fn_name, interpreted):
    """Records a graph's run-time interpreter nodes and warns about them, once per compile."""
    if not interpreted:
        return
    nodes = [{"function": f, "file": file, "line": line, "why": what}
             for f, file, line, what in interpreted]
    with _STATS_LOCK:
        _STATS["interpreter_nodes"].extend(nodes)
    import warnings  # noqa: PLC0415

    lines = "".join(f"\n  {n['file']}:{n['line']} in {n['function']}: {n['why']}" for n in nodes)
    warnings.warn(
        f"jit: {fn_name} runs Python code each time its graph runs (LAX run-time interpreter "
        f"nodes, slower than graph operations and not exportable):{lines}",
        lax.LaxRuntimeWarning,
        stacklevel=user_stacklevel(),
    )


def note_recompile(reason):
    with _STATS_LOCK:
        _STATS["recompile_reasons"].append(reason)


def user_stacklevel():
    """The warnings.warn stacklevel of the first caller outside kiln (the user's call)."""
    frame, level = sys._getframe(1), 1  # the frame calling warnings.warn is level 1
    while frame is not None and is_kiln_frame(frame):
        frame, level = frame.f_back, level + 1
    return level
