"""kiln.jit -- Graph mode: compile Python source to kiln's IR and run it in C++."""

from kiln.jit.api import (  # noqa: F401
    JitCacheLimitWarning,
    JitConfig,
    JitFunction,
    get_jit_stats,
    jit,
    mutable,
)
from kiln.jit.api import cell_graph_call as _cell_graph_call  # noqa: E402
from kiln.jit.guards import JitSideEffectWarning  # noqa: F401
from kiln.jit.source import GraphSyntaxError  # noqa: F401
from kiln.nn import cell as _cell  # noqa: E402

_cell._GRAPH_RUNNER = _cell_graph_call  # Cell.__call__ hands Graph-mode calls to the compiler
