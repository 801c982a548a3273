"""kiln.jit -- Graph mode: compile Python source to kiln's IR and run it in C++."""

from kiln.common.mutable import mutable  # noqa: F401
from kiln.jit.api import (  # noqa: F401
    JitCacheLimitWarning,
    JitConfig,
    JitFunction,
    jit,
)
from kiln.jit.cell_interface import CellBase  # noqa: F401
from kiln.jit.guards import JitSideEffectWarning  # noqa: F401
from kiln.jit.lax import LaxRuntimeWarning  # noqa: F401
from kiln.jit.source import GraphSyntaxError  # noqa: F401
from kiln.jit.stats import get_jit_stats  # noqa: F401
