"""kiln.jit -- Graph mode: compile Python source to kiln's IR and run it in C++."""
from kiln.jit.api import JitConfig, JitFunction, get_jit_stats, jit, mutable  # noqa: F401
from kiln.jit.source import GraphSyntaxError  # noqa: F401
